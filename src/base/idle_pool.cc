#include "base/idle_pool.h"

#include <algorithm>

namespace trainwatch {
namespace {

struct Registry {
  base::Mutex mu;
  std::vector<IdlePoolBase*> pools TW_GUARDED_BY(mu);
};

Registry& Pools() {
  static Registry* r = new Registry();  // never destroyed: pools may outlive static teardown order
  return *r;
}

}  // namespace

IdlePoolBase::IdlePoolBase() {
  Registry& r = Pools();
  base::MutexLock l(&r.mu);
  r.pools.push_back(this);
}

IdlePoolBase::~IdlePoolBase() {
  Registry& r = Pools();
  base::MutexLock l(&r.mu);
  r.pools.erase(std::remove(r.pools.begin(), r.pools.end(), this), r.pools.end());
}

size_t ReleaseIdlePools(int64_t idle_ns) {
  Registry& r = Pools();
  // Held while releasing, so a pool can not be destroyed meanwhile.
  base::MutexLock l(&r.mu);
  size_t n = 0;
  for (IdlePoolBase* p : r.pools) n += p->ReleaseIdle(idle_ns);
  return n;
}

}  // namespace trainwatch
