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

// Written so that a stalled machine can not fail it: an object returned
// "just now" may be older than the threshold by the time ReleaseIdle runs,
// so only the oldest one's release is asserted.
TEST(IdlePoolTest, ReleasesObjectsIdleLongEnoughOldestFirst) {
  constexpr int64_t kHourNs = int64_t{3600} * 1000000000;
  IdlePool<std::string> pool;
  std::string* warm;
  {
    auto a = pool.Acquire();
    auto b = pool.Acquire();
    warm = &*a;  // returned last
  }
  EXPECT_EQ(pool.ReleaseIdle(kHourNs), 0u);
  EXPECT_EQ(pool.pooled(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  { auto again = pool.Acquire(); EXPECT_EQ(&*again, warm); }  // returned again now
  size_t n = ReleaseIdlePools(int64_t{25} * 1000000);  // through the registry
  ASSERT_GE(n, 1u);  // b's object, idle for 50 ms
  if (n == 1) {
    EXPECT_EQ(pool.pooled(), 1u);
    EXPECT_EQ(&*pool.Acquire(), warm);
  }
  const size_t left = pool.pooled();
  EXPECT_EQ(pool.ReleaseIdle(0), left);
  EXPECT_EQ(pool.pooled(), 0u);
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
