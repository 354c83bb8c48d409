#include "scrape/manager.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "base/clock.h"
#include "base/log.h"

namespace trainwatch::scrape {

Manager::Manager(storage::Appendable* db, ManagerOptions opts) : db_(db), opts_(opts) {
  sd_thread_ = std::thread([this] { SdLoop(); });
}

Manager::~Manager() { Stop(); }

void Manager::Stop() {
  {
    base::MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (sd_thread_.joinable()) sd_thread_.join();
  base::MutexLock a(&apply_mu_);
  std::map<std::string, std::unique_ptr<Pool>> pools;
  {
    base::MutexLock l(&mu_);
    pools.swap(pools_);
  }
  // Signal every loop first so they wind down in parallel, then join.
  for (auto& [name, p] : pools) {
    for (auto& [h, loop] : p->loops) loop->Stop(false);
  }
}

bool Manager::RefreshFiles(Pool* p, bool force) {
  bool changed = false;
  std::set<std::string> present;
  for (const FileSdConfig& f : p->cfg->file_sd_configs) {
    for (const std::string& pattern : f.files) {
      for (const std::string& path : GlobFiles(pattern)) present.insert(path);
    }
  }
  for (auto it = p->files.begin(); it != p->files.end();) {
    if (!present.contains(it->first)) {
      it = p->files.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  for (const std::string& path : present) {
    struct stat st{};
    if (::stat(path.c_str(), &st) != 0) continue;
    int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    FileState& fs = p->files[path];
    if (!force && fs.mtime_ns == mtime && fs.size == st.st_size) continue;
    auto groups = ReadFileSd(path);
    fs.mtime_ns = mtime;
    fs.size = st.st_size;
    if (!groups.ok()) {
      // As Prometheus: keep the targets last read from the file.
      TW_LOG(Error, "job {}: {}", p->cfg->job_name, groups.error().message());
      continue;
    }
    fs.groups = std::move(*groups);
    changed = true;
  }
  return changed;
}

void Manager::SyncPool(Pool* p, std::vector<std::unique_ptr<ScrapeLoop>>* stopped) {
  const ScrapeConfig& c = *p->cfg;
  std::vector<TargetSpec> specs;
  for (const TargetGroup& g : c.static_configs) {
    for (auto& t : TargetsFromGroup(c, g)) specs.push_back(std::move(t));
  }
  for (const auto& [path, fs] : p->files) {
    for (const TargetGroup& g : fs.groups) {
      for (auto& t : TargetsFromGroup(c, g)) specs.push_back(std::move(t));
    }
  }
  std::map<uint64_t, TargetSpec> active;
  std::vector<TargetSpec> dropped;
  for (auto& t : specs) {
    if (t.dropped) {
      if (!t.error.empty()) TW_LOG(Warn, "job {}: target {} dropped: {}", c.job_name, t.discovered.Get("__address__"), t.error);
      dropped.push_back(std::move(t));
    } else {
      uint64_t h = t.Hash();
      active.emplace(h, std::move(t));  // duplicates collapse, as Prometheus
    }
  }
  base::MutexLock l(&mu_);
  for (auto it = p->loops.begin(); it != p->loops.end();) {
    if (!active.contains(it->first)) {
      stopped->push_back(std::move(it->second));
      it = p->loops.erase(it);
    } else {
      ++it;
    }
  }
  // target_limit: beyond it every target of the job fails, none is scraped
  // (Prometheus's message); back within it, they scrape again.
  Status forced;
  if (c.target_limit > 0 && active.size() > c.target_limit) {
    forced = Status::ResourceExhausted("target_limit exceeded (number of targets: " + std::to_string(active.size()) +
                                       ", limit: " + std::to_string(c.target_limit) + ")");
    TW_LOG(Warn, "job {}: {}", c.job_name, forced.message());
  }
  for (auto& [h, loop] : p->loops) loop->SetForcedError(forced);
  for (auto& [h, t] : active) {
    if (p->loops.contains(h)) continue;
    auto loop = std::make_unique<ScrapeLoop>(p->cfg, std::move(t), db_);
    loop->SetForcedError(forced);
    loop->Start();
    p->loops.emplace(h, std::move(loop));
  }
  p->dropped = std::move(dropped);
}

void Manager::ApplyConfig(std::vector<ScrapeConfig> configs) {
  base::MutexLock a(&apply_mu_);
  std::vector<std::unique_ptr<ScrapeLoop>> stopped;
  std::set<std::string> names;
  for (ScrapeConfig& c : configs) {
    names.insert(c.job_name);
    Pool* p = nullptr;
    {
      base::MutexLock l(&mu_);
      auto it = pools_.find(c.job_name);
      if (it != pools_.end() && it->second->cfg->fingerprint != c.fingerprint) {
        // Changed job: its loops restart with the new config.
        for (auto& [h, loop] : it->second->loops) stopped.push_back(std::move(loop));
        pools_.erase(it);
        it = pools_.end();
      }
      if (it == pools_.end()) {
        auto np = std::make_unique<Pool>();
        np->cfg = std::make_shared<const ScrapeConfig>(std::move(c));
        it = pools_.emplace(np->cfg->job_name, std::move(np)).first;
      }
      p = it->second.get();
    }
    RefreshFiles(p, true);
    p->last_refresh_ms = NowMillis();
    SyncPool(p, &stopped);
  }
  {
    base::MutexLock l(&mu_);
    for (auto it = pools_.begin(); it != pools_.end();) {
      if (!names.contains(it->first)) {
        for (auto& [h, loop] : it->second->loops) stopped.push_back(std::move(loop));
        it = pools_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& loop : stopped) loop->Stop(true);
  size_t n = 0;
  {
    base::MutexLock l(&mu_);
    for (const auto& [name, p] : pools_) n += p->loops.size();
  }
  TW_LOG(Info, "scrape: {} jobs, {} targets", names.size(), n);
}

void Manager::SdLoop() {
  for (;;) {
    {
      base::MutexLock l(&mu_);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.sd_poll_ms);
      while (!stop_ && cv_.WaitUntil(&mu_, deadline)) {
      }
      if (stop_) return;
    }
    base::MutexLock a(&apply_mu_);
    std::vector<Pool*> pools;
    {
      base::MutexLock l(&mu_);
      for (auto& [name, p] : pools_) {
        if (!p->cfg->file_sd_configs.empty()) pools.push_back(p.get());
      }
    }
    std::vector<std::unique_ptr<ScrapeLoop>> stopped;
    int64_t now = NowMillis();
    for (Pool* p : pools) {
      int64_t refresh = p->cfg->file_sd_configs.front().refresh_interval_ms;
      for (const auto& f : p->cfg->file_sd_configs) refresh = std::min(refresh, f.refresh_interval_ms);
      bool force = refresh > 0 && now - p->last_refresh_ms >= refresh;
      if (force) p->last_refresh_ms = now;
      if (RefreshFiles(p, force)) SyncPool(p, &stopped);
    }
    for (auto& loop : stopped) loop->Stop(true);
  }
}

PoolsSnapshot Manager::Snapshot() const {
  PoolsSnapshot s;
  base::MutexLock l(&mu_);
  for (const auto& [name, p] : pools_) {
    for (const auto& [h, loop] : p->loops) {
      TargetInfo t;
      t.discovered = loop->target().discovered;
      t.labels = loop->target().PublicLabels();
      t.pool = name;
      t.url = loop->url();
      t.state = loop->state();
      t.interval_ms = p->cfg->scrape_interval_ms;
      t.timeout_ms = p->cfg->scrape_timeout_ms;
      s.active.push_back(std::move(t));
    }
    for (const TargetSpec& d : p->dropped) {
      TargetInfo t;
      t.discovered = d.discovered;
      t.pool = name;
      s.dropped.push_back(std::move(t));
    }
  }
  return s;
}

std::map<std::string, std::vector<MetricMetadata>> Manager::Metadata() const {
  std::map<std::string, std::vector<MetricMetadata>> out;
  for (auto& [labels, md] : TargetMetadata()) {
    for (auto& [family, m] : md) {
      auto& v = out[family];
      if (std::find(v.begin(), v.end(), m) == v.end()) v.push_back(m);
    }
  }
  return out;
}

std::vector<std::pair<model::Labels, std::map<std::string, MetricMetadata>>> Manager::TargetMetadata() const {
  std::vector<std::pair<model::Labels, std::map<std::string, MetricMetadata>>> out;
  base::MutexLock l(&mu_);
  for (const auto& [name, p] : pools_) {
    for (const auto& [h, loop] : p->loops) out.emplace_back(loop->target().PublicLabels(), loop->metadata());
  }
  return out;
}

}  // namespace trainwatch::scrape
