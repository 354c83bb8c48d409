#include "rules/manager.h"

#include <glob.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/clock.h"
#include "base/log.h"
#include "base/mutex.h"
#include "rules/rule_file.h"

namespace trainwatch::rules {

Manager::Manager(ManagerOptions opts)
    : opts_(opts),
      alerts_sent_("trainwatch_rule_alerts_sent_total",
                   "Alerts handed to the senders (firing and resolved, resends included)."),
      state_metrics_({{"trainwatch_rule_groups", "Rule groups loaded.", common::metrics::Type::kGauge, {}},
                      {"trainwatch_rules", "Rules loaded, by health of their last evaluation.",
                       common::metrics::Type::kGauge, {"health"}},
                      {"trainwatch_alerts", "Active alerts by state.", common::metrics::Type::kGauge, {"state"}}},
                     [this](common::metrics::Emitter* e) { CollectStateMetrics(e); }) {
  if (opts_.metrics != nullptr) metrics_registration_ = opts_.metrics->MustRegister({&alerts_sent_, &state_metrics_});
  promql::Engine* engine = opts_.engine;
  storage::Queryable* q = opts_.queryable;
  query_ = [engine, q](std::string_view expr, int64_t t) -> Result<std::vector<promql::VectorSample>> {
    ASSIGN_OR_RETURN(promql::QueryResult r, engine->Instant(*q, expr, t));
    switch (r.type) {
      case promql::ValueType::kVector: return std::move(r.vector);
      case promql::ValueType::kScalar: return std::vector<promql::VectorSample>{{model::Labels(), t, r.scalar.v}};
      default: return Status::InvalidArgument("rule result is not a vector or scalar");
    }
  };
}

Manager::~Manager() {
  metrics_registration_.Reset();
  Stop();
}

Status Manager::Update(const ManagerConfig& cfg) {
  // Parse everything first: a bad file changes nothing.
  std::vector<std::string> errors;
  std::vector<std::pair<std::string, RuleFile>> files;
  for (const RuleSource& src : cfg.sources) {
    std::vector<std::string> errs;
    RuleFile f;
    if (src.embedded) {
      f = ParseRuleFile(src.content, &errs);
      for (std::string& e : errs) e = src.file + ": " + e;
    } else {
      f = LoadRuleFile(src.file, &errs);
    }
    if (!errs.empty()) {
      errors.insert(errors.end(), errs.begin(), errs.end());
      continue;
    }
    files.emplace_back(src.file, std::move(f));
  }
  if (!errors.empty()) {
    std::string msg = "loading rule files failed";
    for (const std::string& e : errors) msg += "\n" + e;
    return Status::InvalidArgument(msg);
  }

  auto gopts = std::make_shared<GroupOptions>();
  gopts->appendable = opts_.appendable;
  gopts->queryable = opts_.queryable;
  gopts->query = query_;
  gopts->external_labels = cfg.external_labels;
  gopts->external_url = cfg.external_url;
  gopts->outage_tolerance_ms = opts_.outage_tolerance_ms;
  gopts->for_grace_period_ms = opts_.for_grace_period_ms;
  gopts->resend_delay_ms = opts_.resend_delay_ms;
  gopts->notify = [this](std::vector<OutgoingAlert> a) { Notify(std::move(a)); };

  base::MutexLock l(&mu_);
  if (stopped_) return Status::Unavailable("rule manager stopped");
  {
    base::MutexLock sl(&senders_mu_);
    external_labels_ = cfg.external_labels;
  }
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Group>> old;
  for (auto& g : groups_) old[{g->file(), g->name()}] = g;
  std::vector<std::shared_ptr<Group>> fresh;
  for (auto& [file, rf] : files) {
    for (RuleGroup& rg : rf.groups) {
      int64_t interval = rg.interval_ms > 0 ? rg.interval_ms : cfg.evaluation_interval_ms;
      fresh.push_back(std::make_shared<Group>(file, std::move(rg), interval, gopts, !restored_));
    }
  }
  // Stop every old group before the new ones take over their state.
  for (auto& g : groups_) g->Stop();
  for (auto& g : fresh) {
    auto it = old.find({g->file(), g->name()});
    if (it == old.end()) continue;
    g->CopyState(*it->second);
    old.erase(it);
  }
  const int64_t now = NowMillis();
  for (auto& [key, g] : old) g->MarkStale(now);  // groups that went away
  groups_ = std::move(fresh);
  restored_ = true;
  for (auto& g : groups_) g->Start();
  size_t rules = 0;
  for (auto& g : groups_) rules += g->rules().size();
  TW_LOG(Info, "rules: {} groups, {} rules loaded from {} files", groups_.size(), rules, files.size());
  return Status::OK();
}

void Manager::AddSender(AlertSender sender) {
  base::MutexLock l(&senders_mu_);
  senders_.push_back(std::move(sender));
}

Status Manager::ApplyAlertingConfig(const YAML::Node& alerting) {
  ASSIGN_OR_RETURN(AlertingConfig cfg, ParseAlertingConfig(alerting));
  base::MutexLock l(&senders_mu_);
  if (alertmanagers_ == nullptr) {
    if (cfg.alertmanagers.empty()) return Status::OK();
    alertmanagers_ = std::make_shared<AlertmanagerNotifier>(AlertmanagerNotifier::kDefaultQueueCapacity, opts_.metrics);
    std::shared_ptr<AlertmanagerNotifier> n = alertmanagers_;
    senders_.push_back([n](std::vector<OutgoingAlert> a) { n->Send(std::move(a)); });
  }
  TW_LOG(Info, "rules: forwarding alerts to {} external Alertmanager(s)", cfg.alertmanagers.size());
  alertmanagers_->ApplyConfig(std::move(cfg));
  return Status::OK();
}

void Manager::Notify(std::vector<OutgoingAlert> alerts) {
  // Not under mu_: Update holds it while it joins the group threads that call us.
  base::MutexLock l(&senders_mu_);
  const model::Labels& ext = external_labels_;
  if (!ext.empty()) {
    // External labels apply where the alert has no label of that name.
    for (OutgoingAlert& a : alerts) {
      model::LabelsBuilder b(a.labels);
      bool changed = false;
      for (const model::Label& e : ext) {
        if (!a.labels.Has(e.name)) {
          b.Set(e.name, e.value);
          changed = true;
        }
      }
      if (changed) a.labels = b.Build();
    }
  }
  alerts_sent_.Get().Inc(alerts.size());
  for (size_t i = 0; i < senders_.size(); ++i) {
    if (i + 1 == senders_.size()) senders_[i](std::move(alerts));
    else senders_[i](alerts);
  }
}

void Manager::Stop() {
  std::vector<std::shared_ptr<Group>> gs;
  {
    base::MutexLock l(&mu_);
    stopped_ = true;
    gs = groups_;
  }
  for (auto& g : gs) g->Stop();
  std::shared_ptr<AlertmanagerNotifier> n;
  {
    base::MutexLock l(&senders_mu_);
    n = alertmanagers_;
  }
  if (n != nullptr) n->Stop();  // sends what is queued first
}

std::vector<std::shared_ptr<Group>> Manager::Groups() const {
  base::MutexLock l(&mu_);
  return groups_;
}

void Manager::CollectStateMetrics(common::metrics::Emitter* e) const {
  auto gs = Groups();
  std::map<std::string, uint64_t> health;
  std::map<std::string, uint64_t> states{{"pending", 0}, {"firing", 0}};
  for (auto& g : gs) {
    for (auto& r : g->rules()) {
      ++health[std::string(RuleHealthName(r->status().health))];
      if (!r->is_alert()) continue;
      for (const Alert& a : static_cast<const AlertingRule&>(*r).ActiveAlerts()) {
        ++states[std::string(AlertStateName(a.state))];
      }
    }
  }
  e->Add("trainwatch_rule_groups", {}, static_cast<double>(gs.size()));
  for (const char* h : {"ok", "err", "unknown"}) e->Add("trainwatch_rules", {h}, static_cast<double>(health[h]));
  for (const auto& [s, n] : states) e->Add("trainwatch_alerts", {s}, static_cast<double>(n));
}

Result<std::vector<std::string>> ExpandRuleFiles(const std::vector<std::string>& patterns,
                                                 const std::string& base_dir) {
  std::set<std::string> out;
  for (const std::string& p : patterns) {
    std::string full = (p.empty() || p[0] == '/' || base_dir.empty()) ? p : base_dir + "/" + p;
    glob_t g{};
    int rc = ::glob(full.c_str(), 0, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) out.insert(g.gl_pathv[i]);
    } else if (rc != GLOB_NOMATCH) {
      globfree(&g);
      return Status::InvalidArgument("rule_files: invalid pattern \"" + p + "\"");
    }
    globfree(&g);
  }
  return std::vector<std::string>(out.begin(), out.end());
}

model::Labels Manager::ExternalLabels() const {
  base::MutexLock l(&senders_mu_);
  return external_labels_;
}

}  // namespace trainwatch::rules
