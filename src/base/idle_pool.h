#pragma once
// Reusable request buffers (bodies, decode batches) shared by the HTTP worker
// threads. A burst of requests reuses warm objects, so large buffers are not
// allocated and page-faulted per request; ReleaseIdlePools() frees them once
// their pool went unused for a while, so an idle server does not hold the last burst's
// buffers (a thread_local buffer would stay until its thread ends, i.e. for
// the life of the worker pool).

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"

namespace trainwatch {

class IdlePoolBase {
 public:
  IdlePoolBase();  // registers with ReleaseIdlePools
  virtual ~IdlePoolBase();
  IdlePoolBase(const IdlePoolBase&) = delete;
  IdlePoolBase& operator=(const IdlePoolBase&) = delete;
  // Frees the pooled objects when the pool was idle for idle_ns; how many.
  virtual size_t ReleaseIdle(int64_t idle_ns) = 0;
};

// Calls ReleaseIdle on every live pool; the total freed.
size_t ReleaseIdlePools(int64_t idle_ns);

// T: default-constructible. Objects come back as they were left: callers
// clear them (keeping capacity) before or after use.
template <typename T>
class IdlePool final : public IdlePoolBase {
 public:
  class Lease {
   public:
    Lease(IdlePool* pool, std::unique_ptr<T> obj) : pool_(pool), obj_(std::move(obj)) {}
    Lease(Lease&& o) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (obj_) pool_->Return(std::move(obj_));
    }
    T& operator*() const { return *obj_; }
    T* operator->() const { return obj_.get(); }

   private:
    IdlePool* pool_;
    std::unique_ptr<T> obj_;
  };

  // The most recently returned object (the warmest), or a new one.
  Lease Acquire() {
    std::unique_ptr<T> obj;
    {
      base::MutexLock l(&mu_);
      last_acquire_ns_ = MonoNanos();
      if (!free_.empty()) {
        obj = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (!obj) obj = std::make_unique<T>();
    return Lease(this, std::move(obj));
  }

  // Frees every pooled object once the pool as a whole was idle (no
  // Acquire) for idle_ns: while requests keep coming, even the spare objects
  // of the last burst stay (freeing and trimming under load costs more than
  // it saves).
  size_t ReleaseIdle(int64_t idle_ns) override {
    std::vector<std::unique_ptr<T>> drop;  // freed outside the lock
    {
      base::MutexLock l(&mu_);
      if (free_.empty() || MonoNanos() - last_acquire_ns_ < idle_ns) return 0;
      drop.swap(free_);
    }
    return drop.size();
  }

  size_t pooled() const {
    base::MutexLock l(&mu_);
    return free_.size();
  }

 private:
  void Return(std::unique_ptr<T> obj) {
    base::MutexLock l(&mu_);
    free_.push_back(std::move(obj));
  }

  mutable base::Mutex mu_;
  std::vector<std::unique_ptr<T>> free_ TW_GUARDED_BY(mu_);  // the warmest last
  int64_t last_acquire_ns_ TW_GUARDED_BY(mu_) = 0;
};

}  // namespace trainwatch
