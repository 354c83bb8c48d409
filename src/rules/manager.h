#pragma once
// Runs the rule groups of a set of rule files (Prometheus's rules.Manager):
// Update loads them all or nothing (a bad file changes nothing and the
// error names file, group, rule and position), keeps the alert state of
// groups that stay (same file and name), writes stale markers for the
// series of groups that go, and restores for-state from ALERTS_FOR_STATE on
// the first load. Alerts due for sending get the external labels and go to
// every sender added with AddSender.
//
// Thread safety: every method may be called from any thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "common/metrics.h"
#include "promql/engine.h"
#include "rules/alert.h"
#include "rules/group.h"
#include "rules/sender.h"
#include "storage/storage.h"

namespace trainwatch::rules {

struct ManagerOptions {
  storage::Appendable* appendable = nullptr;  // REQUIRES: non-null, outlives the Manager
  storage::Queryable* queryable = nullptr;    // REQUIRES: non-null, outlives the Manager
  promql::Engine* engine = nullptr;           // REQUIRES: non-null, outlives the Manager
  int64_t outage_tolerance_ms = 3600 * 1000;
  int64_t for_grace_period_ms = 600 * 1000;
  int64_t resend_delay_ms = 60 * 1000;
  // Where the rule, alert and sending metrics register (outlives the
  // Manager), the external Alertmanagers' too; null: nowhere.
  common::metrics::Registry* metrics = nullptr;
};

// A rule file: its path, and its content when it is not to be read from
// disk (the built-in pack).
struct RuleSource {
  std::string file;
  std::string content;
  bool embedded = false;
};

struct ManagerConfig {
  int64_t evaluation_interval_ms = 60000;  // global.evaluation_interval
  std::vector<RuleSource> sources;
  model::Labels external_labels;           // global.external_labels
  std::string external_url;                // e.g. http://127.0.0.1:9800
};

class Manager {
 public:
  explicit Manager(ManagerOptions opts);
  ~Manager();

  // Loads every source and (re)starts the groups. On any error nothing
  // changes and the status lists every problem, one per line.
  Status Update(const ManagerConfig& cfg);
  // Adds a receiver of outgoing alerts (the embedded notifier, external
  // Alertmanagers). Called on rule-group threads; see AlertSender.
  void AddSender(AlertSender sender);
  // Applies prometheus.yml's `alerting:` section: forwarding to external
  // Alertmanagers (added as a sender on first use). A bad section changes nothing.
  Status ApplyAlertingConfig(const YAML::Node& alerting);
  // Stops every group (no evaluation after this returns). Idempotent.
  void Stop();

  // The running groups in file order, then order within the file.
  std::vector<std::shared_ptr<Group>> Groups() const;
  // global.external_labels of the last applied config (also used by /federate).
  model::Labels ExternalLabels() const;

  // Hands alerts to every sender, with the external labels added where the
  // alert lacks them: the groups' alerts, and alerts from outside the rules
  // (run alerts of the runs API, which app/ routes here).
  void Notify(std::vector<OutgoingAlert> alerts);

 private:
  // trainwatch_rule_groups, trainwatch_rules{health}, trainwatch_alerts{state} at scrape time.
  void CollectStateMetrics(common::metrics::Emitter* e) const;

  const ManagerOptions opts_;
  QueryFunc query_;
  // Lock order: mu_, then senders_mu_. Group threads take only senders_mu_
  // (Notify), so Update may join them while holding mu_.
  mutable base::Mutex mu_;
  std::vector<std::shared_ptr<Group>> groups_ TW_GUARDED_BY(mu_);
  bool restored_ TW_GUARDED_BY(mu_) = false;  // the first Update restores for-state; later ones copy state
  bool stopped_ TW_GUARDED_BY(mu_) = false;
  mutable base::Mutex senders_mu_ TW_ACQUIRED_AFTER(mu_);
  model::Labels external_labels_ TW_GUARDED_BY(senders_mu_);
  std::vector<AlertSender> senders_ TW_GUARDED_BY(senders_mu_);
  std::shared_ptr<AlertmanagerNotifier> alertmanagers_ TW_GUARDED_BY(senders_mu_);  // null until configured
  common::metrics::CounterFamily alerts_sent_;  // handed to the senders
  common::metrics::Collector state_metrics_;    // groups, rules by health, alerts by state
  common::metrics::Registration metrics_registration_;  // last: unregisters first
};

// Expands `rule_files` patterns (shell globs, relative to base_dir when not
// absolute) into sorted, distinct paths. A pattern matching nothing is no error.
Result<std::vector<std::string>> ExpandRuleFiles(const std::vector<std::string>& patterns,
                                                 const std::string& base_dir);

// The built-in training rule pack (rules/training.rules.yml, embedded at build time).
std::string_view DefaultRulePack();
inline constexpr std::string_view kDefaultRulePackName = "builtin:training.rules.yml";

}  // namespace trainwatch::rules
