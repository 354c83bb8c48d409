#include "app/run_alerts.h"

#include "base/ascii.h"
#include "base/log.h"

namespace trainwatch::app {

rules::OutgoingAlert RunAlertToOutgoing(const runs::Run& run, const runs::RunAlert& alert,
                                        const std::string& external_url) {
  rules::OutgoingAlert out;
  out.labels = model::Labels{
      {"alertname", alert.title}, {"project", run.project}, {"run", run.name}, {"severity", alert.level}};
  std::vector<model::Label> ann = {{"summary", alert.title}, {"run_id", run.id}};
  if (!alert.text.empty()) ann.push_back({"description", alert.text});
  out.annotations = model::Labels(std::move(ann));
  out.starts_at_ms = alert.time_ms;
  out.generator_url = external_url + "/runs/" + PercentEncode(run.id);
  return out;
}

int QueueRunActions(runs::RunStore& store, const std::vector<rules::OutgoingAlert>& alerts, int64_t now_ms) {
  int queued = 0;
  for (const rules::OutgoingAlert& a : alerts) {
    std::string_view names = a.annotations.Get("action");
    std::string_view project = a.labels.Get("project"), run = a.labels.Get("run");
    if (names.empty() || project.empty() || run.empty()) continue;
    if (a.ends_at_ms != 0 && a.ends_at_ms <= now_ms) continue;  // resolved
    runs::Json labels = runs::Json::object();
    for (const model::Label& l : a.labels) labels[l.name] = l.value;
    const std::string dedupe = std::to_string(a.labels.Hash()) + "@" + std::to_string(a.starts_at_ms);
    while (!names.empty()) {
      size_t comma = names.find(',');
      std::string_view name = names.substr(0, comma);
      names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
      while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
      while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
      if (name.empty()) continue;
      runs::RunAction act;
      act.action = std::string(name);
      act.alert = std::string(a.labels.Get("alertname"));
      act.labels = labels;
      auto r = store.QueueAction(project, run, std::move(act), dedupe + "/" + std::string(name));
      if (r.ok()) {
        queued++;
      } else if (r.error().code() != StatusCode::kNotFound) {
        TW_LOG(Warn, "action {} for run {} ({}): {}", name, run, project, r.error().ToString());
      }
    }
  }
  return queued;
}

}  // namespace trainwatch::app
