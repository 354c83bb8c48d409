#pragma once
// Forwarding alerts to external Alertmanagers, as Prometheus's notifier
// (notifier/notifier.go) does for `alerting:` in prometheus.yml:
// alertmanagers with static_configs targets, scheme, path_prefix, timeout,
// api_version (v2: POST <prefix>/api/v2/alerts with a JSON array) and the
// HTTP client config (basic_auth, authorization, bearer_token*, tls_config:
// scrape/http_client.h), and alert_relabel_configs applied before queueing. The queue holds at most
// 10,000 alerts; on overflow the oldest are dropped and counted. Batches of
// up to 64 alerts go to every Alertmanager; a failed POST is counted and
// logged (Prometheus does not retry either: the next resend covers it).
//
// Thread safety: every method may be called from any thread.

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/mutex.h"
#include "base/status.h"
#include "common/http_client.h"
#include "common/metrics.h"
#include "rules/alert.h"
#include "common/relabel.h"

namespace trainwatch::rules {

struct AlertmanagerTarget {
  std::string scheme = "http";
  std::string host;              // host:port
  std::string path_prefix = "/";
  int64_t timeout_ms = 10000;
  common::HttpClientConfig http;  // auth and TLS, as a scrape config's
  // POST URL path of the v2 API.
  std::string AlertsPath() const;
  std::string Url() const { return scheme + "://" + host + AlertsPath(); }
};

struct AlertingConfig {
  std::vector<AlertmanagerTarget> alertmanagers;
  std::vector<common::RelabelConfig> relabel_configs;  // alerting.alert_relabel_configs
};

// Parses the `alerting:` section (null: nothing configured). Errors name
// the field, e.g. "alerting.alertmanagers[0].api_version: unsupported \"v1\"".
Result<AlertingConfig> ParseAlertingConfig(const YAML::Node& alerting);

// Alertmanager API v2 postable alerts: [{"labels":{},"annotations":{},
// "startsAt":"...","endsAt":"...","generatorURL":"..."}].
std::string AlertsToJson(const std::vector<OutgoingAlert>& alerts);

class AlertmanagerNotifier {
 public:
  static constexpr size_t kDefaultQueueCapacity = 10000;
  static constexpr size_t kMaxBatch = 64;

  // Registers trainwatch_alertmanager_alerts_{sent,errors,dropped}_total and
  // _queue_length in `metrics` (outlives it) unless null.
  explicit AlertmanagerNotifier(size_t queue_capacity = kDefaultQueueCapacity,
                                common::metrics::Registry* metrics = nullptr);
  ~AlertmanagerNotifier();

  void ApplyConfig(AlertingConfig cfg);
  // Relabels and queues; returns at once. The AlertSender of the rule manager.
  void Send(std::vector<OutgoingAlert> alerts);
  // Sends what is queued for up to 5 s (the rest is dropped and counted),
  // then stops. Idempotent.
  void Stop();
  size_t queue_length() const;

 private:
  void Run();
  bool Post(const AlertmanagerTarget& t, const std::string& body, std::string* err);

  const size_t capacity_;
  mutable base::Mutex mu_;
  base::CondVar cv_;
  AlertingConfig cfg_ TW_GUARDED_BY(mu_);
  std::deque<OutgoingAlert> queue_ TW_GUARDED_BY(mu_);
  bool stop_ TW_GUARDED_BY(mu_) = false;
  std::thread thread_;
  common::metrics::CounterFamily sent_;     // alerts by Alertmanager URL
  common::metrics::CounterFamily errors_;   // alerts by Alertmanager URL
  common::metrics::CounterFamily dropped_;  // by the queue bound or at stop
  common::metrics::Collector queue_length_;
  common::metrics::Registration metrics_registration_;  // last: unregisters first
};

}  // namespace trainwatch::rules
