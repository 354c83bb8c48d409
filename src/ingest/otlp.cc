#include "ingest/otlp.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <utility>

#include "base/base64.h"
#include "base/coding.h"
#include "base/json.h"
#include "base/proto_reader.h"
#include "base/utf8.h"
#include "model/sample.h"

namespace trainwatch::ingest {

// ---- names (Prometheus 3's otlptranslator, UnderscoreEscapingWithSuffixes) ----

namespace {

bool IsMetricChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':';
}
bool IsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string_view UnitWord(std::string_view u) {
  static constexpr std::pair<std::string_view, std::string_view> kUnits[] = {
      {"d", "days"},       {"h", "hours"},        {"min", "minutes"},    {"s", "seconds"},     {"ms", "milliseconds"},
      {"us", "microseconds"}, {"ns", "nanoseconds"}, {"By", "bytes"},    {"KiBy", "kibibytes"}, {"MiBy", "mebibytes"},
      {"GiBy", "gibibytes"}, {"TiBy", "tibibytes"}, {"KBy", "kilobytes"}, {"MBy", "megabytes"}, {"GBy", "gigabytes"},
      {"TBy", "terabytes"},  {"m", "meters"},        {"V", "volts"},       {"A", "amperes"},     {"J", "joules"},
      {"W", "watts"},        {"g", "grams"},         {"Cel", "celsius"},   {"Hz", "hertz"},      {"1", ""},
      {"%", "percent"}};
  for (auto [k, v] : kUnits) {
    if (k == u) return v;
  }
  return u;
}

std::string_view PerUnitWord(std::string_view u) {
  static constexpr std::pair<std::string_view, std::string_view> kUnits[] = {
      {"s", "second"}, {"m", "minute"}, {"h", "hour"}, {"d", "day"}, {"w", "week"}, {"mo", "month"}, {"y", "year"}};
  for (auto [k, v] : kUnits) {
    if (k == u) return v;
  }
  return u;
}

// Characters outside the metric set become `_`, runs of `_` one, and a
// leading `_` goes.
std::string CleanUnit(std::string_view u) {
  std::string out;
  for (char c : u) {
    char m = IsMetricChar(c) ? c : '_';
    if (m == '_' && !out.empty() && out.back() == '_') continue;
    out += m;
  }
  if (!out.empty() && out.front() == '_') out.erase(0, 1);
  return out;
}

}  // namespace

std::string OtlpMetricName(std::string_view name, std::string_view unit, OtlpMetricType type) {
  std::vector<std::string> tokens;
  for (size_t i = 0; i < name.size();) {
    if (!IsMetricChar(name[i])) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < name.size() && IsMetricChar(name[j])) j++;
    tokens.emplace_back(name.substr(i, j - i));
    i = j;
  }
  // The unit: "main/per", each dropped when it is an {annotation}.
  std::string main, per;
  const size_t slash = unit.find('/');
  const std::string_view main_u = Trim(unit.substr(0, slash));
  if (!main_u.empty() && main_u.find_first_of("{}") == std::string_view::npos) main = UnitWord(main_u);
  if (slash != std::string_view::npos && slash + 1 < unit.size()) {
    const std::string_view per_u = Trim(unit.substr(slash + 1));
    if (!per_u.empty() && per_u.find_first_of("{}") == std::string_view::npos) per = "per_" + std::string(PerUnitWord(per_u));
  }
  main = CleanUnit(main);
  per = CleanUnit(per);
  auto has = [&](const std::string& t) { return std::find(tokens.begin(), tokens.end(), t) != tokens.end(); };
  if (has(main)) main.clear();
  if (per == "per_") {
    per.clear();
  } else {
    while (!per.empty() && per.back() == '_') per.pop_back();
    if (has(per)) per.clear();
  }
  if (!per.empty()) {
    while (!main.empty() && main.back() == '_') main.pop_back();
  }
  if (!main.empty()) tokens.push_back(main);
  if (!per.empty()) tokens.push_back(per);
  auto suffix = [&](const char* word) {
    std::erase(tokens, std::string(word));
    tokens.emplace_back(word);
  };
  if (type == OtlpMetricType::kMonotonicCounter) suffix("total");
  if (unit == "1" && type == OtlpMetricType::kGauge) suffix("ratio");
  std::string out;
  for (const std::string& t : tokens) {
    if (!out.empty()) out += '_';
    out += t;
  }
  if (!out.empty() && IsDigit(out[0])) out.insert(0, "_");
  if (out.find_first_not_of('_') == std::string::npos) return "";
  return out;
}

std::string OtlpLabelName(std::string_view key) {
  if (key.empty()) return "";
  std::string out(key);
  for (char& c : out) {
    if (!IsLabelChar(c)) c = '_';
  }
  if (IsDigit(out[0])) {
    out.insert(0, "key_");
  } else if (out[0] == '_' && !out.starts_with("__")) {
    out.insert(0, "key");
  }
  if (out.find_first_not_of('_') == std::string::npos) return "";
  return out;
}

// ---- the decoded form both encodings share ----

namespace {

struct Attr {
  std::string key, value;
};

enum class Kind { kNone, kGauge, kSum, kHistogram, kExpHistogram, kSummary };
enum Temporality { kUnspecified = 0, kDelta = 1, kCumulative = 2 };
constexpr uint32_t kNoRecordedValue = 1;

struct Point {
  std::vector<Attr> attrs;
  uint64_t time_ns = 0;
  uint64_t start_ns = 0;  // start_time_unix_nano; 0: unknown
  uint32_t flags = 0;
  double value = 0;  // gauge, sum
  uint64_t count = 0;
  double sum = 0;
  bool has_sum = false;
  std::vector<uint64_t> bucket_counts;  // histogram; exponential: positive buckets
  std::vector<double> bounds;
  int32_t scale = 0, offset = 0, neg_offset = 0;  // exponential
  uint64_t zero_count = 0;
  double zero_threshold = 0;
  std::vector<uint64_t> neg_counts;
  std::vector<std::pair<double, double>> quantiles;  // summary
};

struct Metric {
  std::string name, unit;
  Kind kind = Kind::kNone;
  int temporality = kUnspecified;
  bool monotonic = false;
  std::vector<Point> points;
};

// Shortest text that reads back as `v`, without an exponent (Go's 'f', -1).
std::string FormatFixed(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[400];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

std::string FormatGeneral(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

// ---- translation into series ----

class OtlpTranslator {
 public:
  OtlpTranslator(OtlpBatch* b, int64_t now_ms, const RequestLimits& limits, OtlpDeltas* deltas)
      : b_(b), now_ms_(now_ms), limits_(limits), deltas_(deltas) {}

  void BeginResource(std::vector<Attr> attrs) {
    job_.clear(), instance_.clear();
    std::string name, ns;
    info_.clear();
    for (Attr& a : attrs) {
      if (a.key == "service.name") {
        name = a.value;
      } else if (a.key == "service.namespace") {
        ns = a.value;
      } else if (a.key == "service.instance.id") {
        instance_ = a.value;
      } else {
        info_.push_back(std::move(a));
      }
    }
    if (!name.empty()) job_ = ns.empty() ? name : ns + "/" + name;
    first_ms_ = INT64_MAX, last_ms_ = INT64_MIN;
  }

  // target_info for the resource's other attributes, at its first and last point.
  Status EndResource() {
    if (info_.empty() || first_ms_ > last_ms_) return Status::OK();
    model::Labels base;
    if (!BaseLabels(info_, &base)) return Status::OK();
    const model::Labels labels = Named(base, "target_info", {});
    RETURN_IF_ERROR(Emit(labels, first_ms_, 1));
    if (last_ms_ != first_ms_) RETURN_IF_ERROR(Emit(labels, last_ms_, 1));
    return Status::OK();
  }

  // Adds a metric's points; an error only for a request over its limits.
  Status AddMetric(Metric& m) {
    b_->stats_.points += m.points.size();
    if (m.kind == Kind::kNone) return Reject(m, m.points.size(), "no data (gauge, sum, histogram, exponential histogram or summary)");
    const bool delta = m.temporality == kDelta;
    if ((m.kind == Kind::kSum || m.kind == Kind::kHistogram || m.kind == Kind::kExpHistogram) &&
        m.temporality != kDelta && m.temporality != kCumulative) {
      return Reject(m, m.points.size(), "aggregation temporality unspecified");
    }
    if (delta && deltas_ == nullptr) return Reject(m, m.points.size(), "delta temporality is not accepted here");
    OtlpMetricType type = OtlpMetricType::kGauge;
    switch (m.kind) {
      case Kind::kSum: type = m.monotonic ? OtlpMetricType::kMonotonicCounter : OtlpMetricType::kNonMonotonicCounter; break;
      case Kind::kHistogram:
      case Kind::kExpHistogram: type = OtlpMetricType::kHistogram; break;
      case Kind::kSummary: type = OtlpMetricType::kSummary; break;
      default: break;
    }
    const std::string name = OtlpMetricName(m.name, m.unit, type);
    if (name.empty()) return Reject(m, m.points.size(), "the name translates to no valid metric name");
    for (Point& p : m.points) {
      RETURN_IF_ERROR(AddPoint(m, name, p, delta));
    }
    return Status::OK();
  }

 private:
  Status Reject(const Metric& m, size_t points, std::string_view why) {
    OtlpStats& st = b_->stats_;
    if (points == 0) return Status::OK();
    st.rejected_points += points;
    if (st.first_rejection.empty()) st.first_rejection = "metric \"" + m.name.substr(0, 200) + "\": " + std::string(why);
    return Status::OK();
  }

  Status AddPoint(const Metric& m, const std::string& name, const Point& p, bool delta) {
    const int64_t t = p.time_ns == 0 ? now_ms_ : static_cast<int64_t>(p.time_ns / 1000000);
    const bool stale = (p.flags & kNoRecordedValue) != 0;
    // The series' start timestamp: the point's start time (a delta's is
    // where its own window starts; the running total's is found below).
    // Gauges pass theirs too, as Prometheus 3's otlptranslator does.
    const int64_t st = delta ? 0 : StartMs(p);
    std::vector<int64_t> sts;  // per series of `out`, for deltas
    for (const Attr& a : p.attrs) {
      if (!IsValidUtf8(a.value) || !IsValidUtf8(a.key)) return Reject(m, 1, "attribute " + a.key.substr(0, 100) + " is not valid UTF-8");
    }
    if (m.kind == Kind::kExpHistogram) return AddExpPoint(m, name, p, delta, t, stale);
    if (m.kind == Kind::kHistogram && b_->options_.convert_histograms_to_nhcb) return AddNhcbPoint(m, name, p, delta, t, stale);
    std::vector<Sample> out;
    switch (m.kind) {
      case Kind::kGauge:
      case Kind::kSum:
        out.push_back({name, {}, p.value});
        break;
      case Kind::kHistogram: {
        if (!p.bucket_counts.empty() && p.bucket_counts.size() != p.bounds.size() + 1) {
          return Reject(m, 1, std::to_string(p.bucket_counts.size()) + " bucket counts for " + std::to_string(p.bounds.size()) +
                                  " explicit bounds (want one more count than bounds)");
        }
        for (size_t i = 1; i < p.bounds.size(); i++) {
          if (!(p.bounds[i - 1] < p.bounds[i])) return Reject(m, 1, "explicit bounds not increasing");
        }
        uint64_t cum = 0;
        for (size_t i = 0; i < p.bounds.size() && i < p.bucket_counts.size(); i++) {
          cum += p.bucket_counts[i];
          out.push_back({name + "_bucket", {"le", FormatFixed(p.bounds[i])}, static_cast<double>(cum)});
        }
        out.push_back({name + "_bucket", {"le", "+Inf"}, static_cast<double>(p.count)});
        out.push_back({name + "_count", {}, static_cast<double>(p.count)});
        if (p.has_sum) out.push_back({name + "_sum", {}, p.sum});
        break;
      }
      case Kind::kSummary:
        for (auto [q, v] : p.quantiles) out.push_back({name, {"quantile", FormatFixed(q)}, v});
        out.push_back({name + "_count", {}, static_cast<double>(p.count)});
        out.push_back({name + "_sum", {}, p.sum});
        break;
      case Kind::kExpHistogram:
      case Kind::kNone:
        break;
    }
    // Deltas: each series' running total, checked before anything is kept.
    model::Labels base;
    if (!BaseLabels(p.attrs, &base)) return Reject(m, 1, "a resource attribute is not valid UTF-8");
    std::vector<model::Labels> labels;
    labels.reserve(out.size());
    for (const Sample& s : out) labels.push_back(Named(base, s.name, s.extra));
    if (delta && !stale) {
      if (!b_->delta_lock_.held()) {
        b_->delta_lock_.Take(deltas_);
        b_->deltas_ = deltas_;
      }
      deltas_->AssertHeld();
      const size_t mark = b_->pending_.size();
      // Each series has its own running total (a bucket may be new).
      sts.resize(out.size());
      for (size_t i = 0; i < out.size(); i++) {
        key_.clear();
        model::AppendEncodedLabels(labels[i], &key_);
        if (!deltas_->Add(key_, t, StartMs(p), out[i].v, &b_->pending_, &out[i].v, &sts[i])) {
          b_->pending_.resize(mark);
          return Reject(m, 1, "delta point not after the series' previous point");
        }
      }
    }
    for (size_t i = 0; i < out.size(); i++) {
      RETURN_IF_ERROR(Emit(labels[i], t, stale ? model::StaleNaN() : out[i].v, sts.empty() ? st : sts[i]));
    }
    first_ms_ = std::min(first_ms_, t);
    last_ms_ = std::max(last_ms_, t);
    return Status::OK();
  }

  struct Sample {
    std::string name;
    std::pair<std::string, std::string> extra;  // le or quantile
    double v;
  };
  // start_time_unix_nano in ms, as Prometheus's convertTimeStamp; 0 stays 0.
  static int64_t StartMs(const Point& p) { return static_cast<int64_t>(p.start_ns / 1000000); }
  static constexpr size_t kMaxExpBuckets = 4096;
  // Prometheus's defaultZeroThreshold: OTLP's zero_threshold is not used
  // (a TODO in histograms.go), so queries answer as Prometheus's do.
  static constexpr double kZeroThreshold = 1e-128;

  // An exponential histogram point as one native histogram sample
  // (Prometheus's exponentialToNativeHistogram).
  Status AddExpPoint(const Metric& m, const std::string& name, const Point& p, bool delta, int64_t t, bool stale) {
    if (p.scale < model::kExponentialSchemaMin) {
      return Reject(m, 1, "cannot convert exponential to native histogram: scale must be >= -4, was " + std::to_string(p.scale));
    }
    if (p.bucket_counts.size() + p.neg_counts.size() > kMaxExpBuckets) {
      return Reject(m, 1, "more than " + std::to_string(kMaxExpBuckets) + " buckets");
    }
    // Indexes are shifted right by scale_down; past 40 every one is 0 or -1.
    const int32_t scale_down = std::min(std::max(p.scale - model::kExponentialSchemaMax, 0), 40);
    model::FloatHistogram h;
    h.schema = std::min(p.scale, model::kExponentialSchemaMax);
    h.zero_threshold = kZeroThreshold;
    h.zero_count = static_cast<double>(p.zero_count);
    if (!ExpLayout(p.bucket_counts, p.offset, scale_down, &h.positive_spans, &h.positive_buckets) ||
        !ExpLayout(p.neg_counts, p.neg_offset, scale_down, &h.negative_spans, &h.negative_buckets)) {
      return Reject(m, 1, "bucket offset out of range");
    }
    // Both sides exponential: a delta fails only on time.
    return EmitHistogramPoint(m, name, p, delta, t, stale, &h, "delta point not after the series' previous point");
  }

  // Stores one native histogram made from point `p` (h: its buckets): count
  // and sum (stale markers as such), its series' labels, the
  // running total when it is a delta (`refused` says why one is not added),
  // the start timestamp of a cumulative point.
  Status EmitHistogramPoint(const Metric& m, const std::string& name, const Point& p, bool delta, int64_t t, bool stale,
                            model::FloatHistogram* h, const char* refused) {
    if (stale) {
      h->sum = h->count = model::StaleNaN();
    } else {
      h->count = static_cast<double>(p.count);
      h->sum = p.has_sum ? p.sum : 0;
      // Buckets that fit the layout (NHCB: bounds strictly increasing and
      // finite), counts adding up.
      if (Status st = h->Validate(); !st.ok()) return Reject(m, 1, st.message());
    }
    model::Labels base;
    if (!BaseLabels(p.attrs, &base)) return Reject(m, 1, "a resource attribute is not valid UTF-8");
    const model::Labels labels = Named(base, name, {});
    int64_t st = delta ? 0 : StartMs(p);
    if (delta && !stale) {
      if (!b_->delta_lock_.held()) {
        b_->delta_lock_.Take(deltas_);
        b_->deltas_ = deltas_;
      }
      deltas_->AssertHeld();
      key_.clear();
      model::AppendEncodedLabels(labels, &key_);
      if (!deltas_->AddHistogram(key_, t, StartMs(p), *h, &b_->hist_pending_, h, &st)) return Reject(m, 1, refused);
    }
    RETURN_IF_ERROR(Emit(labels, t, 0, st, h));
    first_ms_ = std::min(first_ms_, t);
    last_ms_ = std::max(last_ms_, t);
    return Status::OK();
  }

  // An explicit-bucket histogram point as one native histogram with custom
  // buckets (convert_histograms_to_nhcb; Prometheus's
  // explicitHistogramToCustomBucketsHistogram): the explicit bounds are the
  // custom values, the bucket counts laid out as convertBucketsLayout does
  // (leading empty buckets skipped, gaps over 2 start a new span), an
  // absent sum is 0. A delta point is added to its series' running total
  // (Prometheus stores it as is with a gauge hint; here, as for the other
  // deltas, the total is cumulative).
  Status AddNhcbPoint(const Metric& m, const std::string& name, const Point& p, bool delta, int64_t t, bool stale) {
    if (!p.bucket_counts.empty() && p.bucket_counts.size() != p.bounds.size() + 1) {
      return Reject(m, 1, std::to_string(p.bucket_counts.size()) + " bucket counts for " + std::to_string(p.bounds.size()) +
                              " explicit bounds (want one more count than bounds)");
    }
    model::FloatHistogram h;
    h.schema = model::kCustomBucketsSchema;
    h.custom_values = p.bounds;
    // Prometheus's getBucketOffset: the layout starts at the first
    // non-empty bucket. Custom bucket i is index i (ExpLayout adds 1).
    size_t first = 0;
    while (first < p.bucket_counts.size() && p.bucket_counts[first] == 0) first++;
    if (first < p.bucket_counts.size()) {
      const std::vector<uint64_t> counts(p.bucket_counts.begin() + static_cast<ptrdiff_t>(first), p.bucket_counts.end());
      if (!ExpLayout(counts, static_cast<int32_t>(first) - 1, 0, &h.positive_spans, &h.positive_buckets)) {
        return Reject(m, 1, "bucket offset out of range");
      }
    }
    return EmitHistogramPoint(m, name, p, delta, t, stale, &h,
                              "delta point not after the series' previous point, or its bucket bounds differ from "
                              "the running total's");
  }

  // Prometheus's convertBucketsLayout (histograms.go) with absolute counts:
  // OTLP bucket i holds (base^(offset+i), base^(offset+i+1)], Prometheus's
  // index offset+i+1; 2^scale_down neighbours merge into one. The first span
  // starts at the first index; an empty bucket is kept only as the last one
  // or inside a gap of at most 2 (filled with zeros), a longer gap starts a
  // new span. Unlike Go's, merged buckets after an empty run stay at their
  // own index. False when an index leaves the int32 range.
  static bool ExpLayout(const std::vector<uint64_t>& counts, int32_t offset, int32_t scale_down,
                        std::vector<model::Span>* spans, std::vector<double>* buckets) {
    if (counts.empty()) return true;
    auto index = [&](size_t i) { return ((int64_t{offset} + static_cast<int64_t>(i)) >> scale_down) + 1; };
    const int64_t first = index(0);
    if (first > INT32_MAX || index(counts.size() - 1) > INT32_MAX) return false;
    spans->push_back({static_cast<int32_t>(first), 0});
    int64_t last = first - 1;  // index of the last bucket kept
    size_t i = 0;
    while (i < counts.size()) {
      const int64_t idx = index(i);
      double c = 0;
      for (; i < counts.size() && index(i) == idx; i++) c += static_cast<double>(counts[i]);
      if (c == 0 && i < counts.size()) continue;
      const int64_t gap = idx - last - 1;
      if (gap > 2) {
        spans->push_back({static_cast<int32_t>(gap), 0});
      } else {
        for (int64_t g = 0; g < gap; g++) buckets->push_back(0);
        spans->back().length += static_cast<uint32_t>(gap);
      }
      spans->back().length++;
      buckets->push_back(c);
      last = idx;
    }
    return true;
  }

  // A point's labels but the metric name, built once for all its series:
  // its attributes (names translated, values of colliding names joined with
  // ";" in key order), job and instance from the resource. False when a
  // value is not valid UTF-8 (a resource attribute: points' are checked
  // with their name).
  bool BaseLabels(const std::vector<Attr>& attrs, model::Labels* out) {
    sorted_.clear();
    for (const Attr& a : attrs) sorted_.push_back(&a);
    std::sort(sorted_.begin(), sorted_.end(), [](const Attr* x, const Attr* y) { return x->key < y->key; });
    std::map<std::string, std::string> m;
    for (const Attr* a : sorted_) {
      std::string k = OtlpLabelName(a->key);
      if (k.empty() || k == model::kMetricName) continue;
      auto [it, inserted] = m.try_emplace(std::move(k), a->value);
      if (!inserted) it->second += ";" + a->value;
    }
    if (!job_.empty()) m["job"] = job_;
    if (!instance_.empty()) m["instance"] = instance_;
    std::vector<model::Label> v;
    v.reserve(m.size());
    for (auto& [k, val] : m) {
      if (!IsValidUtf8(val)) return false;
      if (!val.empty()) v.push_back({k, std::move(val)});
    }
    *out = model::Labels(std::move(v));
    return true;
  }

  // One series of the point: `base` with the metric name and `extra` (le
  // or quantile, replacing an attribute of that name).
  static model::Labels Named(const model::Labels& base, const std::string& name,
                             const std::pair<std::string, std::string>& extra) {
    model::LabelsBuilder b(base);
    b.Set(model::kMetricName, name);
    if (!extra.first.empty()) b.Set(extra.first, extra.second);
    return b.Build();
  }

  // A float sample, or the native histogram *h, with start timestamp `st`.
  Status Emit(const model::Labels& labels, int64_t t, double v, int64_t st = 0,
              const model::FloatHistogram* h = nullptr) {
    key_.clear();
    model::AppendEncodedLabels(labels, &key_);
    auto [it, inserted] = b_->index_.try_emplace(key_, static_cast<uint32_t>(b_->series_.size()));
    if (inserted) {
      if (!limits_.SeriesOk(b_->series_.size() + 1)) return limits_.TooManySeries();
      b_->series_.push_back({labels, 0});
    }
    if (!limits_.SamplesOk(b_->samples_.size() + b_->hist_samples_.size() + 1)) return limits_.TooManySamples();
    if (h != nullptr) {
      b_->hist_samples_.push_back({it->second, t, *h, st});
    } else {
      b_->samples_.push_back({it->second, t, v, st});
    }
    return Status::OK();
  }

  OtlpBatch* b_;
  int64_t now_ms_;
  const RequestLimits& limits_;
  OtlpDeltas* deltas_;
  std::string job_, instance_;
  std::vector<Attr> info_;
  int64_t first_ms_ = INT64_MAX, last_ms_ = INT64_MIN;
  std::vector<const Attr*> sorted_;
  std::string key_;
};

// ---- protobuf ----

namespace {

using Reader = ProtoReader;

Status ReadString(Reader& r, uint32_t wire, std::string_view what, std::string* out) {
  RETURN_IF_ERROR(r.Expect(wire, kLen, what));
  std::string_view s;
  RETURN_IF_ERROR(r.Bytes(&s));
  out->assign(s);
  return Status::OK();
}

Status ReadFixed64(Reader& r, uint32_t wire, std::string_view what, uint64_t* out) {
  RETURN_IF_ERROR(r.Expect(wire, kFixed64, what));
  return r.Fixed64(out);
}

Status ReadDouble(Reader& r, uint32_t wire, std::string_view what, double* out) {
  uint64_t bits = 0;
  RETURN_IF_ERROR(ReadFixed64(r, wire, what, &bits));
  std::memcpy(out, &bits, 8);
  return Status::OK();
}

Status ReadVarint(Reader& r, uint32_t wire, std::string_view what, uint64_t* out) {
  RETURN_IF_ERROR(r.Expect(wire, kVarint, what));
  return r.Varint(out);
}

int64_t Zigzag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// A submessage's reader, its offsets in the whole body.
Status Sub(Reader& r, uint32_t wire, std::string_view what, Reader* out) {
  RETURN_IF_ERROR(r.Expect(wire, kLen, what));
  std::string_view msg;
  size_t at = 0;
  RETURN_IF_ERROR(r.Bytes(&msg, &at));
  *out = Reader(msg, at);
  return Status::OK();
}

// Repeated fixed64 or double: packed (one LEN field) or one value a field.
template <typename T>
Status ReadRepeated64(Reader& r, uint32_t wire, std::string_view what, std::vector<T>* out) {
  auto one = [&](uint64_t bits) {
    T v;
    std::memcpy(&v, &bits, 8);
    out->push_back(v);
  };
  if (wire == kFixed64) {
    uint64_t bits = 0;
    RETURN_IF_ERROR(r.Fixed64(&bits));
    one(bits);
    return Status::OK();
  }
  Reader p;
  RETURN_IF_ERROR(Sub(r, wire, what, &p));
  while (!p.done()) {
    uint64_t bits = 0;
    RETURN_IF_ERROR(p.Fixed64(&bits));
    one(bits);
  }
  return Status::OK();
}

// Repeated uint64 varints, packed or not.
Status ReadRepeatedVarint(Reader& r, uint32_t wire, std::string_view what, std::vector<uint64_t>* out) {
  if (wire == kVarint) {
    uint64_t v = 0;
    RETURN_IF_ERROR(r.Varint(&v));
    out->push_back(v);
    return Status::OK();
  }
  Reader p;
  RETURN_IF_ERROR(Sub(r, wire, what, &p));
  while (!p.done()) {
    uint64_t v = 0;
    RETURN_IF_ERROR(p.Varint(&v));
    out->push_back(v);
  }
  return Status::OK();
}

Status AnyValueText(Reader r, int depth, std::string* out);

// ArrayValue or KeyValueList as JSON, as Prometheus writes them.
Status CompositeText(Reader r, bool kvlist, int depth, std::string* out) {
  if (depth > 32) return r.Err("attribute values nested deeper than 32");
  *out += kvlist ? '{' : '[';
  bool first = true;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f != 1) {
      RETURN_IF_ERROR(r.Skip(f, w));
      continue;
    }
    Reader item;
    RETURN_IF_ERROR(Sub(r, w, kvlist ? "kvlist value" : "array value", &item));
    if (!first) *out += ',';
    first = false;
    if (!kvlist) {
      std::string v;
      bool is_string = false;
      {
        // Strings stay strings in the JSON; other kinds their text.
        Reader peek = item;
        uint32_t pf = 0, pw = 0;
        if (!peek.done() && peek.Tag(&pf, &pw).ok()) is_string = pf == 1;
      }
      RETURN_IF_ERROR(AnyValueText(item, depth + 1, &v));
      if (is_string) {
        AppendJsonString(out, v);
      } else {
        *out += v.empty() ? "null" : v;
      }
      continue;
    }
    std::string key, v;
    bool is_string = false;
    while (!item.done()) {
      uint32_t kf = 0, kw = 0;
      RETURN_IF_ERROR(item.Tag(&kf, &kw));
      if (kf == 1) {
        RETURN_IF_ERROR(ReadString(item, kw, "key", &key));
      } else if (kf == 2) {
        Reader val;
        RETURN_IF_ERROR(Sub(item, kw, "value", &val));
        Reader peek = val;
        uint32_t pf = 0, pw = 0;
        if (!peek.done() && peek.Tag(&pf, &pw).ok()) is_string = pf == 1;
        RETURN_IF_ERROR(AnyValueText(val, depth + 1, &v));
      } else {
        RETURN_IF_ERROR(item.Skip(kf, kw));
      }
    }
    AppendJsonString(out, key);
    *out += ':';
    if (is_string) {
      AppendJsonString(out, v);
    } else {
      *out += v.empty() ? "null" : v;
    }
  }
  *out += kvlist ? '}' : ']';
  return Status::OK();
}

// An AnyValue as the text of a label value.
Status AnyValueText(Reader r, int depth, std::string* out) {
  out->clear();
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    switch (f) {
      case 1:
        RETURN_IF_ERROR(ReadString(r, w, "string_value", out));
        break;
      case 2: {
        uint64_t v = 0;
        RETURN_IF_ERROR(ReadVarint(r, w, "bool_value", &v));
        *out = v != 0 ? "true" : "false";
        break;
      }
      case 3: {
        uint64_t v = 0;
        RETURN_IF_ERROR(ReadVarint(r, w, "int_value", &v));
        *out = std::to_string(static_cast<int64_t>(v));
        break;
      }
      case 4: {
        double d = 0;
        RETURN_IF_ERROR(ReadDouble(r, w, "double_value", &d));
        *out = FormatGeneral(d);
        break;
      }
      case 5:
      case 6: {
        Reader sub;
        RETURN_IF_ERROR(Sub(r, w, f == 5 ? "array_value" : "kvlist_value", &sub));
        out->clear();
        RETURN_IF_ERROR(CompositeText(sub, f == 6, depth, out));
        break;
      }
      case 7: {
        std::string bytes;
        RETURN_IF_ERROR(ReadString(r, w, "bytes_value", &bytes));
        *out = Base64Encode(bytes);
        break;
      }
      default:
        RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  return Status::OK();
}

// KeyValue.
Status ReadAttr(Reader& r, uint32_t wire, std::vector<Attr>* out) {
  Reader kv;
  RETURN_IF_ERROR(Sub(r, wire, "attribute", &kv));
  Attr a;
  while (!kv.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(kv.Tag(&f, &w));
    if (f == 1) {
      RETURN_IF_ERROR(ReadString(kv, w, "attribute key", &a.key));
    } else if (f == 2) {
      Reader v;
      RETURN_IF_ERROR(Sub(kv, w, "attribute value", &v));
      RETURN_IF_ERROR(AnyValueText(v, 0, &a.value));
    } else {
      RETURN_IF_ERROR(kv.Skip(f, w));
    }
  }
  out->push_back(std::move(a));
  return Status::OK();
}

// NumberDataPoint, HistogramDataPoint, ExponentialHistogramDataPoint or
// SummaryDataPoint: their field numbers differ by kind.
Status ReadPoint(Reader r, Kind kind, Point* p) {
  const uint32_t attrs_field = kind == Kind::kGauge || kind == Kind::kSum   ? 7
                               : kind == Kind::kHistogram                    ? 9
                               : kind == Kind::kExpHistogram                 ? 1
                                                                             : 7;
  const uint32_t flags_field = kind == Kind::kGauge || kind == Kind::kSum ? 8 : kind == Kind::kSummary ? 8 : 10;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f == attrs_field) {
      RETURN_IF_ERROR(ReadAttr(r, w, &p->attrs));
    } else if (f == 3) {
      RETURN_IF_ERROR(ReadFixed64(r, w, "time_unix_nano", &p->time_ns));
    } else if (f == flags_field) {
      uint64_t v = 0;
      RETURN_IF_ERROR(ReadVarint(r, w, "flags", &v));
      p->flags = static_cast<uint32_t>(v);
    } else if (f == 2) {
      RETURN_IF_ERROR(ReadFixed64(r, w, "start_time_unix_nano", &p->start_ns));
    } else if (kind == Kind::kGauge || kind == Kind::kSum) {
      if (f == 4) {
        RETURN_IF_ERROR(ReadDouble(r, w, "as_double", &p->value));
      } else if (f == 6) {
        uint64_t v = 0;
        RETURN_IF_ERROR(ReadFixed64(r, w, "as_int", &v));
        p->value = static_cast<double>(static_cast<int64_t>(v));
      } else {
        RETURN_IF_ERROR(r.Skip(f, w));  // exemplars
      }
    } else if (f == 4) {
      RETURN_IF_ERROR(ReadFixed64(r, w, "count", &p->count));
    } else if (f == 5) {
      RETURN_IF_ERROR(ReadDouble(r, w, "sum", &p->sum));
      p->has_sum = true;
    } else if (kind == Kind::kHistogram && f == 6) {
      RETURN_IF_ERROR(ReadRepeated64(r, w, "bucket_counts", &p->bucket_counts));
    } else if (kind == Kind::kHistogram && f == 7) {
      RETURN_IF_ERROR(ReadRepeated64(r, w, "explicit_bounds", &p->bounds));
    } else if (kind == Kind::kExpHistogram && f == 6) {
      uint64_t v = 0;
      RETURN_IF_ERROR(ReadVarint(r, w, "scale", &v));
      p->scale = static_cast<int32_t>(Zigzag(v));
    } else if (kind == Kind::kExpHistogram && f == 7) {
      RETURN_IF_ERROR(ReadFixed64(r, w, "zero_count", &p->zero_count));
    } else if (kind == Kind::kExpHistogram && (f == 8 || f == 9)) {
      Reader b;
      RETURN_IF_ERROR(Sub(r, w, f == 8 ? "positive" : "negative", &b));
      int32_t& offset = f == 8 ? p->offset : p->neg_offset;
      std::vector<uint64_t>& counts = f == 8 ? p->bucket_counts : p->neg_counts;
      while (!b.done()) {
        uint32_t bf = 0, bw = 0;
        RETURN_IF_ERROR(b.Tag(&bf, &bw));
        if (bf == 1) {
          uint64_t v = 0;
          RETURN_IF_ERROR(ReadVarint(b, bw, "offset", &v));
          offset = static_cast<int32_t>(Zigzag(v));
        } else if (bf == 2) {
          RETURN_IF_ERROR(ReadRepeatedVarint(b, bw, "bucket_counts", &counts));
        } else {
          RETURN_IF_ERROR(b.Skip(bf, bw));
        }
      }
    } else if (kind == Kind::kExpHistogram && f == 14) {
      RETURN_IF_ERROR(ReadDouble(r, w, "zero_threshold", &p->zero_threshold));
    } else if (kind == Kind::kSummary && f == 6) {
      Reader q;
      RETURN_IF_ERROR(Sub(r, w, "quantile_values", &q));
      std::pair<double, double> qv{0, 0};
      while (!q.done()) {
        uint32_t qf = 0, qw = 0;
        RETURN_IF_ERROR(q.Tag(&qf, &qw));
        if (qf == 1 || qf == 2) {
          RETURN_IF_ERROR(ReadDouble(q, qw, qf == 1 ? "quantile" : "value", qf == 1 ? &qv.first : &qv.second));
        } else {
          RETURN_IF_ERROR(q.Skip(qf, qw));
        }
      }
      p->quantiles.push_back(qv);
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));  // exemplars, min, max
    }
  }
  if (kind == Kind::kSummary) p->has_sum = true;
  return Status::OK();
}

// Gauge, Sum, Histogram, ExponentialHistogram or Summary.
Status ReadData(Reader r, Metric* m) {
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f == 1) {
      Reader pr;
      RETURN_IF_ERROR(Sub(r, w, "data_points", &pr));
      m->points.emplace_back();
      RETURN_IF_ERROR(ReadPoint(pr, m->kind, &m->points.back()));
    } else if (f == 2 && m->kind != Kind::kGauge && m->kind != Kind::kSummary) {
      uint64_t v = 0;
      RETURN_IF_ERROR(ReadVarint(r, w, "aggregation_temporality", &v));
      m->temporality = static_cast<int>(v);
    } else if (f == 3 && m->kind == Kind::kSum) {
      uint64_t v = 0;
      RETURN_IF_ERROR(ReadVarint(r, w, "is_monotonic", &v));
      m->monotonic = v != 0;
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  return Status::OK();
}

Status ReadMetric(Reader r, Metric* m) {
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    Kind kind = Kind::kNone;
    switch (f) {
      case 1: RETURN_IF_ERROR(ReadString(r, w, "metric name", &m->name)); continue;
      case 3: RETURN_IF_ERROR(ReadString(r, w, "unit", &m->unit)); continue;
      case 5: kind = Kind::kGauge; break;
      case 7: kind = Kind::kSum; break;
      case 9: kind = Kind::kHistogram; break;
      case 10: kind = Kind::kExpHistogram; break;
      case 11: kind = Kind::kSummary; break;
      default: RETURN_IF_ERROR(r.Skip(f, w)); continue;
    }
    Reader d;
    RETURN_IF_ERROR(Sub(r, w, "metric data", &d));
    m->kind = kind;  // a oneof: the last one wins
    m->points.clear();
    m->temporality = kUnspecified;
    m->monotonic = false;
    RETURN_IF_ERROR(ReadData(d, m));
  }
  return Status::OK();
}

}  // namespace

Status OtlpBatch::ParseProto(std::string_view body, int64_t now_ms, const RequestLimits& limits, OtlpDeltas* deltas) {
  OtlpTranslator tr(this, now_ms, limits, deltas);
  Reader req(body, 0);
  RETURN_IF_ERROR(req.EachMessage(1, "resource_metrics", [&](Reader& rm) -> Status {
    // The resource first, wherever it is in the message.
    std::vector<Attr> attrs;
    Reader scan = rm;
    RETURN_IF_ERROR(scan.EachMessage(1, "resource", [&](Reader& res) -> Status {
      while (!res.done()) {
        uint32_t af = 0, aw = 0;
        RETURN_IF_ERROR(res.Tag(&af, &aw));
        if (af == 1) {
          RETURN_IF_ERROR(ReadAttr(res, aw, &attrs));
        } else {
          RETURN_IF_ERROR(res.Skip(af, aw));
        }
      }
      return Status::OK();
    }));
    tr.BeginResource(std::move(attrs));
    RETURN_IF_ERROR(rm.EachMessage(2, "scope_metrics", [&](Reader& sm) {
      return sm.EachMessage(2, "metric", [&](Reader& mr) -> Status {
        Metric m;
        RETURN_IF_ERROR(ReadMetric(mr, &m));
        return tr.AddMetric(m);
      });
    }));
    return tr.EndResource();
  }));
  stats_.histograms = hist_samples_.size();
  stats_.samples = samples_.size() + hist_samples_.size();
  stats_.series = series_.size();
  return Status::OK();
}

// ---- OTLP/JSON (protobuf's JSON mapping: lowerCamelCase names, snake_case
// accepted; 64-bit integers as strings or numbers; enums as numbers or names) ----

namespace {

using Json = nlohmann::json;

class JsonErr {
 public:
  static Status At(const std::string& path, std::string_view what) {
    return Status::InvalidArgument("json: " + path + ": " + std::string(what));
  }
};

// All of `s` read as a T (protobuf's JSON mapping writes 64-bit integers and
// may write doubles as strings).
template <typename T>
bool FromWholeString(const std::string& s, T* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

const Json* Field(const Json& obj, const char* camel, const char* snake) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(camel);
  if (it != obj.end()) return it->is_null() ? nullptr : &*it;
  it = obj.find(snake);
  if (it != obj.end()) return it->is_null() ? nullptr : &*it;
  return nullptr;
}

Status ArrayAt(const Json& obj, const char* camel, const char* snake, const std::string& path, const Json** out) {
  *out = Field(obj, camel, snake);
  if (*out != nullptr && !(*out)->is_array()) return JsonErr::At(path + "." + camel, "expected an array");
  return Status::OK();
}

Status U64(const Json* v, const std::string& path, uint64_t* out) {
  if (v == nullptr) return Status::OK();
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
    return Status::OK();
  }
  if (v->is_number_integer() && v->get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v->get<int64_t>());
    return Status::OK();
  }
  if (v->is_string() && FromWholeString(v->get_ref<const std::string&>(), out)) return Status::OK();
  return JsonErr::At(path, "expected an unsigned 64-bit integer (a number or a decimal string)");
}

Status I64(const Json* v, const std::string& path, int64_t* out) {
  if (v == nullptr) return Status::OK();
  if (v->is_number_integer()) {
    *out = v->get<int64_t>();
    return Status::OK();
  }
  if (v->is_string() && FromWholeString(v->get_ref<const std::string&>(), out)) return Status::OK();
  return JsonErr::At(path, "expected a 64-bit integer (a number or a decimal string)");
}

Status Double(const Json* v, const std::string& path, double* out) {
  if (v == nullptr) return Status::OK();
  if (v->is_number()) {
    *out = v->get<double>();
    return Status::OK();
  }
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (s == "NaN") return *out = std::nan(""), Status::OK();
    if (s == "Infinity") return *out = INFINITY, Status::OK();
    if (s == "-Infinity") return *out = -INFINITY, Status::OK();
    if (FromWholeString(s, out)) return Status::OK();
  }
  return JsonErr::At(path, "expected a number");
}

Status Str(const Json* v, const std::string& path, std::string* out) {
  if (v == nullptr) return Status::OK();
  if (!v->is_string()) return JsonErr::At(path, "expected a string");
  *out = v->get<std::string>();
  return Status::OK();
}

Status JsonAnyValue(const Json& v, const std::string& path, int depth, std::string* out, bool* is_string);

Status JsonComposite(const Json& items, bool kvlist, const std::string& path, int depth, std::string* out) {
  if (depth > 32) return JsonErr::At(path, "attribute values nested deeper than 32");
  if (!items.is_array()) return JsonErr::At(path, "expected an array");
  *out += kvlist ? '{' : '[';
  for (size_t i = 0; i < items.size(); i++) {
    const std::string ip = path + "[" + std::to_string(i) + "]";
    if (i > 0) *out += ',';
    std::string text;
    bool is_string = false;
    if (kvlist) {
      std::string key;
      RETURN_IF_ERROR(Str(Field(items[i], "key", "key"), ip + ".key", &key));
      AppendJsonString(out, key);
      *out += ':';
      const Json* val = Field(items[i], "value", "value");
      if (val != nullptr) RETURN_IF_ERROR(JsonAnyValue(*val, ip + ".value", depth + 1, &text, &is_string));
    } else {
      RETURN_IF_ERROR(JsonAnyValue(items[i], ip, depth + 1, &text, &is_string));
    }
    if (is_string) {
      AppendJsonString(out, text);
    } else {
      *out += text.empty() ? "null" : text;
    }
  }
  *out += kvlist ? '}' : ']';
  return Status::OK();
}

Status JsonAnyValue(const Json& v, const std::string& path, int depth, std::string* out, bool* is_string) {
  out->clear();
  *is_string = false;
  if (!v.is_object()) return JsonErr::At(path, "expected an AnyValue object");
  if (const Json* s = Field(v, "stringValue", "string_value")) {
    *is_string = true;
    return Str(s, path + ".stringValue", out);
  }
  if (const Json* b = Field(v, "boolValue", "bool_value")) {
    if (!b->is_boolean()) return JsonErr::At(path + ".boolValue", "expected true or false");
    *out = b->get<bool>() ? "true" : "false";
    return Status::OK();
  }
  if (const Json* i = Field(v, "intValue", "int_value")) {
    int64_t n = 0;
    RETURN_IF_ERROR(I64(i, path + ".intValue", &n));
    *out = std::to_string(n);
    return Status::OK();
  }
  if (const Json* d = Field(v, "doubleValue", "double_value")) {
    double x = 0;
    RETURN_IF_ERROR(Double(d, path + ".doubleValue", &x));
    *out = FormatGeneral(x);
    return Status::OK();
  }
  if (const Json* a = Field(v, "arrayValue", "array_value")) {
    const Json* values = Field(*a, "values", "values");
    return JsonComposite(values != nullptr ? *values : Json::array(), false, path + ".arrayValue.values", depth, out);
  }
  if (const Json* kv = Field(v, "kvlistValue", "kvlist_value")) {
    const Json* values = Field(*kv, "values", "values");
    return JsonComposite(values != nullptr ? *values : Json::array(), true, path + ".kvlistValue.values", depth, out);
  }
  if (const Json* by = Field(v, "bytesValue", "bytes_value")) {
    // Already base64 in JSON: kept as sent, as the protobuf path encodes it.
    return Str(by, path + ".bytesValue", out);
  }
  return Status::OK();
}

Status JsonAttrs(const Json& obj, const std::string& path, std::vector<Attr>* out) {
  const Json* arr = nullptr;
  RETURN_IF_ERROR(ArrayAt(obj, "attributes", "attributes", path, &arr));
  if (arr == nullptr) return Status::OK();
  for (size_t i = 0; i < arr->size(); i++) {
    const std::string ap = path + ".attributes[" + std::to_string(i) + "]";
    Attr a;
    RETURN_IF_ERROR(Str(Field((*arr)[i], "key", "key"), ap + ".key", &a.key));
    if (const Json* v = Field((*arr)[i], "value", "value")) {
      bool is_string = false;
      RETURN_IF_ERROR(JsonAnyValue(*v, ap + ".value", 0, &a.value, &is_string));
    }
    out->push_back(std::move(a));
  }
  return Status::OK();
}

Status JsonEnum(const Json* v, const std::string& path, std::initializer_list<std::string_view> names, int* out) {
  if (v == nullptr) return Status::OK();
  if (v->is_number_integer()) {
    *out = v->get<int>();
    return Status::OK();
  }
  if (v->is_string()) {
    int i = 0;
    for (std::string_view n : names) {
      if (v->get_ref<const std::string&>() == n) return *out = i, Status::OK();
      i++;
    }
  }
  return JsonErr::At(path, "expected an enum number or name");
}

template <typename T>
Status JsonList(const Json* arr, const std::string& path, std::vector<T>* out,
                Status (*one)(const Json*, const std::string&, T*)) {
  if (arr == nullptr) return Status::OK();
  if (!arr->is_array()) return JsonErr::At(path, "expected an array");
  for (size_t i = 0; i < arr->size(); i++) {
    T v{};
    RETURN_IF_ERROR(one(&(*arr)[i], path + "[" + std::to_string(i) + "]", &v));
    out->push_back(v);
  }
  return Status::OK();
}

Status JsonPoint(const Json& jp, Kind kind, const std::string& path, Point* p) {
  if (!jp.is_object()) return JsonErr::At(path, "expected an object");
  RETURN_IF_ERROR(JsonAttrs(jp, path, &p->attrs));
  RETURN_IF_ERROR(U64(Field(jp, "timeUnixNano", "time_unix_nano"), path + ".timeUnixNano", &p->time_ns));
  RETURN_IF_ERROR(U64(Field(jp, "startTimeUnixNano", "start_time_unix_nano"), path + ".startTimeUnixNano", &p->start_ns));
  uint64_t flags = 0;
  RETURN_IF_ERROR(U64(Field(jp, "flags", "flags"), path + ".flags", &flags));
  p->flags = static_cast<uint32_t>(flags);
  switch (kind) {
    case Kind::kGauge:
    case Kind::kSum:
      if (const Json* d = Field(jp, "asDouble", "as_double")) {
        RETURN_IF_ERROR(Double(d, path + ".asDouble", &p->value));
      } else if (const Json* i = Field(jp, "asInt", "as_int")) {
        int64_t n = 0;
        RETURN_IF_ERROR(I64(i, path + ".asInt", &n));
        p->value = static_cast<double>(n);
      }
      break;
    case Kind::kHistogram:
    case Kind::kExpHistogram:
    case Kind::kSummary: {
      RETURN_IF_ERROR(U64(Field(jp, "count", "count"), path + ".count", &p->count));
      const Json* sum = Field(jp, "sum", "sum");
      p->has_sum = sum != nullptr || kind == Kind::kSummary;
      RETURN_IF_ERROR(Double(sum, path + ".sum", &p->sum));
      if (kind == Kind::kHistogram) {
        RETURN_IF_ERROR(JsonList<uint64_t>(Field(jp, "bucketCounts", "bucket_counts"), path + ".bucketCounts",
                                           &p->bucket_counts, U64));
        RETURN_IF_ERROR(JsonList<double>(Field(jp, "explicitBounds", "explicit_bounds"), path + ".explicitBounds",
                                         &p->bounds, Double));
      } else if (kind == Kind::kExpHistogram) {
        int64_t scale = 0;
        RETURN_IF_ERROR(I64(Field(jp, "scale", "scale"), path + ".scale", &scale));
        if (scale < INT32_MIN || scale > INT32_MAX) return JsonErr::At(path + ".scale", "out of range");
        p->scale = static_cast<int32_t>(scale);
        RETURN_IF_ERROR(U64(Field(jp, "zeroCount", "zero_count"), path + ".zeroCount", &p->zero_count));
        RETURN_IF_ERROR(Double(Field(jp, "zeroThreshold", "zero_threshold"), path + ".zeroThreshold", &p->zero_threshold));
        for (bool positive : {true, false}) {
          const Json* b = Field(jp, positive ? "positive" : "negative", positive ? "positive" : "negative");
          if (b == nullptr) continue;
          const std::string bp = path + (positive ? ".positive" : ".negative");
          int64_t offset = 0;
          RETURN_IF_ERROR(I64(Field(*b, "offset", "offset"), bp + ".offset", &offset));
          if (offset < INT32_MIN || offset > INT32_MAX) return JsonErr::At(bp + ".offset", "out of range");
          (positive ? p->offset : p->neg_offset) = static_cast<int32_t>(offset);
          RETURN_IF_ERROR(JsonList<uint64_t>(Field(*b, "bucketCounts", "bucket_counts"), bp + ".bucketCounts",
                                             positive ? &p->bucket_counts : &p->neg_counts, U64));
        }
      } else {
        const Json* qs = nullptr;
        RETURN_IF_ERROR(ArrayAt(jp, "quantileValues", "quantile_values", path, &qs));
        for (size_t i = 0; qs != nullptr && i < qs->size(); i++) {
          const std::string qp = path + ".quantileValues[" + std::to_string(i) + "]";
          std::pair<double, double> qv{0, 0};
          RETURN_IF_ERROR(Double(Field((*qs)[i], "quantile", "quantile"), qp + ".quantile", &qv.first));
          RETURN_IF_ERROR(Double(Field((*qs)[i], "value", "value"), qp + ".value", &qv.second));
          p->quantiles.push_back(qv);
        }
      }
      break;
    }
    case Kind::kNone:
      break;
  }
  return Status::OK();
}

Status JsonMetric(const Json& jm, const std::string& path, Metric* m) {
  if (!jm.is_object()) return JsonErr::At(path, "expected an object");
  RETURN_IF_ERROR(Str(Field(jm, "name", "name"), path + ".name", &m->name));
  RETURN_IF_ERROR(Str(Field(jm, "unit", "unit"), path + ".unit", &m->unit));
  static constexpr std::tuple<const char*, const char*, Kind> kKinds[] = {
      {"gauge", "gauge", Kind::kGauge},
      {"sum", "sum", Kind::kSum},
      {"histogram", "histogram", Kind::kHistogram},
      {"exponentialHistogram", "exponential_histogram", Kind::kExpHistogram},
      {"summary", "summary", Kind::kSummary}};
  for (auto [camel, snake, kind] : kKinds) {
    const Json* d = Field(jm, camel, snake);
    if (d == nullptr) continue;
    const std::string dp = path + "." + camel;
    if (!d->is_object()) return JsonErr::At(dp, "expected an object");
    m->kind = kind;
    RETURN_IF_ERROR(JsonEnum(Field(*d, "aggregationTemporality", "aggregation_temporality"), dp + ".aggregationTemporality",
                             {"AGGREGATION_TEMPORALITY_UNSPECIFIED", "AGGREGATION_TEMPORALITY_DELTA",
                              "AGGREGATION_TEMPORALITY_CUMULATIVE"},
                             &m->temporality));
    if (const Json* mono = Field(*d, "isMonotonic", "is_monotonic")) {
      if (!mono->is_boolean()) return JsonErr::At(dp + ".isMonotonic", "expected true or false");
      m->monotonic = mono->get<bool>();
    }
    const Json* pts = nullptr;
    RETURN_IF_ERROR(ArrayAt(*d, "dataPoints", "data_points", dp, &pts));
    for (size_t i = 0; pts != nullptr && i < pts->size(); i++) {
      m->points.emplace_back();
      RETURN_IF_ERROR(JsonPoint((*pts)[i], kind, dp + ".dataPoints[" + std::to_string(i) + "]", &m->points.back()));
    }
    break;
  }
  return Status::OK();
}

}  // namespace

Status OtlpBatch::ParseJson(std::string_view body, int64_t now_ms, const RequestLimits& limits, OtlpDeltas* deltas) {
  RETURN_IF_ERROR(CheckJsonDepth(body));
  Json doc = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Status::InvalidArgument("json: not a JSON document");
  if (!doc.is_object()) return Status::InvalidArgument("json: expected an ExportMetricsServiceRequest object");
  OtlpTranslator tr(this, now_ms, limits, deltas);
  const Json* rms = nullptr;
  RETURN_IF_ERROR(ArrayAt(doc, "resourceMetrics", "resource_metrics", "$", &rms));
  for (size_t r = 0; rms != nullptr && r < rms->size(); r++) {
    const Json& rm = (*rms)[r];
    const std::string rp = "resourceMetrics[" + std::to_string(r) + "]";
    if (!rm.is_object()) return JsonErr::At(rp, "expected an object");
    std::vector<Attr> attrs;
    if (const Json* res = Field(rm, "resource", "resource")) RETURN_IF_ERROR(JsonAttrs(*res, rp + ".resource", &attrs));
    tr.BeginResource(std::move(attrs));
    const Json* sms = nullptr;
    RETURN_IF_ERROR(ArrayAt(rm, "scopeMetrics", "scope_metrics", rp, &sms));
    for (size_t s = 0; sms != nullptr && s < sms->size(); s++) {
      const std::string sp = rp + ".scopeMetrics[" + std::to_string(s) + "]";
      const Json* ms = nullptr;
      RETURN_IF_ERROR(ArrayAt((*sms)[s], "metrics", "metrics", sp, &ms));
      for (size_t i = 0; ms != nullptr && i < ms->size(); i++) {
        Metric m;
        RETURN_IF_ERROR(JsonMetric((*ms)[i], sp + ".metrics[" + std::to_string(i) + "]", &m));
        RETURN_IF_ERROR(tr.AddMetric(m));
      }
    }
    RETURN_IF_ERROR(tr.EndResource());
  }
  stats_.histograms = hist_samples_.size();
  stats_.samples = samples_.size() + hist_samples_.size();
  stats_.series = series_.size();
  return Status::OK();
}

// ---- appending ----

Status OtlpBatch::AppendTo(storage::Appender* app) {
  AppendCounts counts;
  return AppendBatch(app, &series_, samples_, hist_samples_, &refusals_, &counts);
}

void OtlpBatch::Committed(int64_t now_ms) {
  if (!delta_lock_.held()) return;
  deltas_->AssertHeld();
  deltas_->Apply(pending_, hist_pending_, now_ms);
  pending_.clear();
  hist_pending_.clear();
  delta_lock_.Release();
}

bool OtlpDeltas::Add(const std::string& key, int64_t t, int64_t start_ms, double delta, std::vector<Update>* pending,
                     double* total, int64_t* st) {
  // This request's own earlier point of the series wins over the stored one.
  for (auto it = pending->rbegin(); it != pending->rend(); ++it) {
    if (it->key != key) continue;
    if (t <= it->t) return false;
    *total = it->total + delta;
    *st = it->st;
    pending->push_back({key, t, *total, *st});
    return true;
  }
  double base = 0;
  *st = start_ms;  // a new running total starts with this delta
  if (auto it = totals_.find(key); it != totals_.end()) {
    if (t <= it->second.t) return false;
    base = it->second.total;
    *st = it->second.st;
  }
  *total = base + delta;
  pending->push_back({key, t, *total, *st});
  return true;
}

bool OtlpDeltas::AddHistogram(const std::string& key, int64_t t, int64_t start_ms, const model::FloatHistogram& delta,
                              std::vector<HistUpdate>* pending, model::FloatHistogram* total, int64_t* st) {
  const model::FloatHistogram* base = nullptr;
  *st = start_ms;  // a new running total starts with this delta
  for (auto it = pending->rbegin(); it != pending->rend() && base == nullptr; ++it) {
    if (it->key != key) continue;
    if (t <= it->t) return false;
    base = &it->total;
    *st = it->st;
  }
  if (base == nullptr) {
    if (auto it = hist_totals_.find(key); it != hist_totals_.end()) {
      if (t <= it->second.t) return false;
      base = &it->second.total;
      *st = it->second.st;
    }
  }
  model::FloatHistogram sum = delta;
  if (base != nullptr) {
    sum = *base;
    if (!sum.Add(delta).ok()) return false;
    sum.counter_reset_hint = model::CounterResetHint::kUnknown;
  }
  *total = sum;
  pending->push_back({key, t, std::move(sum), *st});
  return true;
}

namespace {

// Forgets series not written for an hour (by their points' time), and
// beyond the bound the oldest half.
template <typename Map>
void Sweep(Map* totals, int64_t now_ms) {
  std::erase_if(*totals, [&](const auto& kv) { return now_ms - kv.second.t > OtlpDeltas::kForgetAfterMs; });
  if (totals->size() <= OtlpDeltas::kMaxEntries) return;
  std::vector<int64_t> ts;
  ts.reserve(totals->size());
  for (const auto& kv : *totals) ts.push_back(kv.second.t);
  std::nth_element(ts.begin(), ts.begin() + static_cast<ptrdiff_t>(ts.size() / 2), ts.end());
  const int64_t cut = ts[ts.size() / 2];
  std::erase_if(*totals, [&](const auto& kv) { return kv.second.t < cut; });
}

}  // namespace

void OtlpDeltas::Apply(const std::vector<Update>& pending, const std::vector<HistUpdate>& hist_pending, int64_t now_ms) {
  for (const Update& u : pending) totals_[u.key] = Entry{u.t, u.total, u.st};
  for (const HistUpdate& u : hist_pending) hist_totals_[u.key] = HistEntry{u.t, u.total, u.st};
  if (now_ms - last_sweep_ms_ < 60 * 1000 && totals_.size() <= kMaxEntries && hist_totals_.size() <= kMaxEntries) return;
  last_sweep_ms_ = now_ms;
  Sweep(&totals_, now_ms);
  Sweep(&hist_totals_, now_ms);
}

// ---- responses ----

std::string OtlpResponseProto(const OtlpStats& stats) {
  if (stats.rejected_points == 0) return "";
  std::string partial;
  PutVarint32(&partial, (1 << 3) | kVarint);  // rejected_data_points
  PutVarint64(&partial, stats.rejected_points);
  PutVarint32(&partial, (2 << 3) | kLen);  // error_message
  PutVarint64(&partial, stats.first_rejection.size());
  partial += stats.first_rejection;
  std::string out;
  PutVarint32(&out, (1 << 3) | kLen);  // partial_success
  PutVarint64(&out, partial.size());
  return out + partial;
}

std::string OtlpResponseJson(const OtlpStats& stats) {
  if (stats.rejected_points == 0) return "{}";
  std::string out = R"({"partialSuccess":{"rejectedDataPoints":")" + std::to_string(stats.rejected_points) +
                    R"(","errorMessage":)";
  AppendJsonString(&out, stats.first_rejection);
  out += "}}";
  return out;
}

}  // namespace trainwatch::ingest
