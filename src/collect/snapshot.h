#pragma once
// The latest families of each collector, shared between the collecting thread
// (Set) and HTTP /metrics (Render). Thread-safe.

#include <map>
#include <memory>
#include <string>

#include "base/mutex.h"
#include "collect/family.h"

namespace trainwatch::collect {

class Snapshot {
 public:
  // Replaces what `source` (e.g. "host", "gpu") collected last.
  void Set(const std::string& source, Families families);
  // Appends every source's families in the text format, sources in name order.
  void Render(std::string* out) const;

 private:
  mutable base::Mutex mu_;
  std::map<std::string, std::shared_ptr<const Families>> by_source_ TW_GUARDED_BY(mu_);
};

}  // namespace trainwatch::collect
