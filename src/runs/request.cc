#include "runs/request.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <unordered_map>

#include "base/json.h"
#include "base/utf8.h"
#include "runs/metric_name.h"

namespace trainwatch::runs {
namespace {

constexpr size_t kMaxBatchIdLength = 256;
constexpr size_t kMaxNameLength = 256;

Status FieldError(std::string_view field, std::string_view msg) {
  return Status::InvalidArgument("field \"" + std::string(field) + "\": " + std::string(msg));
}

Result<Json> ParseObject(std::string_view body) {
  // Before the parser: config and summary are copied and dumped recursively.
  if (Status s = CheckJsonDepth(body); !s.ok()) return s.Annotate("body");
  Json j;
  try {
    j = Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error& e) {
    return Status::InvalidArgument(std::string("body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return Status::InvalidArgument("body: expected a JSON object");
  return j;
}

// An integer (an integral double like 1.7e12 counts); nullopt otherwise.
std::optional<int64_t> AsInt(const Json& v) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// An optional string field; absent and null are nullopt.
Result<std::optional<std::string>> OptString(const Json& j, const char* field, size_t max_len = 4096) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return FieldError(field, "expected a string");
  if (it->get_ref<const std::string&>().size() > max_len) {
    return FieldError(field, "longer than " + std::to_string(max_len) + " bytes");
  }
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<int64_t>> OptInt(const Json& j, const char* field, int64_t min) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<int64_t>();
  auto v = AsInt(*it);
  if (!v || *v < min) return FieldError(field, "expected an integer >= " + std::to_string(min));
  return std::optional<int64_t>(*v);
}

// A unix time in seconds (a number, fractions allowed) as ms, for imported
// runs' own start and end times: from 1970 to the year 9999.
Result<std::optional<int64_t>> OptTime(const Json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number()) return FieldError(field, "expected unix seconds (a number)");
  double s = it->get<double>();
  if (!(s >= 0 && s < 253402300800.0)) return FieldError(field, "expected unix seconds between 1970 and 9999");
  return std::optional<int64_t>(static_cast<int64_t>(std::llround(s * 1000)));
}

Result<Json> OptSummary(const Json& j) {
  auto it = j.find("summary");
  if (it == j.end() || it->is_null()) return Json::object();
  if (!it->is_object()) return FieldError("summary", "expected an object");
  return *it;
}

// A logged value: a JSON number or "NaN" / "Inf" / "+Inf" / "-Inf".
std::optional<double> AsValue(const Json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "NaN") return std::nan("");
    if (s == "Inf" || s == "+Inf") return HUGE_VAL;
    if (s == "-Inf") return -HUGE_VAL;
  }
  return std::nullopt;
}

}  // namespace

size_t BatchRequest::num_values() const {
  size_t n = 0;
  for (const BatchPoint& p : points) n += p.values.size() + p.rich.size();
  return n;
}

Result<CreateRequest> ParseCreateRequest(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, ParseObject(body));
  CreateRequest r;
  auto id = j.find("id");
  if (id == j.end() || !id->is_string() || !IsValidRunId(id->get_ref<const std::string&>())) {
    return FieldError("id", "expected 1-64 characters of [A-Za-z0-9_.-]");
  }
  r.id = id->get<std::string>();
  if (r.id == "metrics" || r.id == "media" || r.id == "histograms") {
    return FieldError("id", "\"" + r.id + "\" is reserved (GET /api/v1/runs/" + r.id + ")");
  }
  ASSIGN_OR_RETURN(auto project, OptString(j, "project", kMaxNameLength));
  if (!project || project->empty()) return FieldError("project", "expected a non-empty string");
  r.project = *project;
  ASSIGN_OR_RETURN(r.name, OptString(j, "name", kMaxNameLength));
  if (r.name && r.name->empty()) r.name.reset();
  ASSIGN_OR_RETURN(r.host, OptString(j, "host"));
  ASSIGN_OR_RETURN(r.command, OptString(j, "command", 65536));
  ASSIGN_OR_RETURN(r.git_commit, OptString(j, "git_commit"));
  ASSIGN_OR_RETURN(r.total_steps, OptInt(j, "total_steps", 0));
  ASSIGN_OR_RETURN(r.pid, OptInt(j, "pid", 0));
  ASSIGN_OR_RETURN(r.world_size, OptInt(j, "world_size", 1));
  ASSIGN_OR_RETURN(r.rank, OptInt(j, "rank", 0));
  ASSIGN_OR_RETURN(r.start_time_ms, OptTime(j, "start_time"));
  if (auto c = j.find("config"); c != j.end() && !c->is_null()) {
    if (!c->is_object()) return FieldError("config", "expected an object");
    r.config = *c;
  }
  if (auto t = j.find("tags"); t != j.end() && !t->is_null()) {
    if (!t->is_array()) return FieldError("tags", "expected an array of strings");
    for (size_t i = 0; i < t->size(); i++) {
      if (!(*t)[i].is_string()) return FieldError("tags[" + std::to_string(i) + "]", "expected a string");
    }
    r.tags = *t;
  }
  return r;
}

Result<BatchRequest> ParseBatchRequest(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, ParseObject(body));
  BatchRequest r;
  auto bid = j.find("batch_id");
  if (bid == j.end() || !bid->is_string() || bid->get_ref<const std::string&>().empty() ||
      bid->get_ref<const std::string&>().size() > kMaxBatchIdLength) {
    return FieldError("batch_id", "expected a string of 1-" + std::to_string(kMaxBatchIdLength) + " characters");
  }
  r.batch_id = bid->get<std::string>();
  ASSIGN_OR_RETURN(r.rank, OptInt(j, "rank", 0));
  ASSIGN_OR_RETURN(auto host, OptString(j, "host", kMaxNameLength));
  if (host) r.host = *host;
  ASSIGN_OR_RETURN(r.summary, OptSummary(j));
  auto pts = j.find("points");
  if (pts == j.end() || pts->is_null()) return r;
  if (!pts->is_array()) return FieldError("points", "expected an array");
  std::unordered_map<std::string, Result<std::string>> names;  // key -> metric name or why not
  for (size_t i = 0; i < pts->size(); i++) {
    const Json& p = (*pts)[i];
    std::string where = "points[" + std::to_string(i) + "]";
    if (!p.is_object()) return FieldError(where, "expected an object");
    auto vals = p.find("values");
    if (vals != p.end() && !vals->is_null() && !vals->is_object()) return FieldError(where + ".values", "expected an object");
    auto step = p.find("step");
    if (step == p.end() || step->is_null()) {
      r.rejected.push_back({i, std::nullopt, "missing step"});
      continue;
    }
    auto s = AsInt(*step);
    if (!s || *s < 0) {
      r.rejected.push_back({i, std::nullopt, "step: expected an integer >= 0"});
      continue;
    }
    auto ts = p.find("ts");
    std::optional<int64_t> t = ts == p.end() ? std::nullopt : AsInt(*ts);
    if (!t || *t <= 0) {
      r.rejected.push_back({i, std::nullopt, ts == p.end() ? "missing ts" : "ts: expected unix milliseconds"});
      continue;
    }
    BatchPoint bp{i, *s, *t, {}, {}, {}};
    if (vals != p.end() && vals->is_object()) {
      for (const auto& [key, v] : vals->items()) {
        if (IsRichValue(v)) {
          auto rich = ParseRichValue(key, v);
          if (!rich.ok()) {
            r.rejected.push_back({i, key, rich.error().message()});
            continue;
          }
          bp.rich.push_back(std::move(*rich));
          continue;
        }
        auto value = AsValue(v);
        if (!value) {
          r.rejected.push_back({i, key, "value is not a number (a JSON number or \"NaN\", \"Inf\", \"-Inf\")"});
          continue;
        }
        auto it = names.find(key);
        if (it == names.end()) it = names.emplace(key, KeyToMetricName(key)).first;
        if (!it->second.ok()) {
          r.rejected.push_back({i, key, "key maps to no metric name: " + it->second.error().message()});
          continue;
        }
        bp.values.push_back({*it->second, *value});
        bp.keyed.emplace_back(key, *value);
      }
    }
    r.points.push_back(std::move(bp));
  }
  return r;
}

Json RejectionsJson(const std::vector<Rejection>& rej) {
  Json a = Json::array();
  for (const Rejection& r : rej) {
    a.push_back({{"point", r.point}, {"key", r.key ? Json(*r.key) : Json(nullptr)}, {"error", r.error}});
  }
  return a;
}

Result<FinishRequest> ParseFinishRequest(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, ParseObject(body));
  FinishRequest r;
  auto st = j.find("status");
  if (st == j.end() || !st->is_string() || (*st != kFinished && *st != kFailed)) {
    return FieldError("status", "expected \"finished\" or \"failed\"");
  }
  r.status = st->get<std::string>();
  ASSIGN_OR_RETURN(r.summary, OptSummary(j));
  ASSIGN_OR_RETURN(r.end_time_ms, OptTime(j, "end_time"));
  return r;
}

Result<HeartbeatRequest> ParseHeartbeatRequest(std::string_view body) {
  HeartbeatRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;
  ASSIGN_OR_RETURN(Json j, ParseObject(body));
  ASSIGN_OR_RETURN(auto rank, OptInt(j, "rank", 0));
  r.rank = rank.value_or(0);
  return r;
}

Result<int64_t> ParseActionId(std::string_view text) {
  int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || n <= 0) {
    return Status::InvalidArgument("action id: expected a positive integer, got \"" + std::string(text) + "\"");
  }
  return n;
}

Result<ActionAck> ParseActionAck(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, ParseObject(body));
  ActionAck a;
  ASSIGN_OR_RETURN(auto rank, OptInt(j, "rank", 0));
  a.rank = rank.value_or(0);
  ASSIGN_OR_RETURN(auto status, OptString(j, "status", 16));
  if (!status || (*status != "done" && *status != "failed" && *status != "unhandled")) {
    return FieldError("status", "expected \"done\", \"failed\" or \"unhandled\"");
  }
  a.status = *status;
  ASSIGN_OR_RETURN(auto result, OptString(j, "result", 65536));
  a.result = result.value_or("");
  return a;
}

Result<RunAlert> ParseAlertRequest(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, ParseObject(body));
  RunAlert a;
  ASSIGN_OR_RETURN(auto title, OptString(j, "title", 1024));
  if (!title || title->empty()) return FieldError("title", "expected a non-empty string");
  a.title = *title;
  ASSIGN_OR_RETURN(auto text, OptString(j, "text", 65536));
  a.text = text.value_or("");
  ASSIGN_OR_RETURN(auto level, OptString(j, "level", 16));
  a.level = level.value_or("info");
  if (a.level != "info" && a.level != "warning" && a.level != "error") {
    return FieldError("level", "expected \"info\", \"warning\" or \"error\"");
  }
  ASSIGN_OR_RETURN(auto alert_id, OptString(j, "alert_id", kMaxBatchIdLength));
  if (alert_id && alert_id->empty()) return FieldError("alert_id", "expected a non-empty string");
  a.alert_id = alert_id.value_or("");
  return a;
}

Result<ArtifactRequest> ParseArtifactRequest(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, ParseObject(body));
  ArtifactRequest r;
  ASSIGN_OR_RETURN(auto name, OptString(j, "name", kMaxNameLength));
  if (!name || name->empty() || name->find('/') != std::string::npos || !IsValidUtf8(*name)) {
    return FieldError("name", "expected 1-256 bytes of UTF-8 without \"/\"");
  }
  r.name = *name;
  ASSIGN_OR_RETURN(auto type, OptString(j, "type", kMaxNameLength));
  r.type = type && !type->empty() ? *type : "artifact";
  ASSIGN_OR_RETURN(auto sha, OptString(j, "sha256", 64));
  if (!sha || sha->size() != 64 ||
      !std::all_of(sha->begin(), sha->end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
    return FieldError("sha256", "expected 64 lower-case hex digits");
  }
  r.sha256 = *sha;
  auto size = j.find("size");
  std::optional<int64_t> n = size == j.end() ? std::nullopt : AsInt(*size);
  if (!n || *n < 0) return FieldError("size", "expected the content's size in bytes (an integer >= 0)");
  r.size = *n;
  ASSIGN_OR_RETURN(auto uri, OptString(j, "uri", 4096));
  if (uri) r.uri = *uri;
  auto meta = j.find("metadata");
  if (meta != j.end() && !meta->is_null()) {
    if (!meta->is_object()) return FieldError("metadata", "expected an object");
    r.metadata = *meta;
  }
  return r;
}

Result<ArtifactUse> ParseArtifactUse(std::string_view body) {
  ASSIGN_OR_RETURN(Json j, ParseObject(body));
  ArtifactUse u;
  ASSIGN_OR_RETURN(auto name, OptString(j, "name", kMaxNameLength));
  if (!name || name->empty()) return FieldError("name", "expected a non-empty string");
  u.name = *name;
  auto v = j.find("version");
  if (v != j.end() && !v->is_null() && !(v->is_string() && *v == "latest")) {
    std::optional<int64_t> n = AsInt(*v);
    if (!n && v->is_string()) {  // "v3"
      const std::string& s = v->get_ref<const std::string&>();
      if (s.size() > 1 && s[0] == 'v') {
        int64_t x = 0;
        auto [end, ec] = std::from_chars(s.data() + 1, s.data() + s.size(), x);
        if (ec == std::errc() && end == s.data() + s.size()) n = x;
      }
    }
    if (!n || *n < 0) return FieldError("version", "expected a version number, \"vN\" or \"latest\"");
    u.version = n;
  }
  ASSIGN_OR_RETURN(u.sha256, OptString(j, "sha256", 64));
  return u;
}

}  // namespace trainwatch::runs
