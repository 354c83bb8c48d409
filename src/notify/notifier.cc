#include "notify/notifier.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/file.h"
#include "base/json.h"
#include "base/log.h"
#include "notify/integrations.h"

namespace trainwatch::notify {

using Json = nlohmann::json;

struct Notifier::Group {
  const Route* route = nullptr;
  model::Labels labels;
  std::string group_key;
  std::set<uint64_t> alerts;
  int64_t next_flush_ms = 0;
  bool flushed = false;
};

// What one flush of a group hands to the senders, shared by its jobs.
struct FlushState {
  std::string group_map_key;
  std::vector<std::pair<uint64_t, int64_t>> resolved;  // (fingerprint, updated_at) to drop after success
  int pending = 0;
  bool all_ok = true;
};

struct Notifier::Job {
  std::shared_ptr<const Config> cfg;  // keeps the integration config alive
  std::shared_ptr<FlushState> flush;
  std::string nflog_key, receiver, integration;
  size_t index = 0;
  NotificationData data;
  std::set<uint64_t> firing, resolved;
  bool send = true;  // false: nothing left after send_resolved; only logged
  int64_t deadline_nanos = 0;
};

namespace {

class WallClock : public Clock {
 public:
  int64_t NowMs() override { return NowMillis(); }
};

std::string NewUuid() {
  std::random_device rd;
  std::mt19937_64 g((static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(MonoNanos()));
  uint64_t a = g(), b = g();
  a = (a & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;
  b = (b & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012" PRIx64, static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48), static_cast<uint64_t>(b & 0xffffffffffffULL));
  return buf;
}

Json MatcherJson(const model::Matcher& m) {
  bool re = m.type() == model::MatchType::kRegex || m.type() == model::MatchType::kNotRegex;
  bool eq = m.type() == model::MatchType::kEqual || m.type() == model::MatchType::kRegex;
  return Json{{"name", m.name()}, {"value", m.value()}, {"isRegex", re}, {"isEqual", eq}};
}

Result<model::Matcher> MatcherFromJson(const Json& j) {
  bool re = j.value("isRegex", false), eq = j.value("isEqual", true);
  model::MatchType t = re ? (eq ? model::MatchType::kRegex : model::MatchType::kNotRegex)
                          : (eq ? model::MatchType::kEqual : model::MatchType::kNotEqual);
  return model::Matcher::Make(t, j.at("name").get<std::string>(), j.at("value").get<std::string>());
}

const char* kIntegrations[] = {"email", "pagerduty", "slack", "webhook"};

}  // namespace

// ---- formatting helpers ----

std::string FormatTime(int64_t ms) {
  if (ms == 0) return "0001-01-01T00:00:00Z";
  int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  int frac = static_cast<int>(ms - secs * 1000);
  time_t t = static_cast<time_t>(secs);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[64];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string o = buf;
  if (frac != 0) {
    char f[8];
    std::snprintf(f, sizeof(f), ".%03d", frac);
    std::string fs = f;
    while (fs.back() == '0') fs.pop_back();
    o += fs;
  }
  return o + "Z";
}

Result<int64_t> ParseTime(std::string_view s) {
  int y, mo, d, h, mi, sec;
  char tail[64] = {0};
  std::string str(s.substr(0, 60));
  if (std::sscanf(str.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%63s", &y, &mo, &d, &h, &mi, &sec, tail) < 6) {
    return Status::InvalidArgument("invalid time \"" + std::string(s) + "\" (want RFC3339)");
  }
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
  std::string_view t = tail;
  if (t.starts_with(".")) {
    size_t i = 1;
    int64_t scale = 100;
    while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
      ms += (t[i] - '0') * scale;
      scale /= 10;
      i++;
    }
    t.remove_prefix(i);
  }
  if (t == "Z" || t == "z") return ms;
  if (t.size() == 6 && (t[0] == '+' || t[0] == '-') && t[3] == ':') {
    int oh = std::atoi(std::string(t.substr(1, 2)).c_str()), om = std::atoi(std::string(t.substr(4, 2)).c_str());
    int64_t off = (oh * 60 + om) * 60000LL;
    return t[0] == '+' ? ms - off : ms + off;
  }
  if (y == 1 && mo == 1 && d == 1 && t.empty()) return ms;
  return Status::InvalidArgument("invalid time \"" + std::string(s) + "\" (want RFC3339)");
}

std::string LabelSetString(const model::Labels& ls) {
  std::string o = "{";
  bool first = true;
  for (const auto& l : ls) {
    if (!first) o += ", ";
    first = false;
    o += l.name + "=\"";
    for (char c : l.value) {
      if (c == '"' || c == '\\') o += '\\';
      if (c == '\n') { o += "\\n"; continue; }
      o += c;
    }
    o += "\"";
  }
  return o + "}";
}

uint64_t AlertFingerprint(const model::Labels& ls) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a 64 offset basis
  auto add = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  };
  for (const auto& l : ls) {  // sorted by name
    add(l.name);
    add("\xff");
    add(l.value);
    add("\xff");
  }
  return h;
}

std::string FingerprintString(uint64_t fp) {
  char buf[20];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, fp);
  return buf;
}

std::string Silence::State(int64_t now) const {
  if (ends_at_ms <= now) return "expired";
  if (starts_at_ms > now) return "pending";
  return "active";
}

// ---- lifecycle ----

Notifier::Notifier(NotifierOptions opts, std::shared_ptr<const Config> cfg)
    : opts_(std::move(opts)),
      start_ms_(NowMillis()),
      cfg_(std::move(cfg)),
      notifications_("trainwatch_notifications_total", "The total number of attempted notifications.",
                     {"integration"}),
      notifications_failed_("trainwatch_notifications_failed_total", "The total number of failed notifications.",
                            {"integration"}),
      state_metrics_({{"trainwatch_alertmanager_alerts", "How many alerts the notifier holds, by state.",
                       common::metrics::Type::kGauge, {"state"}},
                      {"trainwatch_alertmanager_silences", "How many silences the notifier holds, by state.",
                       common::metrics::Type::kGauge, {"state"}}},
                     [this](common::metrics::Emitter* e) { CollectStateMetrics(e); }) {
  for (const char* i : kIntegrations) {
    notifications_.With({i});
    notifications_failed_.With({i});
  }
  if (opts_.metrics != nullptr) {
    metrics_registration_ = opts_.metrics->MustRegister({&notifications_, &notifications_failed_, &state_metrics_});
  }
}

Result<std::unique_ptr<Notifier>> Notifier::Open(NotifierOptions opts, std::shared_ptr<const Config> cfg) {
  if (cfg == nullptr) return Status::InvalidArgument("notifier: no configuration");
  static WallClock wall;
  if (opts.clock == nullptr) opts.clock = &wall;
  std::unique_ptr<Notifier> n(new Notifier(std::move(opts), std::move(cfg)));
  if (!n->opts_.dir.empty()) {
    RETURN_IF_ERROR(file::MkdirAll(n->opts_.dir).Annotate("notifier state dir"));
    base::MutexLock l(&n->mu_);  // no thread runs yet; taken for the analysis
    RETURN_IF_ERROR(n->LoadState());
  }
  for (int i = 0; i < std::max(1, n->opts_.sender_threads); i++) {
    n->senders_.emplace_back([p = n.get()] { p->SenderLoop(); });
  }
  if (n->opts_.background) n->dispatcher_ = std::thread([p = n.get()] { p->DispatchLoop(); });
  return n;
}

Notifier::~Notifier() { Stop(); }

void Notifier::Stop() {
  {
    base::MutexLock l(&mu_);
    if (stop_ && senders_.empty() && !dispatcher_.joinable()) return;
    stop_ = true;
  }
  cv_.SignalAll();
  jobs_cv_.SignalAll();
  if (dispatcher_.joinable()) dispatcher_.join();
  for (auto& t : senders_) t.join();
  senders_.clear();
}

int64_t Notifier::Now() const { return opts_.clock->NowMs(); }

std::shared_ptr<const Config> Notifier::config() const {
  base::MutexLock l(&mu_);
  return cfg_;
}

void Notifier::ApplyConfig(std::shared_ptr<const Config> cfg) {
  {
    base::MutexLock l(&mu_);
    cfg_ = std::move(cfg);
    RebuildGroupsLocked(Now());
  }
  cv_.SignalAll();
}

void Notifier::RebuildGroupsLocked(int64_t now) {
  groups_.clear();
  for (const auto& [fp, a] : alerts_) InsertLocked(a, now);
}

// ---- alerts ----

Status Notifier::PutAlerts(std::vector<Alert> alerts) {
  for (size_t i = 0; i < alerts.size(); i++) {
    const Alert& a = alerts[i];
    std::string where = "alert " + std::to_string(i);
    if (a.labels.empty()) return Status::InvalidArgument(where + ": at least one label pair required");
    for (const auto& l : a.labels) {
      if (!model::IsValidLabelName(l.name)) return Status::InvalidArgument(where + ": invalid label name \"" + l.name + "\"");
      if (l.value.empty()) return Status::InvalidArgument(where + ": empty value for label \"" + l.name + "\"");
    }
    for (const auto& l : a.annotations) {
      if (!model::IsValidLabelName(l.name)) return Status::InvalidArgument(where + ": invalid annotation name \"" + l.name + "\"");
    }
    if (a.ends_at_ms != 0 && a.starts_at_ms != 0 && a.ends_at_ms < a.starts_at_ms) {
      return Status::InvalidArgument(where + ": start time must be before end time");
    }
  }
  {
    base::MutexLock l(&mu_);
    int64_t now = Now();
    for (Alert& in : alerts) {
      StoredAlert s;
      s.alert = std::move(in);
      s.updated_at_ms = now;
      if (s.alert.starts_at_ms == 0) {
        s.alert.starts_at_ms = s.alert.ends_at_ms != 0 && s.alert.ends_at_ms < now ? s.alert.ends_at_ms : now;
      }
      if (s.alert.ends_at_ms == 0) {
        s.timeout = true;
        s.alert.ends_at_ms = now + cfg_->global.resolve_timeout_ms;
      }
      s.fingerprint = AlertFingerprint(s.alert.labels);
      auto it = alerts_.find(s.fingerprint);
      if (it != alerts_.end()) {
        const StoredAlert& o = it->second;
        // Overlapping with the held one: merge as Alertmanager's Alert.Merge.
        if (o.alert.ends_at_ms >= s.alert.starts_at_ms && o.alert.starts_at_ms <= s.alert.ends_at_ms) {
          s.alert.starts_at_ms = std::min(s.alert.starts_at_ms, o.alert.starts_at_ms);
          if (s.Resolved(now)) {
            if (o.Resolved(now) && o.alert.ends_at_ms > s.alert.ends_at_ms) s.alert.ends_at_ms = o.alert.ends_at_ms;
          } else if (o.alert.ends_at_ms > s.alert.ends_at_ms && !o.timeout) {
            s.alert.ends_at_ms = o.alert.ends_at_ms;
          }
        }
      }
      alerts_[s.fingerprint] = s;
      InsertLocked(s, now);
    }
  }
  cv_.SignalAll();
  return Status::OK();
}

void Notifier::InsertLocked(const StoredAlert& a, int64_t now) {
  for (const Route* r : MatchRoutes(cfg_->route, a.alert.labels)) {
    std::vector<model::Label> gl;
    for (const auto& l : a.alert.labels) {
      if (r->group_by_all || std::find(r->group_by.begin(), r->group_by.end(), l.name) != r->group_by.end()) {
        gl.push_back(l);
      }
    }
    model::Labels labels(std::move(gl));
    std::string group_key = r->key + ":" + LabelSetString(labels);
    char ptr[32];
    std::snprintf(ptr, sizeof(ptr), "%p|", static_cast<const void*>(r));
    std::string map_key = ptr + group_key;
    auto& g = groups_[map_key];
    if (g == nullptr) {
      g = std::make_unique<Group>();
      g->route = r;
      g->labels = std::move(labels);
      g->group_key = group_key;
      g->next_flush_ms = now + r->group_wait_ms;
    }
    g->alerts.insert(a.fingerprint);
    // An alert older than group_wait is sent at once, as Alertmanager does.
    if (!g->flushed && a.alert.starts_at_ms + r->group_wait_ms < now) g->next_flush_ms = now;
  }
}

bool Notifier::SilencedLocked(const model::Labels& ls, int64_t now, std::vector<std::string>* by) const {
  bool any = false;
  for (const auto& [id, s] : silences_) {
    if (s.State(now) != "active") continue;
    if (!MatchAll(s.matchers, ls)) continue;
    any = true;
    if (by == nullptr) return true;
    by->push_back(id);
  }
  return any;
}

bool Notifier::InhibitedLocked(const StoredAlert& a, int64_t now, std::vector<std::string>* by) const {
  bool any = false;
  for (const InhibitRule& r : cfg_->inhibit_rules) {
    if (!MatchAll(r.target, a.alert.labels)) continue;
    bool target_is_source = MatchAll(r.source, a.alert.labels);
    for (const auto& [fp, s] : alerts_) {
      if (fp == a.fingerprint || s.Resolved(now)) continue;
      if (!MatchAll(r.source, s.alert.labels)) continue;
      // Alertmanager's excludeTwoSidedMatch: a source that is also a target
      // cannot inhibit a target that is also a source.
      if (target_is_source && MatchAll(r.target, s.alert.labels)) continue;
      bool equal = true;
      for (const auto& l : r.equal) {
        if (s.alert.labels.Get(l) != a.alert.labels.Get(l)) { equal = false; break; }
      }
      if (!equal) continue;
      any = true;
      if (by == nullptr) return true;
      by->push_back(FingerprintString(fp));
      break;
    }
  }
  return any;
}

AlertView Notifier::ViewLocked(const StoredAlert& a, int64_t now) const {
  AlertView v;
  v.alert = a;
  SilencedLocked(a.alert.labels, now, &v.silenced_by);
  InhibitedLocked(a, now, &v.inhibited_by);
  v.state = v.silenced_by.empty() && v.inhibited_by.empty() ? "active" : "suppressed";
  for (const Route* r : MatchRoutes(cfg_->route, a.alert.labels)) {
    if (std::find(v.receivers.begin(), v.receivers.end(), r->receiver) == v.receivers.end()) {
      v.receivers.push_back(r->receiver);
    }
  }
  return v;
}

std::vector<AlertView> Notifier::ListAlerts() const {
  base::MutexLock l(&mu_);
  int64_t now = Now();
  std::vector<AlertView> out;
  for (const auto& [fp, a] : alerts_) {
    if (a.Resolved(now)) continue;
    out.push_back(ViewLocked(a, now));
  }
  return out;
}

std::vector<GroupView> Notifier::ListGroups() const {
  base::MutexLock l(&mu_);
  int64_t now = Now();
  std::vector<GroupView> out;
  for (const auto& [k, g] : groups_) {
    GroupView v;
    v.labels = g->labels;
    v.receiver = g->route->receiver;
    for (uint64_t fp : g->alerts) {
      auto it = alerts_.find(fp);
      if (it == alerts_.end() || it->second.Resolved(now)) continue;
      v.alerts.push_back(ViewLocked(it->second, now));
    }
    if (!v.alerts.empty()) out.push_back(std::move(v));
  }
  return out;
}

// ---- dispatching ----

int64_t Notifier::NextDueLocked() const {
  int64_t next = INT64_MAX;
  for (const auto& [k, g] : groups_) next = std::min(next, g->next_flush_ms);
  return next;
}

void Notifier::Tick() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    base::MutexLock l(&mu_);
    int64_t now = Now();
    for (auto it = groups_.begin(); it != groups_.end();) {
      Group& g = *it->second;
      if (g.next_flush_ms <= now) {
        g.next_flush_ms = now + g.route->group_interval_ms;
        g.flushed = true;
        FlushLocked(g, now, &jobs);
      }
      if (g.alerts.empty()) it = groups_.erase(it);
      else ++it;
    }
    // Resolved alerts no group holds any more are forgotten.
    std::set<uint64_t> held;
    for (const auto& [k, g] : groups_) held.insert(g->alerts.begin(), g->alerts.end());
    for (auto it = alerts_.begin(); it != alerts_.end();) {
      if (it->second.Resolved(now) && !held.contains(it->first)) it = alerts_.erase(it);
      else ++it;
    }
    bool nflog_changed = false, silences_changed = false;
    for (auto it = nflog_.begin(); it != nflog_.end();) {
      if (it->second.time_ms + opts_.nflog_retention_ms < now && !in_flight_.contains(it->first)) {
        it = nflog_.erase(it);
        nflog_changed = true;
      } else {
        ++it;
      }
    }
    for (auto it = silences_.begin(); it != silences_.end();) {
      if (it->second.ends_at_ms + opts_.nflog_retention_ms < now) {
        it = silences_.erase(it);
        silences_changed = true;
      } else {
        ++it;
      }
    }
    // Garbage collection only: a failed write is retried with the next change.
    for (Status st : {nflog_changed ? PersistNflogLocked() : Status::OK(),
                      silences_changed ? PersistSilencesLocked() : Status::OK()}) {
      if (!st.ok()) TW_LOG(Error, "notifier: {}", st.ToString());
    }
    for (auto& j : jobs) {
      if (!j->send) continue;
      in_flight_.insert(j->nflog_key);
      queue_.push_back(j);
    }
  }
  jobs_cv_.SignalAll();
  // Jobs with nothing to send only update the notification log.
  for (auto& j : jobs) {
    if (!j->send) RunJob(j);
  }
}

void Notifier::FlushLocked(Group& g, int64_t now, std::vector<std::shared_ptr<Job>>* jobs) {
  const Route& r = *g.route;
  auto flush = std::make_shared<FlushState>();
  char ptr[32];
  std::snprintf(ptr, sizeof(ptr), "%p|", static_cast<const void*>(&r));
  flush->group_map_key = ptr + g.group_key;
  std::vector<StoredAlert> alerts;
  for (auto it = g.alerts.begin(); it != g.alerts.end();) {
    auto a = alerts_.find(*it);
    if (a == alerts_.end()) {
      it = g.alerts.erase(it);
      continue;
    }
    if (a->second.Resolved(now)) flush->resolved.emplace_back(a->first, a->second.updated_at_ms);
    ++it;
    if (InhibitedLocked(a->second, now, nullptr) || SilencedLocked(a->second.alert.labels, now, nullptr)) continue;
    alerts.push_back(a->second);
  }
  auto drop_resolved = [&]() {
    mu_.AssertHeld();  // called below, under the caller's lock
    for (auto [fp, upd] : flush->resolved) {
      auto a = alerts_.find(fp);
      if (a == alerts_.end() || a->second.updated_at_ms == upd) g.alerts.erase(fp);
    }
  };
  // Mute and active time intervals: nothing is sent or logged while muted.
  for (const auto& name : r.mute_time_intervals) {
    auto it = cfg_->time_intervals.find(name);
    if (it == cfg_->time_intervals.end()) continue;
    for (const TimeInterval& ti : it->second) {
      if (ti.Contains(now)) return;
    }
  }
  if (!r.active_time_intervals.empty()) {
    bool active = false;
    for (const auto& name : r.active_time_intervals) {
      auto it = cfg_->time_intervals.find(name);
      if (it == cfg_->time_intervals.end()) continue;
      for (const TimeInterval& ti : it->second) active = active || ti.Contains(now);
    }
    if (!active) return;
  }
  if (alerts.empty()) {
    drop_resolved();
    return;
  }
  const Receiver* recv = cfg_->FindReceiver(r.receiver);
  if (recv == nullptr) return;
  std::set<uint64_t> firing, resolved;
  for (const auto& a : alerts) (a.Resolved(now) ? resolved : firing).insert(a.fingerprint);
  std::vector<std::shared_ptr<Job>> mine;
  auto add = [&](const char* integration, size_t idx, bool send_resolved) {
    mu_.AssertHeld();  // called below, under the caller's lock
    auto j = std::make_shared<Job>();
    j->cfg = cfg_;
    j->flush = flush;
    j->receiver = recv->name;
    j->integration = integration;
    j->index = idx;
    j->nflog_key = g.group_key + '\x1f' + recv->name + '\x1f' + integration + "[" + std::to_string(idx) + "]";
    if (in_flight_.contains(j->nflog_key)) {
      flush->all_ok = false;  // a delivery of this group is still retrying; the next flush catches up
      return;
    }
    // Alertmanager's DedupStage.needsUpdate.
    auto e = nflog_.find(j->nflog_key);
    bool needs;
    if (e == nflog_.end()) {
      needs = !firing.empty();
    } else if (!std::includes(e->second.firing.begin(), e->second.firing.end(), firing.begin(), firing.end())) {
      needs = true;
    } else if (firing.empty()) {
      needs = !e->second.firing.empty();
    } else if (send_resolved &&
               !std::includes(e->second.resolved.begin(), e->second.resolved.end(), resolved.begin(), resolved.end())) {
      needs = true;
    } else {
      needs = e->second.time_ms < now - r.repeat_interval_ms;
    }
    if (!needs) return;
    std::vector<StoredAlert> send = alerts;
    if (!send_resolved) {
      send.erase(std::remove_if(send.begin(), send.end(), [&](const StoredAlert& a) { return a.Resolved(now); }), send.end());
    }
    j->send = !send.empty();
    j->firing = firing;
    j->resolved = resolved;
    j->data = MakeNotificationData(recv->name, g.group_key, g.labels, std::move(send), opts_.external_url, now);
    j->deadline_nanos = MonoNanos() + std::max<int64_t>(r.group_interval_ms, 10000) * 1000000;
    mine.push_back(std::move(j));
  };
  for (size_t i = 0; i < recv->webhook.size(); i++) add("webhook", i, recv->webhook[i].send_resolved);
  for (size_t i = 0; i < recv->email.size(); i++) add("email", i, recv->email[i].send_resolved);
  for (size_t i = 0; i < recv->slack.size(); i++) add("slack", i, recv->slack[i].send_resolved);
  for (size_t i = 0; i < recv->pagerduty.size(); i++) add("pagerduty", i, recv->pagerduty[i].send_resolved);
  // A receiver without integrations (the default configuration's) records
  // its notifications in the history, on the same schedule, and sends none.
  if (recv->webhook.empty() && recv->email.empty() && recv->slack.empty() && recv->pagerduty.empty()) {
    add(kRecordOnly, 0, true);
  }
  if (mine.empty()) {
    if (flush->all_ok) drop_resolved();
    return;
  }
  flush->pending = static_cast<int>(mine.size());
  jobs->insert(jobs->end(), mine.begin(), mine.end());
}

void Notifier::RunJob(const std::shared_ptr<Job>& j) {
  bool ok = true;
  if (j->send) {
    const Receiver* recv = j->cfg->FindReceiver(j->receiver);
    SendOptions so{opts_.send_timeout_ms, j->cfg->compiled_templates.get()};
    int64_t backoff = opts_.retry_initial_ms;
    for (int attempt = 1;; attempt++) {
      Status s;
      // Nothing an integration throws may end the sender thread (or the
      // process): it is a failed attempt, not retried.
      try {
        if (j->integration == kRecordOnly) s = Status::OK();
        else if (j->integration == "webhook") s = SendWebhook(recv->webhook[j->index], j->data, so);
        else if (j->integration == "email") s = SendEmail(recv->email[j->index], j->data, so);
        else if (j->integration == "slack") s = SendSlack(recv->slack[j->index], j->data, so);
        else s = SendPagerduty(recv->pagerduty[j->index], j->data, so);
      } catch (const std::exception& e) {
        s = Status::InvalidArgument(j->integration + ": " + e.what());
      }
      bool stop_now = false;
      {
        base::MutexLock l(&mu_);
        NotificationRecord rec{Now(), j->receiver, j->integration, j->data.group_key, j->data.status,
                               j->data.alerts.size(), attempt, s.ok(), s.ok() ? "" : s.message()};
        history_.push_front(std::move(rec));
        while (history_.size() > opts_.history) history_.pop_back();
        notifications_.With({j->integration}).Inc();
        if (!s.ok()) notifications_failed_.With({j->integration}).Inc();
        stop_now = stop_;
      }
      if (s.ok()) break;
      TW_LOG(Warn, "notify {} {} (attempt {}): {}", j->receiver, j->integration, attempt, s.message());
      if (s.code() != StatusCode::kUnavailable || stop_now || MonoNanos() + backoff * 1000000 > j->deadline_nanos) {
        ok = false;
        break;
      }
      base::MutexLock l(&mu_);
      auto retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff);
      while (!stop_ && jobs_cv_.WaitUntil(&mu_, retry_at)) {
      }
      if (stop_) {
        ok = false;
        break;
      }
      backoff = std::min(backoff * 2, opts_.retry_max_ms);
    }
  }
  base::MutexLock l(&mu_);
  in_flight_.erase(j->nflog_key);
  if (ok) {
    nflog_[j->nflog_key] = NflogEntry{Now(), j->firing, j->resolved};
    // The delivery happened; a log that can't be written only risks a repeat after a restart.
    if (Status st = PersistNflogLocked(); !st.ok()) TW_LOG(Error, "notifier: {}", st.ToString());
  }
  FlushState& f = *j->flush;
  f.all_ok = f.all_ok && ok;
  if (--f.pending == 0 && f.all_ok) {
    auto g = groups_.find(f.group_map_key);
    if (g != groups_.end()) {
      for (auto [fp, upd] : f.resolved) {
        auto a = alerts_.find(fp);
        if (a == alerts_.end() || a->second.updated_at_ms == upd) g->second->alerts.erase(fp);
      }
    }
  }
}

void Notifier::DispatchLoop() {
  for (;;) {
    // A bug in one flush must not stop every later notification.
    try {
      Tick();
    } catch (const std::exception& e) {
      TW_LOG(Error, "notifier: dispatch: {}", e.what());
    }
    base::MutexLock l(&mu_);
    if (stop_) return;
    // At most a second of real time, so a stop or a new alert is seen soon.
    auto wait = std::clamp<std::chrono::milliseconds>(RealWait(NextDueLocked() - Now()), std::chrono::milliseconds(1),
                                                      std::chrono::milliseconds(1000));
    cv_.WaitFor(&mu_, wait);
    if (stop_) return;
  }
}

void Notifier::SenderLoop() {
  for (;;) {
    std::shared_ptr<Job> j;
    {
      base::MutexLock l(&mu_);
      while (!stop_ && queue_.empty()) jobs_cv_.Wait(&mu_);
      if (stop_) return;
      j = queue_.front();
      queue_.pop_front();
      running_++;
    }
    try {
      RunJob(j);
    } catch (const std::exception& e) {
      TW_LOG(Error, "notifier: deliver {} {}: {}", j->receiver, j->integration, e.what());
    }
    {
      base::MutexLock l(&mu_);
      running_--;
    }
    jobs_cv_.SignalAll();
  }
}

void Notifier::WaitIdle() {
  base::MutexLock l(&mu_);
  while (!stop_ && !(queue_.empty() && running_ == 0)) jobs_cv_.Wait(&mu_);
}

// ---- silences ----

Result<std::string> Notifier::PutSilence(Silence s) {
  if (s.matchers.empty()) return Status::InvalidArgument("silence invalid: at least one matcher required");
  bool all_match_empty = true;
  for (const auto& m : s.matchers) {
    if (!model::IsValidLabelName(m.name())) return Status::InvalidArgument("silence invalid: invalid label name \"" + m.name() + "\"");
    all_match_empty = all_match_empty && m.MatchesEmpty();
  }
  if (all_match_empty) return Status::InvalidArgument("silence invalid: at least one matcher must not match the empty string");
  if (s.ends_at_ms <= s.starts_at_ms) return Status::InvalidArgument("silence invalid: end time must not be before start time");
  if (s.created_by.empty()) return Status::InvalidArgument("silence invalid: creator information missing");
  if (s.comment.empty()) return Status::InvalidArgument("silence invalid: comment missing");
  base::MutexLock l(&mu_);
  int64_t now = Now();
  if (s.ends_at_ms <= now) return Status::InvalidArgument("silence invalid: end time can't be in the past");
  if (!s.id.empty()) {
    auto it = silences_.find(s.id);
    if (it == silences_.end()) return Status::NotFound("silence " + s.id + " not found");
    if (it->second.State(now) == "expired") {
      s.id.clear();  // an expired silence is never revived; a new one takes its place
    } else if (it->second.State(now) == "active" && s.starts_at_ms < now) {
      s.starts_at_ms = it->second.starts_at_ms;
    }
  }
  if (s.starts_at_ms < now) s.starts_at_ms = now;
  if (s.id.empty()) s.id = NewUuid();
  s.updated_at_ms = now;
  // Acknowledged only once on disk: if silences.json can't be written, the
  // silence (or the update) is taken back and never takes effect.
  auto old = silences_.find(s.id);
  std::optional<Silence> before;
  if (old != silences_.end()) before = old->second;
  std::string id = s.id;
  silences_[id] = std::move(s);
  if (Status st = PersistSilencesLocked(); !st.ok()) {
    if (before) silences_[id] = std::move(*before);
    else silences_.erase(id);
    return st.Annotate("silence not saved");
  }
  return id;
}

std::vector<Silence> Notifier::ListSilences() const {
  base::MutexLock l(&mu_);
  std::vector<Silence> out;
  for (const auto& [id, s] : silences_) out.push_back(s);
  return out;
}

Result<Silence> Notifier::GetSilence(const std::string& id) const {
  base::MutexLock l(&mu_);
  auto it = silences_.find(id);
  if (it == silences_.end()) return Status::NotFound("silence " + id + " not found");
  return it->second;
}

Status Notifier::ExpireSilence(const std::string& id) {
  base::MutexLock l(&mu_);
  auto it = silences_.find(id);
  if (it == silences_.end()) return Status::NotFound("silence " + id + " not found");
  int64_t now = Now();
  Silence& s = it->second;
  if (s.State(now) == "expired") return Status::InvalidArgument("silence " + id + " already expired");
  Silence before = s;
  if (s.starts_at_ms > now) s.starts_at_ms = now;
  s.ends_at_ms = now;
  s.updated_at_ms = now;
  if (Status st = PersistSilencesLocked(); !st.ok()) {
    s = std::move(before);
    return st.Annotate("silence not expired");
  }
  return Status::OK();
}

// ---- history and metrics ----

std::vector<NotificationRecord> Notifier::History(size_t limit) const {
  base::MutexLock l(&mu_);
  std::vector<NotificationRecord> out;
  for (const auto& r : history_) {
    if (out.size() >= limit) break;
    out.push_back(r);
  }
  return out;
}

void Notifier::CollectStateMetrics(common::metrics::Emitter* e) const {
  base::MutexLock l(&mu_);
  int64_t now = Now();
  size_t active = 0, suppressed = 0;
  for (const auto& [fp, a] : alerts_) {
    if (a.Resolved(now)) continue;
    if (SilencedLocked(a.alert.labels, now, nullptr) || InhibitedLocked(a, now, nullptr)) suppressed++;
    else active++;
  }
  e->Add("trainwatch_alertmanager_alerts", {"active"}, static_cast<double>(active));
  e->Add("trainwatch_alertmanager_alerts", {"suppressed"}, static_cast<double>(suppressed));
  std::map<std::string, size_t> sil = {{"active", 0}, {"expired", 0}, {"pending", 0}};
  for (const auto& [id, s] : silences_) sil[s.State(now)]++;
  for (const auto& [st, n] : sil) e->Add("trainwatch_alertmanager_silences", {st}, static_cast<double>(n));
}

// ---- persistence ----

Status Notifier::LoadState() {
  std::string text;
  std::string sp = opts_.dir + "/silences.json", np = opts_.dir + "/nflog.json";
  try {
    if (file::Exists(sp)) {
      RETURN_IF_ERROR(file::ReadFile(sp, &text));
      if (Status d = CheckJsonDepth(text); !d.ok()) return Status::Corruption(sp + ": " + d.message());
      Json j = Json::parse(text);
      for (const Json& e : j.at("silences")) {
        Silence s;
        s.id = e.at("id").get<std::string>();
        for (const Json& m : e.at("matchers")) {
          auto mm = MatcherFromJson(m);
          if (!mm.ok()) return Status::Corruption(sp + ": silence " + s.id + ": " + mm.error().message());
          s.matchers.push_back(std::move(*mm));
        }
        s.starts_at_ms = e.at("startsAt").get<int64_t>();
        s.ends_at_ms = e.at("endsAt").get<int64_t>();
        s.updated_at_ms = e.at("updatedAt").get<int64_t>();
        s.created_by = e.at("createdBy").get<std::string>();
        s.comment = e.at("comment").get<std::string>();
        silences_[s.id] = std::move(s);
      }
    }
    if (file::Exists(np)) {
      RETURN_IF_ERROR(file::ReadFile(np, &text));
      if (Status d = CheckJsonDepth(text); !d.ok()) return Status::Corruption(np + ": " + d.message());
      Json j = Json::parse(text);
      for (const Json& e : j.at("entries")) {
        NflogEntry n;
        n.time_ms = e.at("time").get<int64_t>();
        for (const Json& f : e.at("firing")) n.firing.insert(std::stoull(f.get<std::string>(), nullptr, 16));
        for (const Json& f : e.at("resolved")) n.resolved.insert(std::stoull(f.get<std::string>(), nullptr, 16));
        nflog_[e.at("key").get<std::string>()] = std::move(n);
      }
    }
  } catch (const std::exception& e) {
    return Status::Corruption("notifier state in " + opts_.dir + ": " + e.what());
  }
  TW_LOG(Info, "notifier: loaded {} silences and {} notification log entries", silences_.size(), nflog_.size());
  return Status::OK();
}

namespace {

// Values came from users and may hold invalid UTF-8: replaced by U+FFFD
// instead of dump() throwing.
std::string DumpState(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

Status Notifier::PersistSilencesLocked() {
  if (opts_.dir.empty()) return Status::OK();
  Json sil = Json::array();
  for (const auto& [id, s] : silences_) {
    Json m = Json::array();
    for (const auto& x : s.matchers) m.push_back(MatcherJson(x));
    sil.push_back(Json{{"id", id}, {"matchers", m}, {"startsAt", s.starts_at_ms}, {"endsAt", s.ends_at_ms},
                       {"updatedAt", s.updated_at_ms}, {"createdBy", s.created_by}, {"comment", s.comment}});
  }
  return file::WriteFileAtomic(opts_.dir + "/silences.json", DumpState(Json{{"silences", sil}}))
      .Annotate("persist silences");
}

Status Notifier::PersistNflogLocked() {
  if (opts_.dir.empty()) return Status::OK();
  Json nf = Json::array();
  for (const auto& [k, e] : nflog_) {
    Json f = Json::array(), r = Json::array();
    for (uint64_t x : e.firing) f.push_back(FingerprintString(x));
    for (uint64_t x : e.resolved) r.push_back(FingerprintString(x));
    nf.push_back(Json{{"key", k}, {"time", e.time_ms}, {"firing", f}, {"resolved", r}});
  }
  return file::WriteFileAtomic(opts_.dir + "/nflog.json", DumpState(Json{{"entries", nf}}))
      .Annotate("persist notification log");
}

}  // namespace trainwatch::notify
