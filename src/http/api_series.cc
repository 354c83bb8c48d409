// /api/v1/labels, /api/v1/label/<name>/values, /api/v1/series, /api/v1/export.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <set>

#include "base/clock.h"
#include "base/log.h"
#include "base/proto_writer.h"
#include "http/api.h"
#include "http/format.h"
#include "http/params.h"
#include "promql/parser/parse.h"
#include "rules/manager.h"

namespace trainwatch::http {
namespace {

// Export writes a chunk once it holds this many bytes.
constexpr size_t kExportChunkBytes = 256 << 10;

struct Range {
  int64_t start = model::kMinTime;
  int64_t end = model::kMaxTime;
};

Result<Range> RangeParams(const Request& req) {
  Range r;
  for (auto [name, dst] : {std::pair{"start", &r.start}, std::pair{"end", &r.end}}) {
    std::string_view v = req.Param(name);
    if (v.empty()) continue;
    auto t = ParseTime(v);
    if (!t.ok()) return Status::InvalidArgument("invalid parameter \"" + std::string(name) + "\": " + t.error().message());
    *dst = *t;
  }
  if (r.end < r.start) return Status::InvalidArgument("invalid parameter \"end\": end timestamp must not be before start time");
  return r;
}

Result<std::vector<model::Matchers>> MatchSets(const Request& req, bool also_plain_match) {
  std::vector<model::Matchers> sets;
  std::vector<std::string_view> values = req.Params("match[]");
  if (also_plain_match) {
    for (std::string_view v : req.Params("match")) values.push_back(v);
  }
  for (std::string_view v : values) {
    // The PromQL selector grammar, so errors read as Prometheus's
    // ("1:5: parse error: ...", no parameter prefix).
    auto m = promql::parser::ParseMetricSelector(v);
    if (!m.ok()) return m.error();
    sets.push_back(std::move(*m));
  }
  return sets;
}

// `limit` (Prometheus 2.49+): at most that many items; 0 or absent: all.
Result<size_t> LimitParam(const Request& req) {
  std::string_view v = req.Param("limit");
  if (v.empty()) return size_t{0};
  int64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size()) {
    return Status::InvalidArgument("invalid parameter \"limit\": cannot parse \"" + std::string(v) +
                                   "\" to a valid limit");
  }
  if (n < 0) return Status::InvalidArgument("invalid parameter \"limit\": limit must be non-negative");
  return static_cast<size_t>(n);
}

// {"status":"success","data":<data>} plus the truncation warning when cut.
Response Limited(std::string data, bool truncated) {
  Response r = Success(data);
  if (truncated) {
    r.body.pop_back();
    r.body += ",\"warnings\":[\"results truncated due to limit\"]}";
  }
  return r;
}

Response StringList(const std::vector<std::string>& items, size_t limit) {
  size_t n = limit > 0 ? std::min(limit, items.size()) : items.size();
  std::string d = "[";
  for (size_t i = 0; i < n; i++) {
    if (i) d += ',';
    AppendJsonString(&d, items[i]);
  }
  d += ']';
  return Limited(std::move(d), n < items.size());
}

// Streams VictoriaMetrics JSON lines, one per series with samples in range.
class ExportStream {
 public:
  ExportStream(std::unique_ptr<storage::Querier> q, std::vector<model::Matchers> sets, Range range)
      : querier_(std::move(q)), sets_(std::move(sets)), range_(range) {}

  Response::Chunk Next(std::string* chunk) {
    while (chunk->size() < kExportChunkBytes) {
      if (cur_ == nullptr) {
        if (next_set_ == sets_.size()) return Response::Chunk::kDone;
        storage::SelectHints hints{range_.start, range_.end};
        cur_ = querier_->Select(true, hints, sets_[next_set_++]);
      }
      if (!cur_->Next()) {
        Status s = cur_->Err();
        if (!s.ok()) return Fail(s);
        cur_.reset();
        continue;
      }
      const storage::Series& series = cur_->At();
      // Several match[] may select the same series; write it once.
      if (sets_.size() > 1 && !seen_.insert(series.labels()).second) continue;
      if (!AppendSeries(series, chunk)) return Response::Chunk::kError;
    }
    return Response::Chunk::kMore;
  }

 private:
  Response::Chunk Fail(const Status& s) {
    TW_LOG(Error, "export: {}", s.ToString());
    return Response::Chunk::kError;
  }

  bool AppendSeries(const storage::Series& series, std::string* out) {
    values_.clear();
    times_.clear();
    auto it = series.Iterator();
    for (bool ok = it->Seek(range_.start); ok; ok = it->Next()) {
      model::Sample s = it->At();
      if (s.t > range_.end) break;
      // The export format (VictoriaMetrics JSON lines) has no histograms:
      // native-histogram samples are skipped, not exported as floats.
      if (it->AtIsHistogram()) continue;
      AppendExportValue(&values_, s.v);
      values_ += ',';
      times_ += std::to_string(s.t);
      times_ += ',';
    }
    Status st = it->Err();
    if (!st.ok()) {
      Fail(st);
      return false;
    }
    if (times_.empty()) return true;  // no samples in range: no line, as VictoriaMetrics
    values_.pop_back();
    times_.pop_back();
    *out += "{\"metric\":";
    AppendLabelsJson(out, series.labels());
    *out += ",\"values\":[";
    *out += values_;
    *out += "],\"timestamps\":[";
    *out += times_;
    *out += "]}\n";
    return true;
  }

  std::unique_ptr<storage::Querier> querier_;  // outlives cur_
  std::vector<model::Matchers> sets_;
  Range range_;
  size_t next_set_ = 0;
  std::unique_ptr<storage::SeriesSet> cur_;
  std::set<model::Labels> seen_;
  std::string values_, times_;  // reused per series
};

}  // namespace

Response Api::Labels(const Request& req) {
  auto range = RangeParams(req);
  if (!range.ok()) return ApiError(range.error());
  auto sets = MatchSets(req, false);
  if (!sets.ok()) return ApiError(sets.error());
  auto limit = LimitParam(req);
  if (!limit.ok()) return ApiError(limit.error());
  auto q = deps_.db->NewQuerier(range->start, range->end);
  if (!q.ok()) return ApiError(q.error());
  if (sets->empty()) sets->emplace_back();
  std::set<std::string> names;
  for (const model::Matchers& m : *sets) {
    auto r = (*q)->LabelNames(m);
    if (!r.ok()) return ApiError(r.error());
    names.insert(r->begin(), r->end());
  }
  return StringList(std::vector<std::string>(names.begin(), names.end()), *limit);
}

Response Api::LabelValues(const Request& req, std::string_view name) {
  if (!model::IsValidLabelName(name)) return BadData("invalid label name: \"" + std::string(name) + "\"");
  auto range = RangeParams(req);
  if (!range.ok()) return ApiError(range.error());
  auto sets = MatchSets(req, false);
  if (!sets.ok()) return ApiError(sets.error());
  auto limit = LimitParam(req);
  if (!limit.ok()) return ApiError(limit.error());
  auto q = deps_.db->NewQuerier(range->start, range->end);
  if (!q.ok()) return ApiError(q.error());
  if (sets->empty()) sets->emplace_back();
  std::set<std::string> values;
  for (const model::Matchers& m : *sets) {
    auto r = (*q)->LabelValues(name, m);
    if (!r.ok()) return ApiError(r.error());
    values.insert(r->begin(), r->end());
  }
  return StringList(std::vector<std::string>(values.begin(), values.end()), *limit);
}

Response Api::Series(const Request& req) {
  auto sets = MatchSets(req, false);
  if (!sets.ok()) return ApiError(sets.error());
  if (sets->empty()) return BadData("no match[] parameter provided");
  auto range = RangeParams(req);
  if (!range.ok()) return ApiError(range.error());
  auto limit = LimitParam(req);
  if (!limit.ok()) return ApiError(limit.error());
  auto q = queryable().NewQuerier(range->start, range->end);
  if (!q.ok()) return ApiError(q.error());
  std::set<model::Labels> all;
  for (const model::Matchers& m : *sets) {
    auto ss = (*q)->Select(true, storage::SelectHints{range->start, range->end}, m);
    while (ss->Next()) all.insert(ss->At().labels());
    if (!ss->Err().ok()) return ApiError(ss->Err());
  }
  std::string d = "[";
  size_t n = 0;
  for (const model::Labels& l : all) {
    if (*limit > 0 && n == *limit) break;
    if (n++ > 0) d += ',';
    AppendLabelsJson(&d, l);
  }
  d += ']';
  return Limited(std::move(d), n < all.size());
}

Response Api::Export(const Request& req) {
  auto sets = MatchSets(req, true);
  if (!sets.ok()) return ApiError(sets.error());
  if (sets->empty()) return BadData("missing \"match[]\" query arg");
  auto range = RangeParams(req);
  if (!range.ok()) return ApiError(range.error());
  auto q = deps_.db->NewQuerier(range->start, range->end);
  if (!q.ok()) return ApiError(q.error());
  auto stream = std::make_shared<ExportStream>(std::move(*q), std::move(*sets), *range);
  Response r;
  r.content_type = "application/stream+json; charset=utf-8";
  r.stream = [stream](std::string* chunk) { return stream->Next(chunk); };
  return r;
}

namespace {

// A label value in the text exposition format: \\, \" and \n escaped.
void AppendEscapedValue(std::string* out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '"') {
      out->append("\\\"");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

void AppendLabelPair(std::string* out, bool* first, std::string_view name, std::string_view value) {
  out->append(*first ? "{" : ",");
  *first = false;
  out->append(name);
  out->append("=\"");
  AppendEscapedValue(out, value);
  out->push_back('"');
}

}  // namespace

namespace {

// The protobuf exposition format's content type, which Prometheus asks for
// (first) when it scrapes native histograms.
constexpr std::string_view kProtoDelimited =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

bool WantsProtobuf(std::string_view accept) {
  return accept.find("application/vnd.google.protobuf") != std::string_view::npos &&
         accept.find("io.prometheus.client.MetricFamily") != std::string_view::npos &&
         accept.find("encoding=delimited") != std::string_view::npos;
}

// The newest sample of a federated series: a float, or a native histogram.
struct FederatedPoint {
  model::Labels labels;
  int64_t t = 0;
  double v = 0;
  std::shared_ptr<const model::FloatHistogram> h;
  // Family order within a name: floats, then counter, then gauge histograms.
  int kind() const {
    if (h == nullptr) return 0;
    return h->counter_reset_hint == model::CounterResetHint::kGauge ? 2 : 1;
  }
};

// io.prometheus.client.Histogram of a native histogram (exponential
// buckets, float counts) or, for custom buckets, of the classic histogram
// it is (cumulative buckets; +Inf implied), as Prometheus's federation.
ProtoWriter HistogramMessage(const model::FloatHistogram& h) {
  ProtoWriter m;
  m.Double(2, h.sum);  // sample_sum
  if (h.UsesCustomBuckets()) {
    // Whole counts go in the integer fields, which every Prometheus reads
    // (2.x knows no cumulative_count_float); others in the float ones.
    std::vector<double> cumulative;
    std::vector<model::Bucket> buckets = h.PositiveBuckets();
    size_t k = 0;
    double c = 0;
    bool whole = h.count >= 0 && h.count == std::floor(h.count) && h.count < 0x1p63;
    for (size_t i = 0; i < h.custom_values.size(); ++i) {
      while (k < buckets.size() && buckets[k].index < static_cast<int32_t>(i)) ++k;
      if (k < buckets.size() && buckets[k].index == static_cast<int32_t>(i)) c += buckets[k].count;
      cumulative.push_back(c);
      whole = whole && c == std::floor(c);
    }
    if (whole) {
      m.Varint(1, static_cast<uint64_t>(h.count));  // sample_count
    } else {
      m.Double(4, h.count);  // sample_count_float
    }
    for (size_t i = 0; i < h.custom_values.size(); ++i) {
      ProtoWriter b;
      if (whole) {
        b.Varint(1, static_cast<uint64_t>(cumulative[i]));  // cumulative_count
      } else {
        b.Double(4, cumulative[i]);  // cumulative_count_float
      }
      b.Double(2, h.custom_values[i]);  // upper_bound
      m.Message(3, b);                  // bucket
    }
    return m;
  }
  m.Double(4, h.count);  // sample_count_float
  m.SInt(5, h.schema);
  m.Double(6, h.zero_threshold);
  m.Double(8, h.zero_count);  // zero_count_float
  auto spans = [&m](uint32_t field, const std::vector<model::Span>& ss) {
    for (const model::Span& sp : ss) {
      ProtoWriter w;
      w.SInt(1, sp.offset);
      w.Varint(2, sp.length);
      m.Message(field, w);
    }
  };
  spans(9, h.negative_spans);
  m.PackedDoubles(11, h.negative_buckets);  // negative_count
  spans(12, h.positive_spans);
  m.PackedDoubles(14, h.positive_buckets);  // positive_count
  return m;
}

// A custom-bucket histogram in the text format: its classic series.
void AppendClassicHistogramText(std::string* out, std::string_view name, const std::string& labels,
                                const model::FloatHistogram& h, int64_t t) {
  std::string ts = " " + std::to_string(t) + "\n";
  auto line = [&](std::string_view suffix, std::string_view le, double v) {
    out->append(name);
    out->append(suffix);
    std::string l = labels;
    if (!le.empty()) {
      l += l.empty() ? "" : ",";
      l += "le=\"";
      l += le;
      l += '"';
    }
    if (!l.empty()) {
      out->push_back('{');
      out->append(l);
      out->push_back('}');
    }
    out->push_back(' ');
    AppendExpositionFloat(out, v);
    out->append(ts);
  };
  double cumulative = 0;
  std::vector<model::Bucket> buckets = h.PositiveBuckets();
  size_t k = 0;
  for (size_t i = 0; i < h.custom_values.size(); ++i) {
    while (k < buckets.size() && buckets[k].index < static_cast<int32_t>(i)) ++k;
    if (k < buckets.size() && buckets[k].index == static_cast<int32_t>(i)) cumulative += buckets[k].count;
    std::string le;
    AppendExpositionFloat(&le, h.custom_values[i]);
    line("_bucket", le, cumulative);
  }
  line("_bucket", "+Inf", h.count);
  line("_sum", "", h.sum);
  line("_count", "", h.count);
}

}  // namespace

// /federate, as Prometheus: for every series some match[] selects, its
// newest sample within the 5 m lookback (none when that one is a staleness
// marker), with its timestamp, grouped by metric name; floats untyped.
// External labels (and instance="") are added after the series' own labels
// where the series lacks them. A scraper that asks for the protobuf format
// (Prometheus with native histograms on) gets it, native histograms
// included; the text format carries floats and custom-bucket histograms
// (as classic ones) and leaves exponential histograms out, as Prometheus.
Response Api::Federate(const Request& req) {
  auto sets = MatchSets(req, false);
  if (!sets.ok()) return Text(400, sets.error().message());
  constexpr int64_t kLookbackMs = 5 * 60 * 1000;
  const int64_t now = NowMillis();
  const bool proto = WantsProtobuf(req.accept);
  auto q = deps_.db->NewQuerier(now - kLookbackMs + 1, now);
  if (!q.ok()) return Text(500, q.error().message());

  std::vector<FederatedPoint> points;
  std::set<model::Labels> seen;
  for (const model::Matchers& m : *sets) {
    auto ss = (*q)->Select(false, storage::SelectHints{now - kLookbackMs + 1, now}, m);
    while (ss->Next()) {
      const storage::Series& series = ss->At();
      if (sets->size() > 1 && !seen.insert(series.labels()).second) continue;
      auto it = series.Iterator();
      bool found = false;
      FederatedPoint last;
      for (bool ok = it->Seek(now - kLookbackMs + 1); ok; ok = it->Next()) {
        model::Sample s = it->At();
        if (s.t > now) break;
        last.t = s.t;
        last.v = s.v;
        last.h = nullptr;
        if (it->AtIsHistogram()) last.h = std::make_shared<model::FloatHistogram>(*it->AtHistogram());
        found = true;
      }
      if (!it->Err().ok()) return Text(500, it->Err().message());
      if (!found) continue;
      if (last.h != nullptr ? model::IsStaleNaN(last.h->sum) : model::IsStaleNaN(last.v)) continue;
      if (last.h != nullptr && !proto && !last.h->UsesCustomBuckets()) continue;
      last.labels = series.labels();
      points.push_back(std::move(last));
    }
    if (!ss->Err().ok()) return Text(500, ss->Err().message());
  }
  std::sort(points.begin(), points.end(), [](const FederatedPoint& a, const FederatedPoint& b) {
    std::string_view na = a.labels.MetricName(), nb = b.labels.MetricName();
    if (na != nb) return na < nb;
    if (a.kind() != b.kind()) return a.kind() < b.kind();
    return a.labels < b.labels;
  });

  std::vector<model::Label> external = deps_.rules ? deps_.rules->ExternalLabels().pairs() : std::vector<model::Label>{};
  if (std::none_of(external.begin(), external.end(), [](const model::Label& l) { return l.name == "instance"; })) {
    external.push_back({"instance", ""});
    std::sort(external.begin(), external.end());
  }
  // The labels a federated sample carries: its own (but the name), then
  // the external ones it lacks.
  auto each_label = [&](const FederatedPoint& p, const auto& fn) {
    for (const model::Label& l : p.labels) {
      if (l.name != model::kMetricName) fn(l.name, l.value);
    }
    for (const model::Label& l : external) {
      if (!p.labels.Has(l.name)) fn(l.name, l.value);
    }
  };

  Response r;
  if (proto) {
    r.content_type = std::string(kProtoDelimited);
    ProtoWriter family;
    auto flush = [&] {
      if (family.data().empty()) return;
      PutVarint64(&r.body, family.data().size());
      r.body += family.data();
      family = ProtoWriter();
    };
    for (size_t i = 0; i < points.size(); ++i) {
      const FederatedPoint& p = points[i];
      if (i == 0 || p.labels.MetricName() != points[i - 1].labels.MetricName() || p.kind() != points[i - 1].kind()) {
        flush();
        family.Bytes(1, p.labels.MetricName());
        // UNTYPED = 3; a custom-bucket histogram goes out as a classic one
        // (HISTOGRAM = 4); GAUGE_HISTOGRAM = 5.
        family.Varint(3, p.kind() == 0 ? 3 : p.kind() == 1 ? 4 : 5);
      }
      ProtoWriter metric;
      each_label(p, [&](std::string_view name, std::string_view value) {
        ProtoWriter pair;
        pair.Bytes(1, name);
        pair.Bytes(2, value);
        metric.Message(1, pair);
      });
      if (p.h == nullptr) {
        ProtoWriter untyped;
        untyped.Double(1, p.v);
        metric.Message(5, untyped);
      } else {
        metric.Message(7, HistogramMessage(*p.h));
      }
      metric.Int64(6, p.t);  // timestamp_ms
      family.Message(4, metric);
    }
    flush();
    return r;
  }
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  for (size_t i = 0; i < points.size(); ++i) {
    const FederatedPoint& p = points[i];
    std::string_view name = p.labels.MetricName();
    if (i == 0 || name != points[i - 1].labels.MetricName() || p.kind() != points[i - 1].kind()) {
      r.body += "# TYPE ";
      r.body += name;
      r.body += p.h != nullptr ? " histogram\n" : " untyped\n";
    }
    std::string labels;
    bool first = true;
    each_label(p, [&](std::string_view n, std::string_view v) { AppendLabelPair(&labels, &first, n, v); });
    if (p.h != nullptr) {
      // AppendLabelPair opens with '{' and separates with ','.
      AppendClassicHistogramText(&r.body, name, labels.empty() ? "" : labels.substr(1), *p.h, p.t);
      continue;
    }
    r.body += name;
    r.body += labels;
    if (!first) r.body += '}';
    r.body += ' ';
    AppendExpositionFloat(&r.body, p.v);
    r.body += ' ';
    r.body += std::to_string(p.t);
    r.body += '\n';
  }
  return r;
}

}  // namespace trainwatch::http
