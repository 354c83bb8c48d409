#pragma once

// Mutexes the thread-safety analysis can check (base/thread_annotations.h):
// std::mutex and std::shared_mutex wrapped with capability attributes, RAII
// holders, and a condition variable that waits on a base::Mutex. The same
// cost as the std types they wrap (every call is inline).
//
//   base::Mutex mu_;
//   int count_ TW_GUARDED_BY(mu_);
//   void Add() TW_EXCLUDES(mu_) { base::MutexLock l(&mu_); count_++; }
//
// Condition waits are loops over the guarded state, not predicate lambdas
// (the analysis checks a lambda as a function of its own, without the lock):
//
//   base::MutexLock l(&mu_);
//   while (!stop_) cv_.Wait(&mu_);

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#include "base/thread_annotations.h"

namespace trainwatch::base {

class TW_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() TW_ACQUIRE() { mu_.lock(); }
  void Unlock() TW_RELEASE() { mu_.unlock(); }
  bool TryLock() TW_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds it (a callback invoked under the lock).
  void AssertHeld() const TW_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

class TW_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) TW_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() TW_RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Let go early (work that must not hold the lock), and take it again.
  void Unlock() TW_RELEASE() {
    mu_->Unlock();
    held_ = false;
  }
  void Lock() TW_ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

// Readers share, a writer excludes all.
class TW_CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() TW_ACQUIRE() { mu_.lock(); }
  void Unlock() TW_RELEASE() { mu_.unlock(); }
  void ReaderLock() TW_ACQUIRE_SHARED() { mu_.lock_shared(); }
  void ReaderUnlock() TW_RELEASE_SHARED() { mu_.unlock_shared(); }
  void AssertHeld() const TW_ASSERT_CAPABILITY(this) {}

 private:
  std::shared_mutex mu_;
};

class TW_SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex* mu) TW_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterMutexLock() TW_RELEASE() { mu_->Unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

class TW_SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) TW_ACQUIRE_SHARED(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() TW_RELEASE() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Waits with a base::Mutex held; the wait releases it and takes it again
// before returning, as std::condition_variable does. Wakeups may be spurious:
// wait in a loop over the state.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex* mu) TW_REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }
  // False when the deadline passed (the lock is held again either way).
  template <typename Clock, typename Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) TW_REQUIRES(mu) {
    std::unique_lock<std::mutex> l(mu->mu_, std::adopt_lock);
    bool woken = cv_.wait_until(l, deadline) == std::cv_status::no_timeout;
    l.release();
    return woken;
  }
  template <typename Rep, typename Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& d) TW_REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + d);
  }

  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace trainwatch::base
