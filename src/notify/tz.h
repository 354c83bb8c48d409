#pragma once
// Time zones for time_intervals' `location`: "UTC", "Local" (the process's
// zone) or an IANA name read from /usr/share/zoneinfo (TZif v1/v2/v3, as
// Go's time.LoadLocation does).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::notify {

class Zone {
 public:
  // Seconds east of UTC at `unix_secs`.
  int32_t OffsetAt(int64_t unix_secs) const;

 private:
  friend Result<std::shared_ptr<const Zone>> LoadZone(std::string_view name);
  bool local_ = false;
  std::vector<int64_t> transitions_;  // ascending
  std::vector<int32_t> offsets_;      // offset from transitions_[i] on
  int32_t initial_offset_ = 0;
};

Result<std::shared_ptr<const Zone>> LoadZone(std::string_view name);

}  // namespace trainwatch::notify
