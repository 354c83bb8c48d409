#include "collect/snapshot.h"

#include <vector>

namespace trainwatch::collect {

void Snapshot::Set(const std::string& source, Families families) {
  auto f = std::make_shared<const Families>(std::move(families));
  base::MutexLock l(&mu_);
  by_source_[source] = std::move(f);
}

void Snapshot::Render(std::string* out) const {
  std::vector<std::shared_ptr<const Families>> all;
  {
    base::MutexLock l(&mu_);
    for (const auto& [source, f] : by_source_) all.push_back(f);
  }
  for (const auto& f : all) RenderText(*f, out);
}

}  // namespace trainwatch::collect
