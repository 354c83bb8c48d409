#pragma once
// Recording and alerting rules as Prometheus 2.42 evaluates them
// (rules/recording.go, rules/alerting.go): one Eval per group iteration
// returns the samples to append; an alerting rule keeps its active alerts
// (inactive -> pending -> firing -> resolved, `for`, `keep_firing_for`) and
// decides which of them the notifier must (re)send.
//
// Thread safety: Eval, SendAlerts and state changes run on the group's
// thread; the read accessors (Snapshot*) may run concurrently (mu_).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "model/labels.h"
#include "promql/engine.h"
#include "rules/alert.h"
#include "rules/rule_file.h"

namespace trainwatch::rules {

// Runs an instant query at t (ms) and returns its result as a vector
// (a scalar becomes one sample without labels); other types are an error.
using QueryFunc = std::function<Result<std::vector<promql::VectorSample>>(std::string_view expr, int64_t t_ms)>;

enum class AlertState { kInactive, kPending, kFiring };
std::string_view AlertStateName(AlertState s);  // "inactive", "pending", "firing"

enum class RuleHealth { kUnknown, kGood, kBad };
std::string_view RuleHealthName(RuleHealth h);  // "unknown", "ok", "err"

// One alert of an alerting rule. Times are unix ms; 0 = unset.
struct Alert {
  AlertState state = AlertState::kInactive;
  model::Labels labels;       // rule labels applied, alertname set, no __name__
  model::Labels annotations;  // expanded
  double value = 0;
  int64_t active_at = 0;
  int64_t fired_at = 0;
  int64_t resolved_at = 0;
  int64_t last_sent_at = 0;
  int64_t valid_until = 0;
  int64_t keep_firing_since = 0;
};

// What every rule evaluation needs from its group.
struct EvalContext {
  const QueryFunc* query = nullptr;  // REQUIRES: non-null
  model::Labels external_labels;
  std::string external_url;
  int limit = 0;  // the group's limit; 0 = none
};

struct RuleStatus {
  RuleHealth health = RuleHealth::kUnknown;
  std::string last_error;
  int64_t last_evaluation_ms = 0;  // wall clock of the last evaluation start
  double evaluation_seconds = 0;
};

// A rule as written in its file (rule_file.h).
using RuleSpec = Rule;

class EvalRule {
 public:
  explicit EvalRule(RuleSpec spec);
  virtual ~EvalRule() = default;
  const RuleSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name(); }
  bool is_alert() const { return spec_.is_alert(); }
  // Canonical PromQL text of the expression (Prometheus's rule.Query().String()).
  const std::string& query_string() const { return query_string_; }

  // Evaluates at ts (ms); returns the samples to append, or the rule's error.
  virtual Result<std::vector<promql::VectorSample>> Eval(int64_t ts, const EvalContext& ctx) = 0;

  void SetStatus(RuleHealth h, std::string err, int64_t last_eval_ms, double seconds);
  RuleStatus status() const;

 protected:
  RuleSpec spec_;
  std::string query_string_;
  mutable base::Mutex mu_;
  RuleStatus status_ TW_GUARDED_BY(mu_);
};

class RecordingRule : public EvalRule {
 public:
  explicit RecordingRule(RuleSpec spec) : EvalRule(std::move(spec)) {}
  Result<std::vector<promql::VectorSample>> Eval(int64_t ts, const EvalContext& ctx) override;
};

class AlertingRule : public EvalRule {
 public:
  // Alerts resolved longer ago than this are forgotten (Prometheus: 15m).
  static constexpr int64_t kResolvedRetentionMs = 15 * 60 * 1000;

  explicit AlertingRule(RuleSpec spec) : EvalRule(std::move(spec)) {}
  // Updates the alerts and returns ALERTS / ALERTS_FOR_STATE samples (only
  // once restored, as Prometheus).
  Result<std::vector<promql::VectorSample>> Eval(int64_t ts, const EvalContext& ctx) override;

  // The alerts due for (re)sending at ts, marked as sent; ends_at per
  // Prometheus (resolved_at, else ts + 4 * max(interval, resend delay)).
  std::vector<OutgoingAlert> CollectToSend(int64_t ts, int64_t resend_delay_ms, int64_t interval_ms,
                                           const std::string& generator_url);

  // For-state restore after a restart (Group::RestoreForState).
  bool restored() const;
  void set_restored(bool r);
  // Every alert, inactive ones included (for restore and state copy).
  std::map<model::Labels, Alert> alerts() const;
  void set_alerts(std::map<model::Labels, Alert> a);
  void SetActiveAt(const model::Labels& key, int64_t active_at_ms);

  // Pending and firing alerts; the rule's state is the highest of them.
  std::vector<Alert> ActiveAlerts() const;
  AlertState State() const;

 private:
  std::map<model::Labels, Alert> active_ TW_GUARDED_BY(mu_);  // keyed by alert labels
  bool restored_ TW_GUARDED_BY(mu_) = false;
};

std::unique_ptr<EvalRule> NewRule(RuleSpec spec);

// ALERTS{alertname, alertstate, ...} = 1 for an alert.
promql::VectorSample AlertSample(const Alert& a, int64_t ts);
// ALERTS_FOR_STATE{alertname, ...} = activeAt in unix seconds.
promql::VectorSample ForStateSample(const Alert& a, int64_t ts);

}  // namespace trainwatch::rules
