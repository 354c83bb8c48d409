#include "base/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace trainwatch::base {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(MutexTest, LockExcludesAndTryLockFailsWhileHeld) {
  Mutex mu;
  MutexLock l(&mu);
  std::atomic<bool> got{true};
  std::thread t([&] {
    bool ok = mu.TryLock();
    if (ok) mu.Unlock();
    got = ok;
  });
  t.join();
  EXPECT_FALSE(got.load());
  l.Unlock();
  bool free = mu.TryLock();
  if (free) mu.Unlock();
  EXPECT_TRUE(free);
  l.Lock();  // the destructor releases it again
}

TEST(MutexTest, WaitUntilTimesOutWithTheLockHeldAgain) {
  Mutex mu;
  CondVar cv;
  MutexLock l(&mu);
  const auto start = steady_clock::now();
  bool woken = true;
  // Spurious wakeups return true early; only the deadline returns false.
  while (woken) woken = cv.WaitUntil(&mu, start + milliseconds(20));
  EXPECT_GE(steady_clock::now() - start, milliseconds(20));
  bool other_got = true;  // still ours: another thread cannot take it
  std::thread t([&] {
    bool ok = mu.TryLock();
    if (ok) mu.Unlock();
    other_got = ok;
  });
  t.join();
  EXPECT_FALSE(other_got);
}

TEST(MutexTest, SignalWakesAWaiterThatSeesTheState) {
  Mutex mu;
  CondVar cv;
  bool ready = false;
  int seen = 0;
  std::thread waiter([&] {
    MutexLock l(&mu);
    while (!ready) cv.Wait(&mu);
    seen = 1;
  });
  {
    MutexLock l(&mu);
    ready = true;
  }
  cv.SignalAll();
  waiter.join();
  EXPECT_EQ(seen, 1);
}

TEST(MutexTest, ReadersShareAndAWriterExcludes) {
  SharedMutex mu;
  std::atomic<bool> wrote{false};
  std::thread writer;
  {
    ReaderMutexLock r(&mu);
    std::atomic<int> shared{0};
    std::thread reader([&] {
      ReaderMutexLock r2(&mu);  // does not wait for the first reader
      shared = 1;
    });
    reader.join();
    EXPECT_EQ(shared.load(), 1);
    writer = std::thread([&] {
      WriterMutexLock w(&mu);
      wrote = true;
    });
    std::this_thread::sleep_for(milliseconds(20));
    EXPECT_FALSE(wrote.load());  // waits for the reader
  }
  writer.join();
  EXPECT_TRUE(wrote.load());
}

}  // namespace
}  // namespace trainwatch::base
