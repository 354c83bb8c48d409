#include "runs/run.h"

#include <cmath>

namespace trainwatch::runs {
namespace {

Json Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

template <typename T>
Json Opt(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json Str(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }

// Follows a dotted path ("a.b.c") through nested objects.
Json Path(const Json& root, std::string_view path) {
  const Json* cur = &root;
  while (true) {
    size_t dot = path.find('.');
    std::string part(path.substr(0, dot));
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(part);
    if (it == cur->end()) {
      // A key that itself contains dots ("opt.lr" stored flat) matches whole.
      auto whole = cur->find(std::string(path));
      return whole == cur->end() ? Json(nullptr) : *whole;
    }
    if (dot == std::string_view::npos) return *it;
    cur = &*it;
    path.remove_prefix(dot + 1);
  }
}

}  // namespace

std::optional<double> Run::progress() const {
  if (!step || !total_steps || *total_steps <= 0) return std::nullopt;
  return static_cast<double>(*step) / static_cast<double>(*total_steps);
}

std::string DumpJson(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json NumberJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  return v;
}

Json RunActionJson(const RunAction& a) {
  return {{"id", a.id}, {"action", a.action}, {"alert", a.alert}, {"labels", a.labels},
          {"time", Seconds(a.time_ms)}, {"acks", a.acks}};
}

Json RunToJson(const Run& r, const std::vector<RunAlert>* alerts, const std::vector<RunAction>* actions) {
  Json j = Json::object();
  j["id"] = r.id;
  j["project"] = r.project;
  j["name"] = r.name;
  j["status"] = r.status;
  j["config"] = r.config;
  j["tags"] = r.tags;
  j["total_steps"] = Opt(r.total_steps);
  j["step"] = Opt(r.step);
  j["start_time"] = Seconds(r.start_time_ms);
  j["end_time"] = r.end_time_ms ? Seconds(*r.end_time_ms) : Json(nullptr);
  j["heartbeat_time"] = Seconds(r.heartbeat_time_ms);
  j["host"] = Str(r.host);
  j["pid"] = Opt(r.pid);
  j["command"] = Str(r.command);
  j["git_commit"] = Str(r.git_commit);
  j["world_size"] = Opt(r.world_size);
  j["summary"] = r.summary;
  auto p = r.progress();
  j["progress"] = p ? NumberJson(*p) : Json(nullptr);
  j["eta_seconds"] = r.eta_seconds ? NumberJson(*r.eta_seconds) : Json(nullptr);
  j["gpu"] = {{"hours", NumberJson(r.gpu.seconds / 3600)},
              {"energy_kwh", NumberJson(r.gpu.energy_joules / 3.6e6)},
              {"idle_hours", NumberJson(r.gpu.idle_seconds / 3600)},
              {"cost", NumberJson(r.gpu.cost)}};
  if (alerts != nullptr) {
    Json a = Json::array();
    for (const RunAlert& al : *alerts) {
      a.push_back({{"time", Seconds(al.time_ms)}, {"title", al.title}, {"text", al.text}, {"level", al.level}});
    }
    j["alerts"] = std::move(a);
  }
  if (actions != nullptr) {
    Json a = Json::array();
    for (const RunAction& x : *actions) a.push_back(RunActionJson(x));
    j["actions"] = std::move(a);
  }
  return j;
}

Json FieldValue(const Run& r, std::string_view f) {
  if (f.starts_with("config.")) return Path(r.config, f.substr(7));
  if (f.starts_with("summary.")) return Path(r.summary, f.substr(8));
  if (f.starts_with("metrics.")) return Path(r.summary, f.substr(8));
  if (f == "status") return r.status;
  if (f == "name") return r.name;
  if (f == "project") return r.project;
  if (f == "id") return r.id;
  if (f == "host") return Str(r.host);
  if (f == "command") return Str(r.command);
  if (f == "git_commit") return Str(r.git_commit);
  if (f == "tags") return r.tags;
  if (f == "step") return Opt(r.step);
  if (f == "total_steps") return Opt(r.total_steps);
  if (f == "world_size") return Opt(r.world_size);
  if (f == "start_time") return Seconds(r.start_time_ms);
  if (f == "end_time") return r.end_time_ms ? Seconds(*r.end_time_ms) : Json(nullptr);
  if (f == "heartbeat_time") return Seconds(r.heartbeat_time_ms);
  if (f == "progress") return Opt(r.progress());
  if (f == "eta_seconds") return Opt(r.eta_seconds);
  if (f == "gpu_hours") return NumberJson(r.gpu.seconds / 3600);
  if (f == "gpu_kwh") return NumberJson(r.gpu.energy_joules / 3.6e6);
  if (f == "gpu_idle_hours") return NumberJson(r.gpu.idle_seconds / 3600);
  if (f == "gpu_cost") return NumberJson(r.gpu.cost);
  return nullptr;
}

bool IsKnownField(std::string_view f) {
  static constexpr std::string_view kPlain[] = {"status", "name", "project", "id", "host", "command", "git_commit",
                                               "tags", "step", "total_steps", "world_size", "start_time",
                                               "end_time", "heartbeat_time", "progress", "eta_seconds",
                                               "gpu_hours", "gpu_kwh", "gpu_idle_hours", "gpu_cost"};
  for (std::string_view k : kPlain) if (f == k) return true;
  for (std::string_view p : {"config.", "summary.", "metrics."}) {
    if (f.starts_with(p) && f.size() > p.size()) return true;
  }
  return false;
}

bool IsValidRunId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace trainwatch::runs
