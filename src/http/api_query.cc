// /api/v1/query, /api/v1/query_range, /api/v1/query_exemplars, /api/v1/format_query.
#include <algorithm>

#include "base/clock.h"
#include "base/memory.h"
#include "http/api.h"
#include "http/format.h"
#include "http/params.h"
#include "promql/parser/parse.h"

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

// The query's timeout: the `timeout` parameter can shorten the engine's
// default but not extend it (Prometheus applies the lower of the two). A
// zero or negative value, like an expired deadline, times out at once.
Result<int64_t> TimeoutParam(const Request& req, int64_t engine_default_ms) {
  std::string_view v = req.Param("timeout");
  if (v.empty()) return engine_default_ms;
  auto d = ParseDuration(v);
  if (!d.ok()) return InvalidParam("timeout", d.error());
  if (*d <= 0) return int64_t{1};
  return std::min(*d, engine_default_ms);
}

bool HasVectorSelector(const promql::parser::Expr& e) {
  if (e.kind == promql::parser::NodeKind::kVectorSelector) return true;
  for (const auto& a : e.args) {
    if (a != nullptr && HasVectorSelector(*a)) return true;
  }
  return false;
}

void AppendPoint(std::string* out, int64_t t, double v) {
  out->push_back('[');
  AppendPromTimestamp(out, t);
  out->append(",\"");
  AppendPromFloat(out, v);
  out->append("\"]");
}

// A native histogram as Prometheus's API writes it: count, sum and every
// non-empty bucket as [boundary rule, lower, upper, count], the rule 0 for
// (lower, upper], 1 for [lower, upper), 2 for (lower, upper), 3 for [lower, upper].
void AppendHistogram(std::string* out, const model::FloatHistogram& h) {
  out->append("{\"count\":\"");
  AppendPromFloat(out, h.count);
  out->append("\",\"sum\":\"");
  AppendPromFloat(out, h.sum);
  out->append("\"");
  bool first = true;
  for (const model::Bucket& b : h.AllBuckets()) {
    if (b.count == 0) continue;
    out->append(first ? ",\"buckets\":[[" : ",[");
    first = false;
    int rule = b.lower_inclusive ? (b.upper_inclusive ? 3 : 1) : (b.upper_inclusive ? 0 : 2);
    out->push_back(static_cast<char>('0' + rule));
    out->append(",\"");
    AppendPromFloat(out, b.lower);
    out->append("\",\"");
    AppendPromFloat(out, b.upper);
    out->append("\",\"");
    AppendPromFloat(out, b.count);
    out->append("\"]");
  }
  if (!first) out->push_back(']');
  out->push_back('}');
}

void AppendHistogramPoint(std::string* out, int64_t t, const model::FloatHistogram& h) {
  out->push_back('[');
  AppendPromTimestamp(out, t);
  out->push_back(',');
  AppendHistogram(out, h);
  out->push_back(']');
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
        if (r.vector[i].h != nullptr) {
          out += ",\"histogram\":";
          AppendHistogramPoint(&out, r.vector[i].t, *r.vector[i].h);
        } else {
          out += ",\"value\":";
          AppendPoint(&out, r.vector[i].t, r.vector[i].v);
        }
        out += '}';
      }
      out += ']';
      break;
    case promql::ValueType::kMatrix: {
      // Room for it all at once: grown by doubling, a body of megabytes
      // went through blocks glibc mapped afresh, page fault by page fault,
      // at each request (~1,950 faults for 2.7 MB). About 32 bytes a point
      // ("[1699999999.999,\"42\"]," and a longer value), the labels' text.
      size_t want = out.size() + 64;
      for (const auto& s : r.matrix) {
        want += 32 * (s.points.size() + 1) + 64 * s.hpoints.size();
        for (const auto& l : s.labels) want += l.name.size() + l.value.size() + 6;
      }
      out.reserve(want);
      out += "\"matrix\",\"result\":[";
      for (size_t i = 0; i < r.matrix.size(); i++) {
        if (i) out += ',';
        out += "{\"metric\":";
        AppendLabelsJson(&out, r.matrix[i].labels);
        // "values" and "histograms", each only when it has points (as
        // Prometheus's API writes a series).
        const auto& pts = r.matrix[i].points;
        const auto& hpts = r.matrix[i].hpoints;
        if (!pts.empty() || hpts.empty()) {
          out += ",\"values\":[";
          for (size_t j = 0; j < pts.size(); j++) {
            if (j) out += ',';
            AppendPoint(&out, pts[j].t, pts[j].v);
          }
          out += ']';
        }
        if (!hpts.empty()) {
          out += ",\"histograms\":[";
          for (size_t j = 0; j < hpts.size(); j++) {
            if (j) out += ',';
            AppendHistogramPoint(&out, hpts[j].t, *hpts[j].h);
          }
          out += ']';
        }
        out += '}';
      }
      out += ']';
      break;
    }
  }
  out += '}';
  // Prometheus 3.x's "warnings" and "infos", each only when not empty.
  for (auto [key, list] : {std::pair{"warnings", &r.warnings}, std::pair{"infos", &r.infos}}) {
    if (list->empty()) continue;
    out += ",\"";
    out += key;
    out += "\":[";
    for (size_t i = 0; i < list->size(); i++) {
      if (i) out += ',';
      AppendJsonString(&out, (*list)[i]);
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

// A failed engine call for a query that parsed: the engine reports both
// query-level type errors and evaluation errors (many-to-many matching,
// duplicate output series) as InvalidArgument. Prometheus answers the first
// with 400 bad_data and the second with 422 execution, without the prefix.
Response EngineError(const Status& s) {
  if (s.IsInvalidArgument() && !s.message().starts_with("invalid expression type")) {
    Response r;
    r.status = 422;
    r.body = ErrorJson("execution", s.message());
    return r;
  }
  return QueryError(s);
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
  auto timeout = TimeoutParam(req, deps_.engine->options().timeout_ms);
  if (!timeout.ok()) return ApiError(timeout.error());
  auto parsed = promql::parser::ParseExpr(req.Param("query"));
  if (!parsed.ok()) return QueryError(parsed.error());
  auto r = deps_.engine->Instant(queryable(), req.Param("query"), *t, *timeout);
  memory::NoteQuery();
  if (!r.ok()) return EngineError(r.error());
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
  auto timeout = TimeoutParam(req, deps_.engine->options().timeout_ms);
  if (!timeout.ok()) return ApiError(timeout.error());
  auto parsed = promql::parser::ParseExpr(req.Param("query"));
  if (!parsed.ok()) return QueryError(parsed.error());
  auto r = deps_.engine->Range(queryable(), req.Param("query"), *start, *end, *step, *timeout);
  memory::NoteQuery();  // serve's memory trim waits (base/memory.h)
  if (!r.ok()) return EngineError(r.error());
  return Json(ResultJson(*r));
}

// trainwatch stores no exemplars: after validating the parameters as
// Prometheus does, the answer is an empty list (no data at all when the
// query selects nothing, as Prometheus).
Response Api::QueryExemplars(const Request& req) {
  auto start = TimeParam(req, "start", model::kMinTime);
  if (!start.ok()) return ApiError(start.error());
  auto end = TimeParam(req, "end", model::kMaxTime);
  if (!end.ok()) return ApiError(end.error());
  if (*end < *start) return BadData("end timestamp must not be before start timestamp");
  auto expr = promql::parser::ParseExpr(req.Param("query"));
  if (!expr.ok()) return ApiError(expr.error());
  if (!HasVectorSelector(**expr)) return Json("{\"status\":\"success\"}");
  return Success("[]");
}

// The query in canonical form (one line; Prometheus breaks long ones).
Response Api::FormatQuery(const Request& req) {
  auto expr = promql::parser::ParseExpr(req.Param("query"));
  if (!expr.ok()) return QueryError(expr.error());
  std::string d;
  AppendJsonString(&d, (*expr)->String());
  return Success(d);
}

}  // namespace trainwatch::http
