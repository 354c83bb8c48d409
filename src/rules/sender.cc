#include "rules/sender.h"

#include <httplib.h>

#include <ctime>

#include "base/clock.h"
#include "base/json.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/units.h"
#include "common/yaml.h"

namespace trainwatch::rules {
namespace {

std::string Rfc3339(int64_t ms) {
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char buf[64];
  size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

}  // namespace

std::string AlertmanagerTarget::AlertsPath() const {
  std::string p = path_prefix;
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty() && p[0] != '/') p = "/" + p;
  return p + "/api/v2/alerts";
}

Result<AlertingConfig> ParseAlertingConfig(const YAML::Node& alerting) {
  using common::yaml::Err;
  AlertingConfig cfg;
  if (!alerting || alerting.IsNull()) return cfg;
  RETURN_IF_ERROR(common::yaml::CheckKeys(alerting, "alerting", {"alertmanagers", "alert_relabel_configs"}));
  ASSIGN_OR_RETURN(cfg.relabel_configs,
                   common::ParseRelabelConfigs(alerting["alert_relabel_configs"], "alerting.alert_relabel_configs"));
  const YAML::Node ams = alerting["alertmanagers"];
  if (!ams || ams.IsNull()) return cfg;
  if (!ams.IsSequence()) return Err(ams, "alerting.alertmanagers", "expected a list");
  for (size_t i = 0; i < ams.size(); ++i) {
    const YAML::Node am = ams[i];
    const std::string where = "alerting.alertmanagers[" + std::to_string(i) + "]";
    if (!am.IsMap()) return Err(am, where, "expected a mapping");
    AlertmanagerTarget base;
    std::vector<std::string> targets;
    for (const auto& kv : am) {
      const std::string k = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      const std::string field = where + "." + k;
      if (k == "scheme") {
        ASSIGN_OR_RETURN(base.scheme, common::yaml::Str(v, field));
        if (base.scheme != "http" && base.scheme != "https") return Err(v, field, "unsupported \"" + base.scheme + "\"");
      } else if (k == "path_prefix") {
        ASSIGN_OR_RETURN(base.path_prefix, common::yaml::Str(v, field));
      } else if (k == "timeout") {
        ASSIGN_OR_RETURN(base.timeout_ms, common::yaml::Dur(v, field));
        if (base.timeout_ms <= 0) return Err(v, field, "must be positive");
      } else if (k == "api_version") {
        ASSIGN_OR_RETURN(std::string version, common::yaml::Str(v, field));
        if (version != "v2") return Err(v, field, "unsupported \"" + version + "\" (Alertmanager 0.25 speaks v2)");
      } else if (k == "static_configs") {
        if (!v.IsSequence()) return Err(v, field, "expected a list");
        for (size_t j = 0; j < v.size(); ++j) {
          const std::string tw = field + "[" + std::to_string(j) + "].targets";
          const YAML::Node t = v[j]["targets"];
          if (!t) continue;
          if (!t.IsSequence()) return Err(t, tw, "expected a list");
          ASSIGN_OR_RETURN(std::vector<std::string> ts, common::yaml::StrList(t, tw));
          for (size_t x = 0; x < ts.size(); x++) {
            if (ts[x].empty()) return Err(t[x], tw, "empty target");
            targets.push_back(std::move(ts[x]));
          }
        }
      } else if (common::HttpClientConfigKeys().contains(k)) {
        // Read below, as one HTTP client config.
      } else if (k == "relabel_configs" || k == "enable_http2" || k == "follow_redirects") {
        // Accepted for compatibility; targets are used as written.
      } else {
        return Err(kv.first, where, "unsupported field \"" + k + "\"");
      }
    }
    RETURN_IF_ERROR(common::ParseHttpClientConfig(am, where, &base.http));
    for (const std::string& t : targets) {
      AlertmanagerTarget a = base;
      a.host = t;
      cfg.alertmanagers.push_back(std::move(a));
    }
  }
  return cfg;
}

std::string AlertsToJson(const std::vector<OutgoingAlert>& alerts) {
  std::string out = "[";
  for (size_t i = 0; i < alerts.size(); ++i) {
    const OutgoingAlert& a = alerts[i];
    if (i) out += ',';
    out += "{\"labels\":";
    model::AppendLabelsJson(&out, a.labels);
    out += ",\"annotations\":";
    model::AppendLabelsJson(&out, a.annotations);
    if (a.starts_at_ms != 0) out += ",\"startsAt\":\"" + Rfc3339(a.starts_at_ms) + "\"";
    if (a.ends_at_ms != 0) out += ",\"endsAt\":\"" + Rfc3339(a.ends_at_ms) + "\"";
    out += ",\"generatorURL\":";
    AppendJsonString(&out, a.generator_url);
    out += '}';
  }
  out += ']';
  return out;
}

AlertmanagerNotifier::AlertmanagerNotifier(size_t queue_capacity, common::metrics::Registry* metrics)
    : capacity_(queue_capacity),
      sent_("trainwatch_alertmanager_alerts_sent_total", "Alerts sent to external Alertmanagers.", {"alertmanager"}),
      errors_("trainwatch_alertmanager_alerts_errors_total",
              "Alerts whose sending to an external Alertmanager failed.", {"alertmanager"}),
      dropped_("trainwatch_alertmanager_alerts_dropped_total", "Alerts dropped because the send queue was full."),
      queue_length_({{"trainwatch_alertmanager_queue_length", "Alerts waiting to be sent.",
                      common::metrics::Type::kGauge, {}}},
                    [this](common::metrics::Emitter* e) {
                      e->Add("trainwatch_alertmanager_queue_length", {}, static_cast<double>(queue_length()));
                    }) {
  if (metrics != nullptr) metrics_registration_ = metrics->MustRegister({&sent_, &errors_, &dropped_, &queue_length_});
  thread_ = std::thread([this] { Run(); });
}

AlertmanagerNotifier::~AlertmanagerNotifier() {
  metrics_registration_.Reset();
  Stop();
}

void AlertmanagerNotifier::ApplyConfig(AlertingConfig cfg) {
  base::MutexLock l(&mu_);
  cfg_ = std::move(cfg);
}

void AlertmanagerNotifier::Send(std::vector<OutgoingAlert> alerts) {
  {
    base::MutexLock l(&mu_);
    if (cfg_.alertmanagers.empty()) return;  // nothing configured: nothing queued
    for (OutgoingAlert& a : alerts) {
      if (!cfg_.relabel_configs.empty()) {
        common::LabelSet ls(a.labels);
        if (!common::Relabel(cfg_.relabel_configs, &ls) || ls.pairs().empty()) continue;
        a.labels = ls.ToLabels();
      }
      queue_.push_back(std::move(a));
    }
    while (queue_.size() > capacity_) {
      queue_.pop_front();
      dropped_.Get().Inc();
    }
  }
  cv_.SignalAll();
}

void AlertmanagerNotifier::Stop() {
  {
    base::MutexLock l(&mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

size_t AlertmanagerNotifier::queue_length() const {
  base::MutexLock l(&mu_);
  return queue_.size();
}

bool AlertmanagerNotifier::Post(const AlertmanagerTarget& t, const std::string& body, std::string* err) {
  auto c = common::NewHttpClient(t.scheme + "://" + t.host, t.http, t.timeout_ms);
  if (!c.ok()) {
    *err = c.error().message();
    return false;
  }
  std::vector<std::pair<std::string, std::string>> auth;
  if (Status s = common::ApplyHttpAuth(t.http, c->get(), &auth); !s.ok()) {
    *err = s.message();
    return false;
  }
  httplib::Headers headers = {{"User-Agent", "trainwatch"}};
  headers.insert(auth.begin(), auth.end());
  auto res = (*c)->Post(t.AlertsPath(), headers, body, "application/json");
  if (!res) {
    *err = httplib::to_string(res.error());
    return false;
  }
  if (res->status / 100 != 2) {
    *err = "bad response status " + std::to_string(res->status) + ": " + res->body.substr(0, 200);
    return false;
  }
  return true;
}

void AlertmanagerNotifier::Run() {
  // At shutdown what is queued is sent for at most kDrainMs; the rest is dropped.
  constexpr int64_t kDrainMs = 5000;
  int64_t drain_until = 0;
  for (;;) {
    std::vector<OutgoingAlert> batch;
    std::vector<AlertmanagerTarget> targets;
    {
      base::MutexLock l(&mu_);
      while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stopped with nothing left
      if (stop_) {
        if (drain_until == 0) drain_until = NowMillis() + kDrainMs;
        if (NowMillis() > drain_until) {
          dropped_.Get().Inc(queue_.size());
          queue_.clear();
          return;
        }
      }
      while (!queue_.empty() && batch.size() < kMaxBatch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      targets = cfg_.alertmanagers;
    }
    const std::string body = AlertsToJson(batch);
    for (const AlertmanagerTarget& t : targets) {
      std::string err;
      bool ok = Post(t, body, &err);
      if (!ok) TW_LOG(Warn, "send {} alerts to Alertmanager {}: {}", batch.size(), t.Url(), err);
      (ok ? sent_ : errors_).With({t.Url()}).Inc(batch.size());
    }
  }
}

}  // namespace trainwatch::rules
