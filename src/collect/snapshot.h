#pragma once
// The latest families of each collector, shared between the collecting thread
// (Set) and HTTP /metrics (Render). Thread-safe.

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "collect/family.h"

namespace trainwatch::collect {

class Snapshot {
 public:
  // Replaces what `source` (e.g. "host", "gpu") collected last.
  void Set(const std::string& source, Families families);
  // Appends every source's families in the text format, sources in name order.
  void Render(std::string* out) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Families>> by_source_;
};

}  // namespace trainwatch::collect
