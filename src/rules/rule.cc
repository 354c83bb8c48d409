#include "rules/rule.h"

#include <algorithm>
#include <set>

#include "base/mutex.h"
#include "promql/parser/parse.h"
#include "template/template.h"

namespace trainwatch::rules {

std::string_view AlertStateName(AlertState s) {
  switch (s) {
    case AlertState::kInactive: return "inactive";
    case AlertState::kPending: return "pending";
    case AlertState::kFiring: return "firing";
  }
  return "inactive";
}

std::string_view RuleHealthName(RuleHealth h) {
  switch (h) {
    case RuleHealth::kUnknown: return "unknown";
    case RuleHealth::kGood: return "ok";
    case RuleHealth::kBad: return "err";
  }
  return "unknown";
}

EvalRule::EvalRule(RuleSpec spec) : spec_(std::move(spec)) {
  auto e = promql::parser::ParseExpr(spec_.expr);
  query_string_ = e.ok() ? (*e)->String() : spec_.expr;
}

void EvalRule::SetStatus(RuleHealth h, std::string err, int64_t last_eval_ms, double seconds) {
  base::MutexLock l(&mu_);
  status_.health = h;
  status_.last_error = std::move(err);
  status_.last_evaluation_ms = last_eval_ms;
  status_.evaluation_seconds = seconds;
}

RuleStatus EvalRule::status() const {
  base::MutexLock l(&mu_);
  return status_;
}

Result<std::vector<promql::VectorSample>> RecordingRule::Eval(int64_t ts, const EvalContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<promql::VectorSample> vec, (*ctx.query)(spec_.expr, ts));
  std::set<model::Labels> seen;
  for (promql::VectorSample& s : vec) {
    model::LabelsBuilder b(s.labels);
    b.Set(model::kMetricName, spec_.record);
    for (const auto& [k, v] : spec_.labels) b.Set(k, v);
    s.labels = b.Build();
    s.t = ts;
    if (!seen.insert(s.labels).second) {
      return Status::InvalidArgument("vector contains metrics with the same labelset after applying rule labels");
    }
  }
  if (ctx.limit > 0 && static_cast<int>(vec.size()) > ctx.limit) {
    return Status::InvalidArgument("exceeded limit of " + std::to_string(ctx.limit) + " with " +
                                   std::to_string(vec.size()) + " series");
  }
  return vec;
}

namespace {

tmpl::StrMap ToStrMap(const model::Labels& l) {
  tmpl::StrMap m;
  for (const model::Label& p : l) m[p.name] = p.value;
  return m;
}

}  // namespace

promql::VectorSample AlertSample(const Alert& a, int64_t ts) {
  model::LabelsBuilder b(a.labels);
  b.Set(model::kMetricName, "ALERTS");
  b.Set("alertstate", AlertStateName(a.state));
  return {b.Build(), ts, 1};
}

promql::VectorSample ForStateSample(const Alert& a, int64_t ts) {
  model::LabelsBuilder b(a.labels);
  b.Set(model::kMetricName, "ALERTS_FOR_STATE");
  return {b.Build(), ts, static_cast<double>(a.active_at / 1000)};
}

Result<std::vector<promql::VectorSample>> AlertingRule::Eval(int64_t ts, const EvalContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<promql::VectorSample> res, (*ctx.query)(spec_.expr, ts));

  tmpl::TemplateOptions topts;
  topts.external_url = ctx.external_url;
  const QueryFunc* query = ctx.query;
  topts.query = [query, ts](std::string_view expr) -> Result<std::vector<tmpl::Sample>> {
    ASSIGN_OR_RETURN(std::vector<promql::VectorSample> v, (*query)(expr, ts));
    std::vector<tmpl::Sample> out;
    out.reserve(v.size());
    for (const promql::VectorSample& s : v) out.push_back({ToStrMap(s.labels), s.v});
    return out;
  };
  const tmpl::StrMap ext = ToStrMap(ctx.external_labels);

  // Alerts of this evaluation, keyed by their final labels.
  std::map<model::Labels, Alert> current;
  for (const promql::VectorSample& s : res) {
    tmpl::AlertData data{ToStrMap(s.labels), ext, ctx.external_url, s.v};
    model::LabelsBuilder b(s.labels);
    b.Del(model::kMetricName);
    for (const auto& [k, v] : spec_.labels) b.Set(k, tmpl::ExpandAlertField(spec_.alert, v, data, topts));
    b.Set("alertname", spec_.alert);
    std::vector<model::Label> ann;
    for (const auto& [k, v] : spec_.annotations) ann.push_back({k, tmpl::ExpandAlertField(spec_.alert, v, data, topts)});
    Alert a;
    a.labels = b.Build();
    a.annotations = model::Labels(std::move(ann));
    a.value = s.v;
    a.active_at = ts;
    a.state = AlertState::kPending;
    model::Labels key = a.labels;
    if (!current.emplace(std::move(key), std::move(a)).second) {
      return Status::InvalidArgument("vector contains metrics with the same labelset after applying alert labels");
    }
  }

  base::MutexLock l(&mu_);
  for (auto& [key, a] : current) {
    auto it = active_.find(key);
    if (it != active_.end() && it->second.state != AlertState::kInactive) {
      it->second.value = a.value;
      it->second.annotations = a.annotations;
      continue;
    }
    active_[key] = std::move(a);
  }

  std::vector<promql::VectorSample> vec;
  int num_active = 0;
  for (auto it = active_.begin(); it != active_.end();) {
    Alert& a = it->second;
    if (!current.contains(it->first)) {
      bool keep_firing = false;
      if (a.state == AlertState::kFiring && spec_.keep_firing_for_ms > 0) {
        if (a.keep_firing_since == 0) a.keep_firing_since = ts;
        if (ts - a.keep_firing_since < spec_.keep_firing_for_ms) keep_firing = true;
      }
      // A resolved alert is kept for a while so it is sent as resolved.
      if (a.state == AlertState::kPending ||
          (a.resolved_at != 0 && ts - a.resolved_at > kResolvedRetentionMs)) {
        it = active_.erase(it);
        continue;
      }
      if (a.state != AlertState::kInactive && !keep_firing) {
        a.state = AlertState::kInactive;
        a.resolved_at = ts;
      }
      if (!keep_firing) {
        ++it;
        continue;
      }
    } else {
      a.keep_firing_since = 0;
    }
    ++num_active;
    if (a.state == AlertState::kPending && ts - a.active_at >= spec_.for_ms) {
      a.state = AlertState::kFiring;
      a.fired_at = ts;
    }
    if (restored_) {
      vec.push_back(AlertSample(a, ts));
      vec.push_back(ForStateSample(a, ts));
    }
    ++it;
  }
  if (ctx.limit > 0 && num_active > ctx.limit) {
    active_.clear();
    return Status::InvalidArgument("exceeded limit of " + std::to_string(ctx.limit) + " with " +
                                   std::to_string(num_active) + " alerts");
  }
  return vec;
}

std::vector<OutgoingAlert> AlertingRule::CollectToSend(int64_t ts, int64_t resend_delay_ms, int64_t interval_ms,
                                                       const std::string& generator_url) {
  std::vector<OutgoingAlert> out;
  base::MutexLock l(&mu_);
  for (auto& [key, a] : active_) {
    if (a.state == AlertState::kPending) continue;
    // Resolved since the last send, or the resend delay has passed.
    bool due = a.last_sent_at == 0 || a.resolved_at > a.last_sent_at || a.last_sent_at + resend_delay_ms < ts;
    if (!due) continue;
    a.last_sent_at = ts;
    a.valid_until = ts + 4 * std::max(resend_delay_ms, interval_ms);
    OutgoingAlert o;
    o.labels = a.labels;
    o.annotations = a.annotations;
    o.starts_at_ms = a.fired_at;
    o.ends_at_ms = a.resolved_at != 0 ? a.resolved_at : a.valid_until;
    o.generator_url = generator_url;
    out.push_back(std::move(o));
  }
  return out;
}

bool AlertingRule::restored() const {
  base::MutexLock l(&mu_);
  return restored_;
}

void AlertingRule::set_restored(bool r) {
  base::MutexLock l(&mu_);
  restored_ = r;
}

std::map<model::Labels, Alert> AlertingRule::alerts() const {
  base::MutexLock l(&mu_);
  return active_;
}

void AlertingRule::set_alerts(std::map<model::Labels, Alert> a) {
  base::MutexLock l(&mu_);
  active_ = std::move(a);
}

void AlertingRule::SetActiveAt(const model::Labels& key, int64_t active_at_ms) {
  base::MutexLock l(&mu_);
  auto it = active_.find(key);
  if (it != active_.end()) it->second.active_at = active_at_ms;
}

std::vector<Alert> AlertingRule::ActiveAlerts() const {
  base::MutexLock l(&mu_);
  std::vector<Alert> out;
  for (const auto& [key, a] : active_) {
    if (a.state != AlertState::kInactive) out.push_back(a);
  }
  return out;
}

AlertState AlertingRule::State() const {
  base::MutexLock l(&mu_);
  AlertState s = AlertState::kInactive;
  for (const auto& [key, a] : active_) s = std::max(s, a.state);
  return s;
}

std::unique_ptr<EvalRule> NewRule(RuleSpec spec) {
  if (spec.is_alert()) return std::make_unique<AlertingRule>(std::move(spec));
  return std::make_unique<RecordingRule>(std::move(spec));
}

}  // namespace trainwatch::rules
