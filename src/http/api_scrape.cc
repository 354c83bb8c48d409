// Scrape status endpoints, in Prometheus 2.42's shapes: GET /api/v1/targets,
// GET /api/v1/targets/metadata, GET /api/v1/metadata, and POST|PUT /-/reload.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <ctime>

#include "base/log.h"
#include "common/url.h"
#include "http/api.h"
#include "http/format.h"
#include "promql/parser/parse.h"
#include "scrape/manager.h"

namespace trainwatch::http {
namespace {

void AppendLabelSet(std::string* out, const std::vector<model::Label>& pairs) {
  *out += '{';
  bool first = true;
  for (const model::Label& l : pairs) {
    if (!first) *out += ',';
    first = false;
    AppendJsonString(out, l.name);
    *out += ':';
    AppendJsonString(out, l.value);
  }
  *out += '}';
}

// Go's time.Time RFC3339Nano in UTC: fractional seconds without trailing zeros.
std::string Rfc3339Nano(int64_t unix_ns) {
  if (unix_ns == 0) return "0001-01-01T00:00:00Z";
  time_t secs = static_cast<time_t>(unix_ns / 1000000000);
  int64_t frac = unix_ns % 1000000000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string s = buf;
  if (frac > 0) {
    std::string f = fmt::format("{:09d}", frac);
    while (f.back() == '0') f.pop_back();
    s += "." + f;
  }
  return s + "Z";
}

// Prometheus shows the URL with a loopback host replaced by this host's name.
std::string GlobalUrl(const std::string& url) {
  auto u = common::Url::Parse(url);
  if (!u.ok()) return url;
  const std::string host = u->Hostname();
  bool loopback = host == "localhost" || host.starts_with("127.") || host == "::1";
  if (!loopback) return url;
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == 0) return url;
  common::Url g = *u;
  g.host = name + (u->Port().empty() ? "" : ":" + u->Port());
  return g.String();
}

std::string_view HealthName(scrape::Health h) {
  switch (h) {
    case scrape::Health::kUp: return "up";
    case scrape::Health::kDown: return "down";
    case scrape::Health::kUnknown: break;
  }
  return "unknown";
}

std::string_view MetadataType(const std::string& t) { return t == "untyped" ? "unknown" : std::string_view(t); }

void AppendMetadata(std::string* out, const scrape::MetricMetadata& m) {
  *out += "\"type\":";
  AppendJsonString(out, MetadataType(m.type));
  *out += ",\"help\":";
  AppendJsonString(out, m.help);
  *out += ",\"unit\":";
  AppendJsonString(out, m.unit);
}

// `limit` as Prometheus 2.42's metadata endpoints: an integer, negative = all.
Result<int64_t> MetadataLimit(const Request& req) {
  std::string_view v = req.Param("limit");
  if (v.empty()) return int64_t{-1};
  int64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size()) return Status::InvalidArgument("limit must be a number");
  return n;
}

Response ScrapeDisabled() { return ApiError(Status::Unavailable("scraping is not enabled")); }

}  // namespace

Response Api::Targets(const Request& req) {
  if (deps_.scrape == nullptr) return ScrapeDisabled();
  std::string state;
  for (char c : req.Param("state")) state += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  bool show_active = state.empty() || state == "any" || state == "active";
  bool show_dropped = state.empty() || state == "any" || state == "dropped";
  scrape::PoolsSnapshot snap = deps_.scrape->Snapshot();
  std::string d = "{\"activeTargets\":[";
  bool first = true;
  if (show_active) {
    for (const scrape::TargetInfo& t : snap.active) {
      if (!first) d += ',';
      first = false;
      d += "{\"discoveredLabels\":";
      AppendLabelSet(&d, t.discovered.pairs());
      d += ",\"labels\":";
      AppendLabelSet(&d, t.labels.pairs());
      d += ",\"scrapePool\":";
      AppendJsonString(&d, t.pool);
      d += ",\"scrapeUrl\":";
      AppendJsonString(&d, t.url);
      d += ",\"globalUrl\":";
      AppendJsonString(&d, GlobalUrl(t.url));
      d += ",\"lastError\":";
      AppendJsonString(&d, t.state.last_error);
      d += ",\"lastScrape\":";
      AppendJsonString(&d, Rfc3339Nano(t.state.last_scrape_unix_ns));
      d += fmt::format(",\"lastScrapeDuration\":{}", t.state.last_duration_s);
      d += ",\"health\":";
      AppendJsonString(&d, HealthName(t.state.health));
      d += ",\"scrapeInterval\":";
      AppendJsonString(&d, scrape::FormatDuration(t.interval_ms));
      d += ",\"scrapeTimeout\":";
      AppendJsonString(&d, scrape::FormatDuration(t.timeout_ms));
      d += '}';
    }
  }
  d += "],\"droppedTargets\":[";
  first = true;
  if (show_dropped) {
    for (const scrape::TargetInfo& t : snap.dropped) {
      if (!first) d += ',';
      first = false;
      d += "{\"discoveredLabels\":";
      AppendLabelSet(&d, t.discovered.pairs());
      d += '}';
    }
  }
  d += "]}";
  return Success(d);
}

Response Api::Metadata(const Request& req) {
  if (deps_.scrape == nullptr) return Success("{}");
  auto limit = MetadataLimit(req);
  if (!limit.ok()) return ApiError(limit.error());
  std::string_view metric = req.Param("metric");
  auto all = deps_.scrape->Metadata();
  std::string d = "{";
  int64_t n = 0;
  for (const auto& [name, ms] : all) {
    if (!metric.empty() && name != metric) continue;
    if (*limit >= 0 && n >= *limit) break;
    if (n++ > 0) d += ',';
    AppendJsonString(&d, name);
    d += ":[";
    for (size_t i = 0; i < ms.size(); i++) {
      if (i > 0) d += ',';
      d += '{';
      AppendMetadata(&d, ms[i]);
      d += '}';
    }
    d += ']';
  }
  d += '}';
  return Success(d);
}

Response Api::TargetsMetadata(const Request& req) {
  if (deps_.scrape == nullptr) return Success("[]");
  auto limit = MetadataLimit(req);
  if (!limit.ok()) return ApiError(limit.error());
  model::Matchers matchers;
  if (std::string_view mt = req.Param("match_target"); !mt.empty()) {
    auto m = promql::parser::ParseMetricSelector(mt);
    if (!m.ok()) return ApiError(m.error());
    matchers = std::move(*m);
  }
  std::string_view metric = req.Param("metric");
  std::string d = "[";
  int64_t n = 0;
  for (const auto& [labels, md] : deps_.scrape->TargetMetadata()) {
    bool match = true;
    for (const model::Matcher& m : matchers) match = match && m.Matches(labels.Get(m.name()));
    if (!match) continue;
    for (const auto& [name, m] : md) {
      if (!metric.empty() && name != metric) continue;
      if (*limit >= 0 && n >= *limit) break;
      if (n++ > 0) d += ',';
      d += "{\"target\":";
      AppendLabelSet(&d, labels.pairs());
      d += ",\"metric\":";
      AppendJsonString(&d, name);
      d += ',';
      AppendMetadata(&d, m);
      d += '}';
    }
  }
  d += ']';
  if (n == 0) return ApiError(Status::NotFound("specified metadata not found"));
  return Success(d);
}

Response Api::Reload(const Request&) {
  if (!deps_.reload) return Text(500, "failed to reload config: reloading is not available");
  Status s = deps_.reload();
  if (!s.ok()) {
    TW_LOG(Error, "reload: {}", s.ToString());
    return Text(500, "failed to reload config: " + s.message());
  }
  Response r;
  r.status = 200;
  r.content_type.clear();
  return r;
}

}  // namespace trainwatch::http
