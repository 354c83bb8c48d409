#include "app/query_cmd.h"

#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "app/api_client.h"
#include "http/params.h"

namespace trainwatch::app {
namespace {

using nlohmann::json;

// A range query without --step aims at about this many points per series.
constexpr int64_t kDefaultPoints = 250;

// "2026-12-02T13:05:00Z", with ".123" when the time has milliseconds.
std::string FormatTime(int64_t ms) {
  int64_t secs = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  int64_t frac = ms - secs * 1000;
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (frac != 0) {
    char f[8];
    std::snprintf(f, sizeof f, ".%03d", static_cast<int>(frac));
    out += f;
  }
  out += 'Z';
  return out;
}

// `name{a="b", c="d"}` as PromQL writes a series; `{}` for no labels.
std::string FormatSeries(const json& metric) {
  std::string name, inner;
  for (auto it = metric.begin(); it != metric.end(); ++it) {
    const std::string value = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
    if (it.key() == "__name__") {
      name = value;
      continue;
    }
    if (!inner.empty()) inner += ", ";
    inner += it.key();
    inner += "=\"";
    for (char c : value) {
      if (c == '"' || c == '\\') {
        inner += '\\';
        inner += c;
      } else if (c == '\n') {
        inner += "\\n";
      } else {
        inner += c;
      }
    }
    inner += '"';
  }
  if (name.empty() || !inner.empty()) return name + "{" + inner + "}";
  return name;
}

Result<int64_t> PointTime(const json& p) {
  if (!p.is_array() || p.size() != 2 || !p[0].is_number()) return Status::InvalidArgument("malformed sample");
  return static_cast<int64_t>(std::llround(p[0].get<double>() * 1000));
}

std::string PointValue(const json& p) { return p[1].is_string() ? p[1].get<std::string>() : p[1].dump(); }

// A native histogram point ([t, {"count", "sum", "buckets"}]) as Prometheus
// prints one: {count:5, sum:10, [-0.001,0.001]:1, (0.5,1]:2}.
std::string HistogramValue(const json& p) {
  const json& h = p[1];
  auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  std::string out = "{count:" + text(h.value("count", json("0"))) + ", sum:" + text(h.value("sum", json("0")));
  if (h.contains("buckets")) {
    for (const json& b : h["buckets"]) {
      int rule = b[0].get<int>();  // 0 (l,u]  1 [l,u)  2 (l,u)  3 [l,u]
      out += ", ";
      out += rule == 1 || rule == 3 ? '[' : '(';
      out += text(b[1]) + "," + text(b[2]);
      out += rule == 0 || rule == 3 ? ']' : ')';
      out += ":" + text(b[3]);
    }
  }
  return out + "}";
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Seconds(int64_t ms) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ms / 1000), static_cast<long long>(ms % 1000));
  return buf;
}

// Splits "http://host:port/prefix" into the client's base and the path prefix.
}  // namespace

Status ValidateQueryOptions(const QueryOptions& o) {
  if (o.expr.empty()) return Status::InvalidArgument("the query expression is empty");
  if (!o.time.empty() && !o.start.empty()) return Status::InvalidArgument("--time and --start exclude each other");
  if (o.start.empty() && (!o.end.empty() || !o.step.empty())) {
    return Status::InvalidArgument("--end and --step need --start (a range query)");
  }
  for (auto [flag, v] : {std::pair{"--time", &o.time}, std::pair{"--start", &o.start}, std::pair{"--end", &o.end}}) {
    if (v->empty()) continue;
    auto t = http::ParseTime(*v);
    if (!t.ok()) return t.error().Annotate(flag);
  }
  if (!o.step.empty()) {
    auto d = http::ParseDuration(o.step);
    if (!d.ok()) return d.error().Annotate("--step");
    if (*d <= 0) return Status::InvalidArgument("--step: must be positive");
  }
  if (!o.start.empty()) {
    int64_t start = *http::ParseTime(o.start);
    int64_t end = o.end.empty() ? NowMs() : *http::ParseTime(o.end);
    if (end < start) return Status::InvalidArgument("--end: before --start");
  }
  if (o.server.find("://") == std::string::npos) {
    return Status::InvalidArgument("--server: \"" + RedactUrl(o.server) + "\" is not a URL like http://127.0.0.1:9800");
  }
  return Status::OK();
}

namespace {

Result<std::string> FormatParsed(const json& j, const std::string& body, std::string* annotations);

}  // namespace

Result<std::string> FormatQueryResponse(const std::string& body, std::string* annotations) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  try {
    return FormatParsed(j, body, annotations);
  } catch (const json::exception& e) {  // a field of an unexpected JSON type
    return Status::InvalidArgument(std::string("malformed query response: ") + e.what());
  }
}

namespace {

Result<std::string> FormatParsed(const json& j, const std::string& body, std::string* annotations) {
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_object()) {
    return Status::InvalidArgument("response is not a Prometheus query result: " + body.substr(0, 200));
  }
  for (const char* key : {"warnings", "infos"}) {
    if (!j.contains(key) || !j[key].is_array()) continue;
    for (const auto& w : j[key]) *annotations += (w.is_string() ? w.get<std::string>() : w.dump()) + "\n";
  }
  const json& data = j["data"];
  std::string type = data.value("resultType", "");
  const json& result = data.contains("result") ? data["result"] : json();
  std::string out;
  if (type == "scalar" || type == "string") {
    if (!result.is_array() || result.size() != 2) return Status::InvalidArgument("malformed " + type + " result");
    return PointValue(result) + "\n";
  }
  if (!result.is_array()) return Status::InvalidArgument("response has no result list");
  if (type == "vector") {
    std::vector<std::pair<std::string, std::string>> rows;
    size_t width = std::string_view("SERIES").size();
    for (const auto& s : result) {
      if (!s.contains("metric") || !(s.contains("value") || s.contains("histogram"))) {
        return Status::InvalidArgument("malformed vector sample");
      }
      rows.emplace_back(FormatSeries(s["metric"]),
                        s.contains("histogram") ? HistogramValue(s["histogram"]) : PointValue(s["value"]));
      width = std::max(width, rows.back().first.size());
    }
    if (rows.empty()) return std::string("(no series)\n");
    auto row = [&](const std::string& a, const std::string& b) {
      out += a;
      out.append(width - a.size() + 2, ' ');
      out += b;
      out += '\n';
    };
    row("SERIES", "VALUE");
    for (const auto& [s, v] : rows) row(s, v);
    return out;
  }
  if (type == "matrix") {
    if (result.empty()) return std::string("(no series)\n");
    for (const auto& s : result) {
      if (!s.contains("metric") || !(s.contains("values") || s.contains("histograms"))) {
        return Status::InvalidArgument("malformed matrix series");
      }
      if (!out.empty()) out += '\n';
      out += FormatSeries(s["metric"]);
      out += '\n';
      // Floats and histograms, merged by time.
      std::vector<std::pair<int64_t, std::string>> points;
      for (const char* key : {"values", "histograms"}) {
        if (!s.contains(key)) continue;
        for (const auto& p : s[key]) {
          auto t = PointTime(p);
          if (!t.ok()) return t.error();
          points.emplace_back(*t, std::string_view(key) == "values" ? PointValue(p) : HistogramValue(p));
        }
      }
      std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [t, v] : points) out += "  " + FormatTime(t) + "  " + v + "\n";
    }
    return out;
  }
  return Status::InvalidArgument("unknown resultType \"" + type + "\"");
}

}  // namespace

int RunQuery(const QueryOptions& o) {
  // main() blocked these for `serve`; a query must stay interruptible.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &sigs, nullptr);
  Status st = ValidateQueryOptions(o);
  if (!st.ok()) {
    std::cerr << "trainwatch query: " << st.message() << "\n";
    return 1;
  }
  httplib::Params params{{"query", o.expr}};
  std::string path = "/api/v1/query";
  if (o.start.empty()) {
    if (!o.time.empty()) params.emplace("time", o.time);
  } else {
    int64_t start = *http::ParseTime(o.start);
    int64_t end = o.end.empty() ? NowMs() : *http::ParseTime(o.end);
    path = "/api/v1/query_range";
    params.emplace("start", o.start);
    params.emplace("end", o.end.empty() ? Seconds(end) : o.end);
    params.emplace("step", o.step.empty() ? Seconds(std::max<int64_t>(1000, (end - start) / kDefaultPoints)) : o.step);
  }
  auto api = NewApiClient(o.server);
  if (!api.ok()) {
    std::cerr << "trainwatch query: --server: " << api.error().message() << "\n";
    return 1;
  }
  httplib::Client& client = *api->http;
  const std::string& prefix = api->prefix;
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  client.set_connection_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
  client.set_read_timeout(std::chrono::duration_cast<std::chrono::seconds>(timeout).count());
  // A form POST, as Grafana sends it: no URL length limit on long queries.
  auto res = client.Post(prefix + path, params);
  if (!res) {
    std::cerr << "trainwatch query: " << api->display << ": " << httplib::to_string(res.error()) << "\n";
    return 1;
  }
  if (res->status != 200) {
    json j = json::parse(res->body, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_string()) {
      std::string type = "error";
      if (j.contains("errorType") && j["errorType"].is_string()) type = j["errorType"].get<std::string>();
      std::cerr << "trainwatch query: " << type << ": " << j["error"].get<std::string>() << "\n";
    } else {
      std::string body = res->body.substr(0, 500);
      while (!body.empty() && body.back() == '\n') body.pop_back();
      std::cerr << "trainwatch query: HTTP " << res->status << " from " << api->display << path << ": " << body
                << "\n";
    }
    return 1;
  }
  std::string annotations;
  auto text = FormatQueryResponse(res->body, &annotations);
  if (!text.ok()) {
    std::cerr << "trainwatch query: " << text.error().message() << "\n";
    return 1;
  }
  std::cout << *text;
  std::cout.flush();
  // Prometheus's annotations say what they are ("PromQL warning: ...",
  // "PromQL info: ..."): printed as they come.
  std::cerr << annotations;
  return 0;
}

}  // namespace trainwatch::app
