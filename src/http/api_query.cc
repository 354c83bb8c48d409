// /api/v1/query and /api/v1/query_range.
#include "base/clock.h"
#include "http/api.h"
#include "http/format.h"
#include "http/params.h"

namespace trainwatch::http {
namespace {

// Prometheus caps a range query at 11,000 points per series.
constexpr int64_t kMaxPoints = 11000;

Status InvalidParam(std::string_view name, const Status& s) {
  return Status::InvalidArgument("invalid parameter \"" + std::string(name) + "\": " + s.message());
}

Result<int64_t> TimeParam(const Request& req, std::string_view name, int64_t def) {
  std::string_view v = req.Param(name);
  if (v.empty()) return def;
  auto t = ParseTime(v);
  if (!t.ok()) return InvalidParam(name, t.error());
  return *t;
}

Result<int64_t> TimeoutParam(const Request& req) {
  std::string_view v = req.Param("timeout");
  if (v.empty()) return int64_t{0};
  auto d = ParseDuration(v);
  if (!d.ok()) return InvalidParam("timeout", d.error());
  return *d;
}

void AppendPoint(std::string* out, int64_t t, double v) {
  out->push_back('[');
  AppendPromTimestamp(out, t);
  out->append(",\"");
  AppendPromFloat(out, v);
  out->append("\"]");
}

std::string ResultJson(const promql::QueryResult& r) {
  std::string out = "{\"status\":\"success\",\"data\":{\"resultType\":";
  switch (r.type) {
    case promql::ValueType::kScalar:
      out += "\"scalar\",\"result\":";
      AppendPoint(&out, r.scalar.t, r.scalar.v);
      break;
    case promql::ValueType::kString:
      out += "\"string\",\"result\":[";
      AppendPromTimestamp(&out, r.scalar.t);
      out += ',';
      AppendJsonString(&out, r.str);
      out += ']';
      break;
    case promql::ValueType::kVector:
      out += "\"vector\",\"result\":[";
      for (size_t i = 0; i < r.vector.size(); i++) {
        if (i) out += ',';
        out += "{\"metric\":";
        AppendLabelsJson(&out, r.vector[i].labels);
        out += ",\"value\":";
        AppendPoint(&out, r.vector[i].t, r.vector[i].v);
        out += '}';
      }
      out += ']';
      break;
    case promql::ValueType::kMatrix:
      out += "\"matrix\",\"result\":[";
      for (size_t i = 0; i < r.matrix.size(); i++) {
        if (i) out += ',';
        out += "{\"metric\":";
        AppendLabelsJson(&out, r.matrix[i].labels);
        out += ",\"values\":[";
        const auto& pts = r.matrix[i].points;
        for (size_t j = 0; j < pts.size(); j++) {
          if (j) out += ',';
          AppendPoint(&out, pts[j].t, pts[j].v);
        }
        out += "]}";
      }
      out += ']';
      break;
  }
  out += '}';
  if (!r.warnings.empty()) {
    out += ",\"warnings\":[";
    for (size_t i = 0; i < r.warnings.size(); i++) {
      if (i) out += ',';
      AppendJsonString(&out, r.warnings[i]);
    }
    out += ']';
  }
  out += '}';
  return out;
}

Response QueryError(const Status& s) {
  // Parse and type errors name the parameter, as Prometheus does.
  if (s.IsInvalidArgument()) return ApiError(InvalidParam("query", s));
  return ApiError(s);
}

Response Json(std::string body) {
  Response r;
  r.body = std::move(body);
  return r;
}

}  // namespace

Response Api::Query(const Request& req) {
  if (deps_.engine == nullptr) return ApiError(Status::Unavailable("query engine not available"));
  auto t = TimeParam(req, "time", NowMillis());
  if (!t.ok()) return ApiError(t.error());
  auto timeout = TimeoutParam(req);
  if (!timeout.ok()) return ApiError(timeout.error());
  auto r = deps_.engine->Instant(*deps_.db, req.Param("query"), *t, *timeout);
  if (!r.ok()) return QueryError(r.error());
  return Json(ResultJson(*r));
}

Response Api::QueryRange(const Request& req) {
  if (deps_.engine == nullptr) return ApiError(Status::Unavailable("query engine not available"));
  for (std::string_view p : {"start", "end", "step"}) {
    if (req.Param(p).empty()) {
      return BadData("invalid parameter \"" + std::string(p) + "\": cannot parse \"\" to a valid " +
                     (p == "step" ? "duration" : "timestamp"));
    }
  }
  auto start = TimeParam(req, "start", 0);
  if (!start.ok()) return ApiError(start.error());
  auto end = TimeParam(req, "end", 0);
  if (!end.ok()) return ApiError(end.error());
  if (*end < *start) return BadData("invalid parameter \"end\": end timestamp must not be before start time");
  auto step = ParseDuration(req.Param("step"));
  if (!step.ok()) return ApiError(InvalidParam("step", step.error()));
  if (*step <= 0) {
    return BadData(
        "invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive "
        "integer");
  }
  if ((*end - *start) / *step > kMaxPoints) {
    return BadData(
        "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)");
  }
  auto timeout = TimeoutParam(req);
  if (!timeout.ok()) return ApiError(timeout.error());
  auto r = deps_.engine->Range(*deps_.db, req.Param("query"), *start, *end, *step, *timeout);
  if (!r.ok()) return QueryError(r.error());
  return Json(ResultJson(*r));
}

}  // namespace trainwatch::http
