#include "app/collect_loop.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <unordered_map>

#include "base/clock.h"
#include "base/log.h"
#include "collect/gpu/gpu.h"
#include "collect/host/host.h"
#include "runs/store.h"

namespace trainwatch::app {

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

struct CollectLoop::State {
  std::unique_ptr<collect::host::HostCollector> host;
  std::unique_ptr<collect::gpu::GpuCollector> gpu;
  // Series appended last cycle (labels incl. __name__, job, instance) -> ref.
  std::unordered_map<uint64_t, std::pair<model::Labels, storage::SeriesRef>> last;
  // pid -> run of this host, refreshed once per cycle when a GPU process is seen.
  std::unordered_map<int64_t, collect::gpu::RunRef> pids;
  bool pids_fresh = false;
  std::unique_ptr<collect::gpu::UsageMeter> usage;  // with a GPU collector and a run store
};

CollectLoop::CollectLoop(CollectOptions o, storage::Appendable* app, runs::RunStore* runs)
    : o_(std::move(o)), app_(app), runs_(runs), state_(std::make_unique<State>()) {
  if (o_.hostname.empty()) o_.hostname = HostName();
}

CollectLoop::~CollectLoop() { Stop(); }

void CollectLoop::Open() {
  if (opened_) return;
  opened_ = true;
  if (o_.host) state_->host = std::make_unique<collect::host::HostCollector>(o_.host_options);
  if (o_.gpu) {
    collect::gpu::Options g;
    g.library = o_.nvml_path;
    g.hostname = o_.hostname;
    if (runs_ != nullptr) {
      State* st = state_.get();
      runs::RunStore* rs = runs_;
      std::string host = o_.hostname;
      g.run_lookup = [st, rs, host](uint32_t pid) -> std::optional<collect::gpu::RunRef> {
        if (!st->pids_fresh) {
          st->pids.clear();
          for (auto& [pid, p] : rs->ProcessesOn(host)) st->pids[pid] = {p.project, p.run, std::to_string(p.rank)};
          st->pids_fresh = true;
        }
        auto it = st->pids.find(pid);
        if (it == st->pids.end()) return std::nullopt;
        return it->second;
      };
    }
    auto gpu = collect::gpu::GpuCollector::Open(std::move(g));
    if (gpu.ok()) {
      TW_LOG(Info, "gpu collector: {} GPU(s) through {}", (*gpu)->device_count(), o_.nvml_path);
      state_->gpu = std::move(*gpu);
      if (runs_ != nullptr) {
        collect::gpu::UsageOptions u = o_.usage;
        u.max_gap_ms = std::max(u.max_gap_ms, 4 * o_.interval_ms);
        state_->usage = std::make_unique<collect::gpu::UsageMeter>(std::move(u));
      }
    } else {
      TW_LOG(Info, "gpu collector off: {}", gpu.error().ToString());
    }
  }
}

void CollectLoop::Start() {
  Open();
  if (!state_->host && !state_->gpu) return;
  TW_LOG(Info, "collectors: host {}, gpu {}, every {} ms", state_->host ? "on" : "off", state_->gpu ? "on" : "off",
         o_.interval_ms);
  thread_ = std::thread([this] { Run(); });
}

void CollectLoop::Stop() {
  {
    base::MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  state_->gpu.reset();  // its event thread and NVML go before the storage does
}

void CollectLoop::Run() {
  base::MutexLock l(&mu_);
  while (!stop_) {
    l.Unlock();
    CollectOnce(NowMillis());
    l.Lock();
    // Aligned to the interval, as a scrape loop is.
    int64_t now = NowMillis();
    int64_t next = (now / o_.interval_ms + 1) * o_.interval_ms;
    auto deadline = std::chrono::steady_clock::now() + RealWait(next - now);
    while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
    }
  }
}

void CollectLoop::CollectOnce(int64_t now_ms) {
  State& st = *state_;
  struct Source {
    const char* name;
    const char* job;
    collect::Families fams;
  };
  Source sources[2] = {{"host", "node", {}}, {"gpu", "dcgm", {}}};
  if (st.host) st.host->Collect(&sources[0].fams);
  st.pids_fresh = false;
  if (st.gpu) st.gpu->Collect(&sources[1].fams);

  std::unordered_map<uint64_t, std::pair<model::Labels, storage::SeriesRef>> now;
  auto appender = app_ != nullptr ? app_->NewAppender() : nullptr;
  size_t failed = 0;
  Status first_error;
  for (Source& s : sources) {
    for (const collect::Family& f : s.fams) {
      for (const collect::Metric& m : f.metrics) {
        if (appender == nullptr) break;
        model::LabelsBuilder b(m.labels);  // empty values: the TSDB's append seam drops them, as a scrape does
        b.Set(model::kMetricName, f.name);
        b.Set("job", s.job);
        b.Set("instance", o_.instance);
        model::Labels labels = b.Build();
        uint64_t h = labels.Hash();
        storage::SeriesRef ref = 0;
        auto it = st.last.find(h);
        if (it != st.last.end() && it->second.first == labels) ref = it->second.second;
        if (ref == 0 || !appender->AppendByRef(ref, now_ms, m.value)) {
          auto r = appender->Append(0, labels, now_ms, m.value);
          if (!r.ok()) {
            if (failed++ == 0) first_error = r.error();
            continue;
          }
          ref = *r;
        }
        now.emplace(h, std::make_pair(std::move(labels), ref));
      }
    }
  }
  if (appender != nullptr) {
    // A series collected last time but not now (a lost GPU, an unmounted fs) goes stale.
    for (const auto& [h, lr] : st.last) {
      if (now.count(h) == 0 && !appender->AppendByRef(lr.second, now_ms, model::StaleNaN())) {
        (void)appender->Append(0, lr.first, now_ms, model::StaleNaN());
      }
    }
    Status s = appender->Commit();
    if (!s.ok()) TW_LOG(Warn, "collectors: commit: {}", s.ToString());
    if (failed > 0) TW_LOG(Warn, "collectors: {} sample(s) not stored, first: {}", failed, first_error.ToString());
  }
  st.last = std::move(now);
  if (st.usage) {
    std::vector<runs::RunStore::GpuUsageDelta> deltas;
    for (collect::gpu::RunUsage& u : st.usage->Add(sources[1].fams, now_ms)) {
      deltas.push_back({std::move(u.project), std::move(u.run), {u.gpu_seconds, u.energy_joules, u.idle_seconds, u.cost}});
    }
    if (Status s = runs_->AddGpuUsage(deltas); !s.ok()) TW_LOG(Warn, "collectors: GPU use of runs: {}", s.ToString());
  }
  snapshot_.Set("gpu", std::move(sources[1].fams));
  snapshot_.Set("host", std::move(sources[0].fams));
}

}  // namespace trainwatch::app
