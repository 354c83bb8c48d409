#pragma once
// Admission of pushes (remote_write, import, run batches, log pushes), so
// that senders beyond capacity get 503 with Retry-After instead of the
// server being OOM-killed:
// - --ingest.max-memory: while this process's anonymous resident memory is
//   above the bound, a push is refused before its body is read.
// - --ingest.max-concurrent-pushes: at most this many pushes are decoded and
//   stored at once; the others wait (their body read, nothing decoded) up to
//   max_wait for a slot, then are refused. The memory is read again once the
//   slot is held, so the bound is overshot by at most what the pushes in
//   their slots add.
// Senders retry a 503 (Prometheus retries 5xx, the Python client backs off),
// so nothing is lost. Memory comes back as the head is cut into blocks and
// freed pages are trimmed (app/wiring.cc).

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/mutex.h"
#include "common/metrics.h"

namespace trainwatch::http {

// The routes that carry data in (a POST or PUT a route of http/routes.h
// serves as a push): what the gate admits.
bool IsIngestRoute(std::string_view method, std::string_view path);

// Thread-safe.
class IngestGate {
 public:
  struct Options {
    uint64_t memory_limit = 0;    // bytes; 0: no bound
    int max_concurrent = 0;       // pushes at once; 0: no bound
    int64_t max_wait_ms = 10000;  // for a slot, then 503
    // Bytes in use now; default: memory::ProcessAnonRss (a read of /proc/self/statm).
    std::function<uint64_t()> read;
  };
  explicit IngestGate(Options o);

  enum class Verdict { kAdmitted, kOverMemory, kBusy };
  // Before a push's body is read.
  Verdict Check() { return OverMemory() ? Verdict::kOverMemory : Verdict::kAdmitted; }

  // A slot held from Enter until destroyed.
  class Slot {
   public:
    Slot() = default;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot();

   private:
    friend class IngestGate;
    IngestGate* gate_ = nullptr;
  };
  // After its body is read: waits for a slot, then checks the memory again.
  // kAdmitted with `*slot` held, or a refusal (nothing held).
  Verdict Enter(Slot* slot);

  // The answer's text for a refusal, naming the flag and the figures.
  std::string Message(Verdict v) const;
  static constexpr std::string_view kRetryAfterSeconds = "5";
  uint64_t memory_limit() const { return o_.memory_limit; }
  // trainwatch_ingest_memory_limit_bytes, _memory_used_bytes,
  // _pushes_in_progress, read at scrape time; the Api registers it.
  const common::metrics::Source* metrics() const { return &metrics_; }

 private:
  bool OverMemory();
  void Release();
  const Options o_;
  std::atomic<uint64_t> used_{0};  // the latest reading
  base::Mutex mu_;
  base::CondVar cv_;
  int in_progress_ TW_GUARDED_BY(mu_) = 0;
  common::metrics::Collector metrics_;
};

}  // namespace trainwatch::http
