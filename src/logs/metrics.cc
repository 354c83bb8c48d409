#include "logs/metrics.h"

#include <re2/re2.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/mutex.h"

namespace trainwatch::logs {

std::vector<Pattern> DefaultPatterns() {
  return {
      {"cuda_error", R"(CUDA error|cudaError[A-Za-z]+|CUBLAS_STATUS_[A-Z_]+|CUDNN_STATUS_[A-Z_]+|illegal memory access)"},
      {"out_of_memory", R"((?i:out of memory)|OutOfMemoryError|\bOOM\b)"},
      {"nccl_error", R"(NCCL (?:error|Error|ERROR)|nccl(?:System|Internal|UnhandledCuda|Remote)Error|ncclInvalidUsage)"},
      {"nccl_timeout", R"(NCCL[^\n]*(?i:timed out|timeout)|Watchdog caught collective operation timeout)"},
      {"traceback", R"(Traceback \(most recent call last\))"},
      {"nan", R"(\bNaN\b|(?i:\bloss\b[^\n]*\bnan\b)|(?i:\bnan\b[^\n]*\bloss\b))"},
  };
}

Result<std::shared_ptr<const LogMetrics::Compiled>> LogMetrics::Compile(std::vector<Pattern> patterns) {
  auto c = std::make_shared<Compiled>();
  for (const Pattern& p : patterns) {
    if (p.name.empty()) {
      return Status::InvalidArgument("logs pattern: empty name");
    }
    RE2::Options o;
    o.set_log_errors(false);
    auto re = std::make_unique<RE2>(p.regex, o);
    if (!re->ok()) return Status::InvalidArgument("logs pattern \"" + p.name + "\": invalid regex: " + re->error());
    c->res.push_back(std::move(re));
  }
  c->patterns = std::move(patterns);
  return std::shared_ptr<const Compiled>(std::move(c));
}

Result<std::unique_ptr<LogMetrics>> LogMetrics::Make(std::vector<Pattern> patterns, storage::Appendable* out,
                                                      int64_t interval_ms) {
  std::unique_ptr<LogMetrics> m(new LogMetrics());
  ASSIGN_OR_RETURN(auto compiled, Compile(std::move(patterns)));
  {
    base::MutexLock l(&m->patterns_mu_);  // not shared yet; for the analysis
    m->compiled_ = std::move(compiled);
  }
  m->out_ = out;
  m->interval_ms_ = interval_ms > 0 ? interval_ms : 10000;
  return m;
}

Status LogMetrics::SetPatterns(std::vector<Pattern> patterns) {
  ASSIGN_OR_RETURN(auto c, Compile(std::move(patterns)));
  base::MutexLock l(&patterns_mu_);
  compiled_ = std::move(c);
  return Status::OK();
}

LogMetrics::~LogMetrics() { Stop(); }

void LogMetrics::Observe(const std::vector<Record>& records) {
  // Matching runs outside the lock; only the counts are merged under it.
  std::shared_ptr<const Compiled> c;
  {
    base::MutexLock l(&patterns_mu_);
    c = compiled_;
  }
  std::vector<std::pair<size_t, size_t>> hits;  // (record, pattern)
  for (size_t i = 0; i < records.size(); ++i) {
    for (size_t p = 0; p < c->res.size(); ++p) {
      if (RE2::PartialMatch(records[i].message, *c->res[p])) hits.emplace_back(i, p);
    }
  }
  base::MutexLock l(&mu_);
  for (const Record& r : records) {
    lines_[Key(r.level, std::string(r.labels.Get("project")), std::string(r.labels.Get("run")))]++;
  }
  for (auto [i, p] : hits) {
    const Record& r = records[i];
    matches_[Key(c->patterns[p].name, std::string(r.labels.Get("project")), std::string(r.labels.Get("run")))]++;
  }
}

Status LogMetrics::Flush(int64_t now_ms) {
  if (out_ == nullptr) return Status::OK();
  std::map<Key, uint64_t> lines, matches;
  std::vector<Key> new_lines, new_matches;
  {
    base::MutexLock l(&mu_);
    lines = lines_;
    matches = matches_;
    for (auto& [k, v] : lines) {
      if (!written_lines_[k]) new_lines.push_back(k), written_lines_[k] = true;
    }
    for (auto& [k, v] : matches) {
      if (!written_matches_[k]) new_matches.push_back(k), written_matches_[k] = true;
    }
  }
  auto app = out_->NewAppender();
  auto labels = [](std::string_view name, std::string_view key_name, const Key& k) {
    model::LabelsBuilder b;
    b.Set(model::kMetricName, name);
    b.Set(key_name, std::get<0>(k));
    b.Set("project", std::get<1>(k));
    b.Set("run", std::get<2>(k));
    return b.Build();
  };
  auto put = [&](std::string_view name, std::string_view key_name, const std::map<Key, uint64_t>& m,
                 const std::vector<Key>& fresh) -> Status {
    for (const Key& k : fresh) {
      RETURN_IF_ERROR(app->Append(0, labels(name, key_name, k), now_ms - interval_ms_, 0).status());
    }
    for (const auto& [k, v] : m) {
      RETURN_IF_ERROR(app->Append(0, labels(name, key_name, k), now_ms, static_cast<double>(v)).status());
    }
    return Status::OK();
  };
  Status s = put("trainwatch_log_lines_total", "level", lines, new_lines);
  if (s.ok()) s = put("trainwatch_log_pattern_matches_total", "pattern", matches, new_matches);
  if (!s.ok()) {
    app->Rollback();
    return s;
  }
  return app->Commit();
}

void LogMetrics::Start() {
  thread_ = std::thread([this] {
    base::MutexLock l(&mu_);
    while (!stop_) {
      cv_.WaitFor(&mu_, RealWait(interval_ms_));
      if (stop_) break;
      l.Unlock();
      Status s = Flush(NowMillis());
      if (!s.ok()) TW_LOG(Error, "logs: write log metrics: {}", s.ToString());
      l.Lock();
    }
  });
}

void LogMetrics::Stop() {
  {
    base::MutexLock l(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) {
    thread_.join();
    Status s = Flush(NowMillis());
    if (!s.ok()) TW_LOG(Error, "logs: write log metrics: {}", s.ToString());
  }
}

}  // namespace trainwatch::logs
