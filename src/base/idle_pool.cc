#include "base/idle_pool.h"

#include <algorithm>

namespace trainwatch {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<IdlePoolBase*> pools;
};

Registry& Pools() {
  static Registry* r = new Registry();  // never destroyed: pools may outlive static teardown order
  return *r;
}

}  // namespace

IdlePoolBase::IdlePoolBase() {
  Registry& r = Pools();
  std::lock_guard<std::mutex> l(r.mu);
  r.pools.push_back(this);
}

IdlePoolBase::~IdlePoolBase() {
  Registry& r = Pools();
  std::lock_guard<std::mutex> l(r.mu);
  r.pools.erase(std::remove(r.pools.begin(), r.pools.end(), this), r.pools.end());
}

size_t ReleaseIdlePools(int64_t idle_ns) {
  Registry& r = Pools();
  // Held while releasing, so a pool can not be destroyed meanwhile.
  std::lock_guard<std::mutex> l(r.mu);
  size_t n = 0;
  for (IdlePoolBase* p : r.pools) n += p->ReleaseIdle(idle_ns);
  return n;
}

}  // namespace trainwatch
