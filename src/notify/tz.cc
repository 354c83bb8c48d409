#include "notify/tz.h"

#include <time.h>

#include <algorithm>

#include "base/file.h"

namespace trainwatch::notify {
namespace {

int64_t Be(const std::string& d, size_t off, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++) v = (v << 8) | static_cast<uint8_t>(d[off + i]);
  if (n == 4) return static_cast<int32_t>(static_cast<uint32_t>(v));
  return static_cast<int64_t>(v);
}

}  // namespace

int32_t Zone::OffsetAt(int64_t unix_secs) const {
  if (local_) {
    time_t t = static_cast<time_t>(unix_secs);
    struct tm tm {};
    localtime_r(&t, &tm);
    return static_cast<int32_t>(tm.tm_gmtoff);
  }
  auto it = std::upper_bound(transitions_.begin(), transitions_.end(), unix_secs);
  if (it == transitions_.begin()) return initial_offset_;
  return offsets_[static_cast<size_t>(it - transitions_.begin()) - 1];
}

Result<std::shared_ptr<const Zone>> LoadZone(std::string_view name) {
  auto z = std::make_shared<Zone>();
  if (name.empty() || name == "UTC") return std::shared_ptr<const Zone>(z);
  if (name == "Local") {
    z->local_ = true;
    return std::shared_ptr<const Zone>(z);
  }
  if (name.find("..") != std::string_view::npos || name.starts_with("/")) {
    return Status::InvalidArgument("unknown time zone " + std::string(name));
  }
  std::string d;
  if (!file::ReadFile("/usr/share/zoneinfo/" + std::string(name), &d).ok() || d.size() < 44 || d.compare(0, 4, "TZif") != 0) {
    return Status::InvalidArgument("unknown time zone " + std::string(name));
  }
  auto counts = [&](size_t off, int64_t c[6]) {
    for (int i = 0; i < 6; i++) c[i] = Be(d, off + 20 + 4 * i, 4);
  };
  int64_t c[6];  // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
  counts(0, c);
  size_t off = 44;
  int tsize = 4;
  if (d[4] >= '2') {
    off += c[3] * 4 + c[3] + c[4] * 6 + c[5] + c[2] * 8 + c[1] + c[0];
    if (off + 44 > d.size()) return Status::InvalidArgument("corrupt time zone file for " + std::string(name));
    counts(off, c);
    off += 44;
    tsize = 8;
  }
  size_t need = off + c[3] * tsize + c[3] + c[4] * 6;
  if (c[4] <= 0 || need > d.size()) return Status::InvalidArgument("corrupt time zone file for " + std::string(name));
  std::vector<int32_t> type_off(static_cast<size_t>(c[4]));
  size_t types_at = off + c[3] * tsize + c[3];
  for (int64_t i = 0; i < c[4]; i++) type_off[i] = static_cast<int32_t>(Be(d, types_at + 6 * i, 4));
  z->initial_offset_ = type_off[0];
  for (int64_t i = 0; i < c[3]; i++) {
    int64_t t = Be(d, off + i * tsize, tsize);
    uint8_t idx = static_cast<uint8_t>(d[off + c[3] * tsize + i]);
    if (idx >= type_off.size()) return Status::InvalidArgument("corrupt time zone file for " + std::string(name));
    z->transitions_.push_back(t);
    z->offsets_.push_back(type_off[idx]);
  }
  return std::shared_ptr<const Zone>(z);
}

}  // namespace trainwatch::notify
