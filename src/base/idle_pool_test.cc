#include "base/idle_pool.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace trainwatch {
namespace {

TEST(IdlePoolTest, ReusesTheWarmestObjectAndKeepsItsContents) {
  IdlePool<std::string> pool;
  std::string* first;
  {
    auto a = pool.Acquire();
    auto b = pool.Acquire();  // a second concurrent user gets its own
    EXPECT_NE(&*a, &*b);
    a->assign(1000, 'x');
    first = &*a;
  }  // b is destroyed (returned) first, then a: a is the warmest
  EXPECT_EQ(pool.pooled(), 2u);
  auto c = pool.Acquire();
  EXPECT_EQ(&*c, first);
  EXPECT_EQ(c->size(), 1000u);  // as it was left
  auto d = pool.Acquire();
  EXPECT_NE(&*d, first);
  EXPECT_EQ(pool.pooled(), 0u);
}

// Written so that a stalled machine can not fail it: only "idle for at
// least" is asserted, never "not yet idle" after a short time.
TEST(IdlePoolTest, ReleasesEverythingOnceThePoolWasIdle) {
  constexpr int64_t kHourNs = int64_t{3600} * 1000000000;
  IdlePool<std::string> pool;
  {
    auto a = pool.Acquire();
    auto b = pool.Acquire();
  }
  EXPECT_EQ(pool.ReleaseIdle(kHourNs), 0u);  // used just now
  EXPECT_EQ(pool.pooled(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ReleaseIdlePools(int64_t{10} * 1000000), 2u);  // through the registry
  EXPECT_EQ(pool.pooled(), 0u);
  EXPECT_EQ(pool.ReleaseIdle(0), 0u);  // nothing left
  // An object still leased is not the pool's to free; it returns later.
  {
    auto c = pool.Acquire();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(pool.ReleaseIdle(int64_t{10} * 1000000), 0u);
  }
  EXPECT_EQ(pool.pooled(), 1u);
}

TEST(IdlePoolTest, ConcurrentUsers) {
  IdlePool<std::vector<int>> pool;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; i++) {
        auto v = pool.Acquire();
        v->clear();
        v->push_back(i);
        EXPECT_EQ(v->size(), 1u);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_LE(pool.pooled(), 4u);
  EXPECT_GE(pool.pooled(), 1u);
}

}  // namespace
}  // namespace trainwatch
