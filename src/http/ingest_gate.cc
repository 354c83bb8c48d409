#include "http/ingest_gate.h"

#include <chrono>

#include "base/memory.h"
#include "base/mutex.h"
#include "http/routes.h"

namespace trainwatch::http {

bool IsIngestRoute(std::string_view method, std::string_view path) {
  if (method != "POST" && method != "PUT") return false;
  const Route* r = FindRoute(method, path, "");
  return r != nullptr && r->push && (r->methods & MethodBit(method)) != 0;
}

IngestGate::IngestGate(Options o)
    : o_([&] {
        if (!o.read) o.read = [] { return memory::ProcessAnonRss(); };
        return std::move(o);
      }()),
      metrics_({{"trainwatch_ingest_memory_limit_bytes",
                 "Pushes are refused (503) while memory in use is above this (--ingest.max-memory; 0: no bound).",
                 common::metrics::Type::kGauge,
                 {}},
                {"trainwatch_ingest_memory_used_bytes",
                 "Anonymous resident memory of the process, as the bound compares it.",
                 common::metrics::Type::kGauge,
                 {}},
                {"trainwatch_ingest_pushes_in_progress",
                 "Pushes being decoded and stored now (at most --ingest.max-concurrent-pushes).",
                 common::metrics::Type::kGauge,
                 {}}},
               [this](common::metrics::Emitter* e) {
                 int in_progress;
                 {
                   base::MutexLock l(&mu_);
                   in_progress = in_progress_;
                 }
                 e->Add("trainwatch_ingest_memory_limit_bytes", {}, static_cast<double>(o_.memory_limit));
                 e->Add("trainwatch_ingest_memory_used_bytes", {}, static_cast<double>(o_.read()));
                 e->Add("trainwatch_ingest_pushes_in_progress", {}, in_progress);
               }) {}

bool IngestGate::OverMemory() {
  if (o_.memory_limit == 0) return false;
  uint64_t used = o_.read();
  used_.store(used, std::memory_order_relaxed);
  return used > o_.memory_limit;
}

IngestGate::Verdict IngestGate::Enter(Slot* slot) {
  if (o_.max_concurrent > 0) {
    base::MutexLock l(&mu_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o_.max_wait_ms);
    while (in_progress_ >= o_.max_concurrent) {
      if (!cv_.WaitUntil(&mu_, deadline) && in_progress_ >= o_.max_concurrent) return Verdict::kBusy;
    }
    in_progress_++;
    slot->gate_ = this;
  }
  if (OverMemory()) {
    if (slot->gate_ != nullptr) {
      slot->gate_ = nullptr;
      Release();
    }
    return Verdict::kOverMemory;
  }
  return Verdict::kAdmitted;
}

void IngestGate::Release() {
  {
    base::MutexLock l(&mu_);
    in_progress_--;
  }
  cv_.Signal();
}

IngestGate::Slot::~Slot() {
  if (gate_ != nullptr) gate_->Release();
}

std::string IngestGate::Message(Verdict v) const {
  auto mib = [](uint64_t b) { return std::to_string(b >> 20) + " MiB"; };
  if (v == Verdict::kBusy) {
    return "trainwatch is busy: " + std::to_string(o_.max_concurrent) +
           " pushes in progress (--ingest.max-concurrent-pushes) and none ended within " +
           std::to_string(o_.max_wait_ms / 1000) + " s: retry later\n";
  }
  return "trainwatch is over its memory bound (" + mib(used_.load(std::memory_order_relaxed)) +
         " in use, --ingest.max-memory " + mib(o_.memory_limit) + "): retry later\n";
}

}  // namespace trainwatch::http
