#include "base/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace trainwatch {
namespace {

class ClockTest : public ::testing::Test {
 protected:
  // The warp is process-wide: every test leaves the system clock behind.
  void TearDown() override { clock_internal::warp = {}; }
};

TEST_F(ClockTest, UnwarpedIsTheSystemClock) {
  EXPECT_FALSE(ClockWarped());
  int64_t sys = clock_internal::SystemNanos() / 1'000'000;
  EXPECT_NEAR(static_cast<double>(NowMillis()), static_cast<double>(sys), 1000);
  EXPECT_EQ(RealWait(1500), std::chrono::milliseconds(1500));
}

TEST_F(ClockTest, WarpedStartsAtStartAndRunsFaster) {
  const int64_t real = clock_internal::SystemNanos() / 1'000'000;
  const int64_t start = 1'600'000'000'000;  // 2020-09-13
  WarpClock(start, real, 1000);
  EXPECT_TRUE(ClockWarped());
  EXPECT_EQ(ClockSpeed(), 1000);
  int64_t t0 = NowMillis();
  // Some real milliseconds may already have passed since `real`: at most a second of them.
  EXPECT_GE(t0, start);
  EXPECT_LT(t0, start + 1000 * 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  int64_t t1 = NowMillis();
  EXPECT_GE(t1 - t0, 20 * 1000);  // 20 real ms are at least 20 server seconds
  // Waits scale down, never to zero.
  EXPECT_EQ(RealWait(60'000), std::chrono::milliseconds(60));
  EXPECT_EQ(RealWait(1), std::chrono::milliseconds(1));
  EXPECT_EQ(RealWait(0), std::chrono::milliseconds(0));
}

TEST_F(ClockTest, TwoProcessesGivenOneOriginAgree) {
  // The origin is a real time: a clock warped later from the same pair reads
  // the same as one warped earlier, as two processes started a second apart.
  const int64_t real = clock_internal::SystemNanos() / 1'000'000;
  WarpClock(0, real - 2000, 10);  // as if warped 2 s ago
  // 2 real seconds at speed 10: about 20 server seconds.
  EXPECT_NEAR(static_cast<double>(NowMillis()), 20'000, 1000);
}

TEST_F(ClockTest, SteadyAtScalesTheDistance) {
  WarpClock(0, clock_internal::SystemNanos() / 1'000'000, 3600);
  // An hour of server time from now is about a second of real time.
  auto at = SteadyAt(NowNanos() + 3600LL * 1'000'000'000);
  auto in = at - std::chrono::steady_clock::now();
  EXPECT_GT(in, std::chrono::milliseconds(900));
  EXPECT_LE(in, std::chrono::milliseconds(1000));
}

}  // namespace
}  // namespace trainwatch
