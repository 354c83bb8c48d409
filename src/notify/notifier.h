#pragma once
// The embedded Alertmanager: alerts in (PutAlerts, from POST /api/v2/alerts
// and from the rule evaluator), routed through the route tree into
// aggregation groups, flushed on Alertmanager's group_wait / group_interval /
// repeat_interval timing, filtered by inhibition, silences and time
// intervals, deduplicated against the notification log, and delivered by the
// receivers' integrations with retries and exponential backoff.
//
// Silences and the notification log are persisted in
// <data>/alertmanager/{silences,nflog}.json (atomic rewrite on change), so a
// restart neither loses a silence nor repeats a notification. Alerts are not
// persisted, as in Alertmanager: senders re-send them.
//
// Thread-safe. One dispatcher thread runs the timing; deliveries run on a
// few sender threads so a slow receiver delays only its own group.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "common/metrics.h"
#include "model/labels.h"
#include "model/matcher.h"
#include "notify/config.h"

namespace trainwatch::notify {

// The integration name of a receiver without integrations in the history:
// its notifications are recorded there and sent nowhere.
inline constexpr const char* kRecordOnly = "record";

// What serve runs without --alertmanager.config.file: every alert grouped by
// name, project and run, silenced and inhibited as configured in the UI, and
// recorded in the notification history; nothing is sent anywhere.
inline constexpr std::string_view kDefaultConfigYaml = R"(# trainwatch's built-in alertmanager.yml
route:
  receiver: record-only
  group_by: [alertname, project, run]
receivers:
  - name: record-only
)";

// An alert as sent by Prometheus or the rule evaluator. ends_at_ms 0: unset
// (resolves after global.resolve_timeout unless re-sent).
struct Alert {
  model::Labels labels;
  model::Labels annotations;
  int64_t starts_at_ms = 0;
  int64_t ends_at_ms = 0;
  std::string generator_url;
};

// An alert as held: fingerprint (hash of the labels) and update time.
struct StoredAlert {
  Alert alert;
  uint64_t fingerprint = 0;
  int64_t updated_at_ms = 0;
  bool timeout = false;  // ends_at came from resolve_timeout
  bool Resolved(int64_t now_ms) const { return alert.ends_at_ms != 0 && alert.ends_at_ms <= now_ms; }
};

struct Silence {
  std::string id;
  std::vector<model::Matcher> matchers;
  int64_t starts_at_ms = 0;
  int64_t ends_at_ms = 0;
  int64_t updated_at_ms = 0;
  std::string created_by;
  std::string comment;
  // "pending", "active" or "expired".
  std::string State(int64_t now_ms) const;
};

// One delivery attempt, for GET /api/v1/notifications.
struct NotificationRecord {
  int64_t time_ms = 0;
  std::string receiver, integration, group_key;
  std::string status;  // "firing" or "resolved" (the group's)
  size_t alerts = 0;
  int attempt = 1;
  bool success = false;
  std::string error;
};

struct AlertView {
  StoredAlert alert;
  std::string state;  // "active", "suppressed" or "unprocessed"
  std::vector<std::string> silenced_by, inhibited_by;
  std::vector<std::string> receivers;
};

struct GroupView {
  model::Labels labels;
  std::string receiver;
  std::vector<AlertView> alerts;
};

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;
};

struct NotifierOptions {
  std::string dir;            // state dir (<data>/alertmanager); empty: nothing persisted
  std::string external_url;   // externalURL in payloads
  Clock* clock = nullptr;     // null: wall clock
  bool background = true;     // run the dispatcher thread; false: tests call Tick()
  size_t history = 1000;      // delivery attempts kept for History()
  int sender_threads = 4;
  int64_t retry_initial_ms = 500;
  int64_t retry_max_ms = 30000;
  int64_t send_timeout_ms = 10000;
  int64_t nflog_retention_ms = 120LL * 3600 * 1000;  // as Alertmanager's --data.retention
  // Where trainwatch_notifications_*_total{integration} and the alert and
  // silence gauges register (outlives the notifier); null: nowhere.
  common::metrics::Registry* metrics = nullptr;
};

class Notifier {
 public:
  static Result<std::unique_ptr<Notifier>> Open(NotifierOptions opts, std::shared_ptr<const Config> cfg);
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Replaces the config; groups are rebuilt (the notification log keeps
  // already-sent groups from being sent again).
  void ApplyConfig(std::shared_ptr<const Config> cfg);
  std::shared_ptr<const Config> config() const;

  // Validates every alert first; on error nothing is taken. The error names
  // the alert's index and field.
  Status PutAlerts(std::vector<Alert> alerts);

  // Flushes the groups that are due (the dispatcher thread calls this).
  void Tick();
  // Waits until no delivery is queued or running (tests).
  void WaitIdle();
  // Stops the threads; deliveries in flight are abandoned after their current attempt.
  void Stop();

  std::vector<AlertView> ListAlerts() const;
  std::vector<GroupView> ListGroups() const;
  // Creates a silence or updates one by id; returns the id once silences.json
  // is written and fsynced. When it can't be, the error is IOError and the
  // silence (or the update) does not take effect.
  Result<std::string> PutSilence(Silence s);
  std::vector<Silence> ListSilences() const;
  Result<Silence> GetSilence(const std::string& id) const;
  // Ends the silence now; like PutSilence, only once persisted.
  Status ExpireSilence(const std::string& id);
  // Newest first.
  std::vector<NotificationRecord> History(size_t limit) const;
  int64_t start_time_ms() const { return start_ms_; }

 private:
  struct Group;
  struct NflogEntry {
    int64_t time_ms = 0;
    std::set<uint64_t> firing, resolved;
  };
  struct Job;

  Notifier(NotifierOptions opts, std::shared_ptr<const Config> cfg);
  int64_t Now() const;
  void InsertLocked(const StoredAlert& a, int64_t now) TW_REQUIRES(mu_);
  void RebuildGroupsLocked(int64_t now) TW_REQUIRES(mu_);
  void FlushLocked(Group& g, int64_t now, std::vector<std::shared_ptr<Job>>* jobs) TW_REQUIRES(mu_);
  bool SilencedLocked(const model::Labels& ls, int64_t now, std::vector<std::string>* by) const TW_REQUIRES(mu_);
  bool InhibitedLocked(const StoredAlert& a, int64_t now, std::vector<std::string>* by) const TW_REQUIRES(mu_);
  AlertView ViewLocked(const StoredAlert& a, int64_t now) const TW_REQUIRES(mu_);
  void RunJob(const std::shared_ptr<Job>& job);
  void DispatchLoop();
  void SenderLoop();
  Status LoadState() TW_REQUIRES(mu_);
  // Rewrite silences.json / nflog.json (write, fsync, rename); OK without a state dir.
  Status PersistSilencesLocked() TW_REQUIRES(mu_);
  Status PersistNflogLocked() TW_REQUIRES(mu_);
  int64_t NextDueLocked() const TW_REQUIRES(mu_);
  // trainwatch_alertmanager_alerts and _silences, by state, at scrape time.
  void CollectStateMetrics(common::metrics::Emitter* e) const;

  const NotifierOptions opts_;
  const int64_t start_ms_;
  mutable base::Mutex mu_;
  base::CondVar cv_;       // dispatcher wake-up
  base::CondVar jobs_cv_;  // sender wake-up and WaitIdle
  std::shared_ptr<const Config> cfg_ TW_GUARDED_BY(mu_);
  std::map<uint64_t, StoredAlert> alerts_ TW_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<Group>> groups_ TW_GUARDED_BY(mu_);
  std::map<std::string, Silence> silences_ TW_GUARDED_BY(mu_);
  std::map<std::string, NflogEntry> nflog_ TW_GUARDED_BY(mu_);  // groupKey \x1f receiver \x1f integration[idx]
  std::set<std::string> in_flight_ TW_GUARDED_BY(mu_);          // nflog keys being delivered
  std::deque<std::shared_ptr<Job>> queue_ TW_GUARDED_BY(mu_);
  size_t running_ TW_GUARDED_BY(mu_) = 0;
  std::deque<NotificationRecord> history_ TW_GUARDED_BY(mu_);
  bool stop_ TW_GUARDED_BY(mu_) = false;
  std::thread dispatcher_;
  std::vector<std::thread> senders_;
  common::metrics::CounterFamily notifications_;         // attempts by integration
  common::metrics::CounterFamily notifications_failed_;  // failed attempts by integration
  common::metrics::Collector state_metrics_;             // alerts and silences by state
  common::metrics::Registration metrics_registration_;   // last: unregisters first
};

// "2024-05-01T10:00:00.123Z" (Go's RFC3339Nano, trailing zeros trimmed);
// 0 gives Go's zero time "0001-01-01T00:00:00Z".
std::string FormatTime(int64_t unix_ms);
// Parses RFC3339 (with optional fraction and offset).
Result<int64_t> ParseTime(std::string_view s);
// `{a="1", b="2"}` as Go's model.LabelSet.String.
std::string LabelSetString(const model::Labels& ls);
// An alert's identity, Alertmanager's fingerprint (Prometheus's
// model.LabelSet.Fingerprint: FNV-1a 64 over name, 0xff, value, 0xff in name order).
uint64_t AlertFingerprint(const model::Labels& ls);
// 16 hex digits.
std::string FingerprintString(uint64_t fp);

}  // namespace trainwatch::notify
