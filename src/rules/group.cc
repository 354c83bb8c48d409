#include "rules/group.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <map>

#include "base/clock.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/mutex.h"
#include "base/strconv.h"
#include "model/matcher.h"
#include "model/sample.h"

namespace trainwatch::rules {

std::string GeneratorUrl(std::string_view external_url, std::string_view expr) {
  std::string out(external_url);
  while (!out.empty() && out.back() == '/') out.pop_back();
  out += "/graph?g0.expr=";
  out += GoQueryEscape(expr);
  out += "&g0.tab=1";
  return out;
}

Group::Group(std::string file, RuleGroup spec, int64_t interval_ms, std::shared_ptr<const GroupOptions> opts,
             bool should_restore)
    : file_(std::move(file)), spec_(std::move(spec)), interval_ms_(interval_ms > 0 ? interval_ms : 60000),
      opts_(std::move(opts)), should_restore_(should_restore) {
  for (const RuleSpec& r : spec_.rules) {
    rules_.push_back(NewRule(r));
    // Without a restore pending, alerts write ALERTS from the first evaluation.
    if (!should_restore_ && r.is_alert()) static_cast<AlertingRule&>(*rules_.back()).set_restored(true);
  }
  series_in_previous_eval_.resize(rules_.size());
}

Group::~Group() { Stop(); }

int64_t Group::EvalTimestamp(int64_t now_ms) const {
  uint64_t h = HashString(file_, HashString(spec_.name));
  int64_t offset = static_cast<int64_t>(h % static_cast<uint64_t>(interval_ms_));
  int64_t adj = now_ms - offset;
  int64_t base = adj - ((adj % interval_ms_) + interval_ms_) % interval_ms_;
  return base + offset;
}

void Group::Eval(int64_t ts) {
  const int64_t wall_start = NowMillis();
  const int64_t t0 = MonoNanos();
  EvalContext ctx{&opts_->query, opts_->external_labels, opts_->external_url, spec_.limit};
  for (size_t i = 0; i < rules_.size(); ++i) {
    EvalRule& rule = *rules_[i];
    const int64_t rule_wall = NowMillis();
    const int64_t r0 = MonoNanos();
    auto vec = rule.Eval(ts, ctx);
    if (!vec.ok()) {
      TW_LOG(Warn, "rule group {} ({}), rule {}: evaluation failed: {}", spec_.name, file_, rule.name(),
             vec.error().message());
      rule.SetStatus(RuleHealth::kBad, vec.error().message(), rule_wall,
                     static_cast<double>(MonoNanos() - r0) / 1e9);
      continue;
    }
    if (rule.is_alert() && opts_->notify) {
      auto& ar = static_cast<AlertingRule&>(rule);
      auto alerts = ar.CollectToSend(ts, opts_->resend_delay_ms, interval_ms_,
                                     GeneratorUrl(opts_->external_url, rule.query_string()));
      if (!alerts.empty()) opts_->notify(std::move(alerts));
    }
    std::string append_err;
    std::unique_ptr<storage::Appender> app = opts_->appendable->NewAppender();
    std::set<model::Labels> returned;
    for (const promql::VectorSample& s : *vec) {
      auto r = s.h != nullptr ? app->AppendHistogram(0, s.labels, ts, *s.h) : app->Append(0, s.labels, ts, s.v);
      if (!r.ok() && append_err.empty()) append_err = r.error().message();
      returned.insert(s.labels);
    }
    // Series no longer returned get a stale marker.
    for (const model::Labels& l : series_in_previous_eval_[i]) {
      if (returned.contains(l)) continue;
      auto r = app->Append(0, l, ts, model::StaleNaN());
      if (!r.ok() && append_err.empty()) append_err = r.error().message();
    }
    series_in_previous_eval_[i] = std::move(returned);
    Status c = app->Commit();
    if (!c.ok()) append_err = c.message();
    if (!append_err.empty()) {
      TW_LOG(Warn, "rule group {} ({}), rule {}: append: {}", spec_.name, file_, rule.name(), append_err);
      rule.SetStatus(RuleHealth::kBad, "append: " + append_err, rule_wall,
                     static_cast<double>(MonoNanos() - r0) / 1e9);
      continue;
    }
    rule.SetStatus(RuleHealth::kGood, "", rule_wall, static_cast<double>(MonoNanos() - r0) / 1e9);
  }
  base::MutexLock l(&mu_);
  last_evaluation_ms_ = wall_start;
  evaluation_seconds_ = static_cast<double>(MonoNanos() - t0) / 1e9;
}

void Group::RestoreForState(int64_t now_ms) {
  auto q = opts_->queryable->NewQuerier(now_ms - opts_->outage_tolerance_ms, now_ms);
  if (!q.ok()) {
    TW_LOG(Error, "rule group {}: for-state restore: {}", spec_.name, q.error().message());
    return;
  }
  for (auto& r : rules_) {
    if (!r->is_alert()) continue;
    auto& ar = static_cast<AlertingRule&>(*r);
    const int64_t hold = ar.spec().for_ms;
    if (hold < opts_->for_grace_period_ms) {
      // Restoring would make it wait hold + grace; it waits hold instead.
      ar.set_restored(true);
      continue;
    }
    for (const auto& [key, a] : ar.alerts()) {
      if (a.state == AlertState::kInactive) continue;
      model::Matchers ms;
      auto nm = model::Matcher::Make(model::MatchType::kEqual, std::string(model::kMetricName), "ALERTS_FOR_STATE");
      if (nm.ok()) ms.push_back(std::move(*nm));
      for (const model::Label& l : a.labels) {
        auto m = model::Matcher::Make(model::MatchType::kEqual, l.name, l.value);
        if (m.ok()) ms.push_back(std::move(*m));
      }
      auto set = (*q)->Select(false, storage::SelectHints{now_ms - opts_->outage_tolerance_ms, now_ms}, ms);
      bool found = false;
      int64_t t = 0;
      double v = 0;
      while (set->Next()) {
        // Exactly these labels: ALERTS_FOR_STATE of an alert with more labels must not match.
        model::LabelsBuilder b(set->At().labels());
        b.Del(model::kMetricName);
        if (b.Build() != a.labels) continue;
        auto it = set->At().Iterator();
        while (it->Next()) {
          if (it->AtIsHistogram()) continue;  // ALERTS_FOR_STATE holds floats; a histogram is not one
          found = true;
          t = it->At().t;
          v = it->At().v;
        }
      }
      if (!found || model::IsStaleNaN(v) || std::isnan(v)) continue;  // it was not active
      const int64_t down_at = t / 1000 * 1000;
      int64_t restored_active_at = static_cast<int64_t>(v) * 1000;
      const int64_t remaining = hold - (down_at - restored_active_at);
      if (remaining <= 0) {
        // It was firing when we went down; the next Eval fires it again.
      } else if (remaining < opts_->for_grace_period_ms) {
        restored_active_at = now_ms + opts_->for_grace_period_ms - hold;
      } else {
        restored_active_at += now_ms - down_at;
      }
      ar.SetActiveAt(key, restored_active_at);
      TW_LOG(Info, "rule group {}: restored for-state of {} (active since {} ms)", spec_.name,
             a.labels.ToString(), restored_active_at);
    }
    ar.set_restored(true);
  }
}

void Group::CopyState(Group& old) {
  std::map<std::string, size_t> old_by_name;
  for (size_t i = 0; i < old.rules_.size(); ++i) old_by_name.emplace(old.rules_[i]->name(), i);
  for (size_t i = 0; i < rules_.size(); ++i) {
    auto it = old_by_name.find(rules_[i]->name());
    if (it == old_by_name.end()) continue;
    const size_t oi = it->second;
    old_by_name.erase(it);  // a second rule of the same name starts fresh
    EvalRule& o = *old.rules_[oi];
    if (o.query_string() == rules_[i]->query_string()) series_in_previous_eval_[i] = old.series_in_previous_eval_[oi];
    if (o.is_alert() && rules_[i]->is_alert()) {
      auto& na = static_cast<AlertingRule&>(*rules_[i]);
      auto& oa = static_cast<AlertingRule&>(o);
      na.set_alerts(oa.alerts());
      na.set_restored(oa.restored());
    }
  }
  should_restore_ = old.should_restore_;
  base::MutexLock l(&mu_);
  base::MutexLock ol(&old.mu_);
  last_evaluation_ms_ = old.last_evaluation_ms_;
  evaluation_seconds_ = old.evaluation_seconds_;
}

void Group::MarkStale(int64_t ts) {
  std::unique_ptr<storage::Appender> app = opts_->appendable->NewAppender();
  for (auto& series : series_in_previous_eval_) {
    for (const model::Labels& l : series) (void)app->Append(0, l, ts, model::StaleNaN());
    series.clear();
  }
  Status s = app->Commit();
  if (!s.ok()) TW_LOG(Warn, "rule group {}: stale markers: {}", spec_.name, s.message());
}

void Group::Start() {
  {
    base::MutexLock l(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void Group::Stop() {
  {
    base::MutexLock l(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

bool Group::SleepUntil(int64_t deadline_ms) {
  base::MutexLock l(&mu_);
  for (;;) {
    if (stop_) return false;
    int64_t now = NowMillis();
    if (now >= deadline_ms) return true;
    cv_.WaitFor(&mu_, RealWait(deadline_ms - now));
  }
}

int64_t Group::last_evaluation_ms() const {
  base::MutexLock l(&mu_);
  return last_evaluation_ms_;
}

double Group::evaluation_seconds() const {
  base::MutexLock l(&mu_);
  return evaluation_seconds_;
}

void Group::Run() {
  int64_t ts = EvalTimestamp(NowMillis()) + interval_ms_;
  if (!SleepUntil(ts)) return;
  Eval(ts);
  auto next = [&]() -> bool {
    if (!SleepUntil(ts + interval_ms_)) return false;
    // Iterations missed while an evaluation overran are skipped, as Prometheus.
    int64_t missed = (NowMillis() - ts) / interval_ms_ - 1;
    ts += (std::max<int64_t>(missed, 0) + 1) * interval_ms_;
    Eval(ts);
    return true;
  };
  if (should_restore_) {
    // Restore after a second evaluation: recording rules the alerts depend
    // on have run by then.
    if (!next()) return;
    RestoreForState(NowMillis());
    should_restore_ = false;
  }
  while (next()) {
  }
}

}  // namespace trainwatch::rules
