#pragma once
// Log-derived metrics written to the TSDB through storage::Appendable:
//   trainwatch_log_lines_total{project,run,level}
//   trainwatch_log_pattern_matches_total{pattern,project,run}
// Counters since the process started, written every interval (and at Stop);
// a counter's first write is preceded by a 0 sample one interval earlier so
// increase()/rate() see its first lines. Thread-safe.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "logs/store.h"
#include "storage/storage.h"

namespace re2 {
class RE2;
}

namespace trainwatch::logs {

struct Pattern {
  std::string name;   // the `pattern` label
  std::string regex;  // RE2, unanchored, matched against each message
};

// cuda_error, out_of_memory, nccl_error, nccl_timeout, traceback, nan.
std::vector<Pattern> DefaultPatterns();

class LogMetrics : public AppendObserver {
 public:
  // InvalidArgument naming the pattern whose regex does not compile.
  static Result<std::unique_ptr<LogMetrics>> Make(std::vector<Pattern> patterns, storage::Appendable* out,
                                                  int64_t interval_ms);
  ~LogMetrics() override;

  void Observe(const std::vector<Record>& records) override;
  // Replaces the patterns (config reload); counters of every pattern seen so
  // far keep being written. On an error (a regex that does not compile)
  // nothing changes.
  Status SetPatterns(std::vector<Pattern> patterns);
  // Writes every counter at `now_ms`.
  Status Flush(int64_t now_ms);
  void Start();
  void Stop();  // final flush

 private:
  LogMetrics() = default;
  using Key = std::tuple<std::string, std::string, std::string>;  // (level|pattern, project, run)

  struct Compiled {
    std::vector<Pattern> patterns;
    std::vector<std::unique_ptr<re2::RE2>> res;
  };
  static Result<std::shared_ptr<const Compiled>> Compile(std::vector<Pattern> patterns);

  base::Mutex patterns_mu_;
  std::shared_ptr<const Compiled> compiled_ TW_GUARDED_BY(patterns_mu_);  // matched outside it
  storage::Appendable* out_ = nullptr;
  int64_t interval_ms_ = 10000;

  base::Mutex mu_;
  std::map<Key, uint64_t> lines_ TW_GUARDED_BY(mu_);
  std::map<Key, uint64_t> matches_ TW_GUARDED_BY(mu_);
  std::map<Key, bool> written_lines_ TW_GUARDED_BY(mu_);  // keys flushed before
  std::map<Key, bool> written_matches_ TW_GUARDED_BY(mu_);
  base::CondVar cv_;
  bool stop_ TW_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace trainwatch::logs
