#pragma once
// A rule group as Prometheus 2.42 runs it (rules/group.go): its rules are
// evaluated in order every interval at timestamps aligned to the interval
// and offset by a hash of (file, name); results go to storage through one
// appender per rule, with stale markers for series a rule no longer returns;
// alerts due for sending go to the notify callback. After a restart the
// group restores its alerts' activeAt from ALERTS_FOR_STATE (for-state
// restore) before it writes ALERTS.
//
// Thread safety: Start/Stop/CopyState from one thread (the manager); Eval
// runs on the group's own thread; status accessors may run concurrently.

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "rules/rule.h"
#include "storage/storage.h"

namespace trainwatch::rules {

struct GroupOptions {
  storage::Appendable* appendable = nullptr;  // REQUIRES: non-null
  storage::Queryable* queryable = nullptr;    // REQUIRES: non-null (for-state restore)
  QueryFunc query;                            // REQUIRES: set
  model::Labels external_labels;
  std::string external_url;                   // for generator URLs and templates
  int64_t outage_tolerance_ms = 3600 * 1000;  // --rules.alert.for-outage-tolerance
  int64_t for_grace_period_ms = 600 * 1000;   // --rules.alert.for-grace-period
  int64_t resend_delay_ms = 60 * 1000;        // --rules.alert.resend-delay
  // Receives the alerts due for sending after each alerting rule's
  // evaluation (labels without external labels). May be empty.
  std::function<void(std::vector<OutgoingAlert>)> notify;
};

class Group {
 public:
  // interval_ms: the group's interval, or the global one when it has none.
  Group(std::string file, RuleGroup spec, int64_t interval_ms, std::shared_ptr<const GroupOptions> opts,
        bool should_restore);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  const std::string& file() const { return file_; }
  const std::string& name() const { return spec_.name; }
  int64_t interval_ms() const { return interval_ms_; }
  int limit() const { return spec_.limit; }
  const std::vector<std::unique_ptr<EvalRule>>& rules() const { return rules_; }

  // The evaluation timestamp at or before now_ms (ms), aligned as Prometheus.
  int64_t EvalTimestamp(int64_t now_ms) const;
  // One iteration at ts: every rule in order.
  void Eval(int64_t ts);
  // Prometheus's RestoreForState at now_ms.
  void RestoreForState(int64_t now_ms);
  // Takes over alerts and previously returned series of the rules of `old`
  // with the same name (a reload of the same group).
  void CopyState(Group& old);
  // Appends stale markers at ts for every series the last evaluation wrote.
  void MarkStale(int64_t ts);

  // Starts the evaluation thread (first evaluation at the next aligned time).
  void Start();
  // Stops the thread; an evaluation in progress finishes first.
  void Stop();

  int64_t last_evaluation_ms() const;  // wall clock of the last iteration start; 0 = never
  double evaluation_seconds() const;   // duration of the last iteration

 private:
  void Run();
  // Waits until `deadline_ms` (wall clock) or Stop; false when stopped.
  bool SleepUntil(int64_t deadline_ms);

  const std::string file_;
  const RuleGroup spec_;
  const int64_t interval_ms_;
  const std::shared_ptr<const GroupOptions> opts_;
  std::vector<std::unique_ptr<EvalRule>> rules_;
  bool should_restore_;
  // Per rule: the series its last evaluation appended (group thread only).
  std::vector<std::set<model::Labels>> series_in_previous_eval_;

  mutable base::Mutex mu_;
  base::CondVar cv_;
  bool stop_ TW_GUARDED_BY(mu_) = false;
  int64_t last_evaluation_ms_ TW_GUARDED_BY(mu_) = 0;
  double evaluation_seconds_ TW_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// Prometheus's generator URL: <external_url>/graph?g0.expr=<expr>&g0.tab=1.
std::string GeneratorUrl(std::string_view external_url, std::string_view expr);

}  // namespace trainwatch::rules
