#include "ingest/otlp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "ingest/proto_enc_test_util.h"
#include "model/sample.h"

namespace trainwatch::ingest {
namespace {

using Type = OtlpMetricType;

// Prometheus 3's default translation (otlptranslator, UnderscoreEscapingWithSuffixes).
TEST(OtlpNames, MetricNamesAsPrometheus3) {
  struct Case {
    const char* name;
    const char* unit;
    Type type;
    const char* want;
  } cases[] = {
      {"system.filesystem.usage", "By", Type::kGauge, "system_filesystem_usage_bytes"},
      {"http.server.request.duration", "s", Type::kHistogram, "http_server_request_duration_seconds"},
      {"requests", "1", Type::kMonotonicCounter, "requests_total"},
      {"requests.total", "", Type::kMonotonicCounter, "requests_total"},
      {"cpu.utilization", "1", Type::kGauge, "cpu_utilization_ratio"},
      {"queue.size", "1", Type::kNonMonotonicCounter, "queue_size"},
      {"network.io", "By/s", Type::kGauge, "network_io_bytes_per_second"},
      {"speed", "km/h", Type::kGauge, "speed_km_per_hour"},
      {"packets", "{packet}", Type::kMonotonicCounter, "packets_total"},
      {"rate", "{packet}/s", Type::kGauge, "rate_per_second"},
      {"memory", "MiBy", Type::kGauge, "memory_mebibytes"},
      {"duration_seconds", "s", Type::kHistogram, "duration_seconds"},
      {"temp", "Cel", Type::kGauge, "temp_celsius"},
      {"2xx.count", "", Type::kGauge, "_2xx_count"},
      {"a__b..c", "", Type::kGauge, "a_b_c"},
      {"ns:metric", "", Type::kGauge, "ns:metric"},
      {"gpu.util", "%", Type::kGauge, "gpu_util_percent"},
      {"...", "", Type::kGauge, ""},
      {"", "s", Type::kGauge, "seconds"},
  };
  for (const Case& c : cases) EXPECT_EQ(OtlpMetricName(c.name, c.unit, c.type), c.want) << c.name << " " << c.unit;
}

TEST(OtlpNames, LabelNames) {
  EXPECT_EQ(OtlpLabelName("service.name"), "service_name");
  EXPECT_EQ(OtlpLabelName("k8s.pod-name"), "k8s_pod_name");
  EXPECT_EQ(OtlpLabelName("2xx"), "key_2xx");
  EXPECT_EQ(OtlpLabelName("_private"), "key_private");
  EXPECT_EQ(OtlpLabelName("__reserved"), "__reserved");
  EXPECT_EQ(OtlpLabelName("a..b"), "a__b");  // multiple underscores kept
  EXPECT_EQ(OtlpLabelName(""), "");
  EXPECT_EQ(OtlpLabelName("..."), "");
}

// ---- protobuf builders, field numbers of opentelemetry-proto ----

std::string AnyString(std::string_view s) { return Enc().Len(1, s).b; }
std::string KeyValue(std::string_view k, const std::string& any) { return Enc().Len(1, k).Len(2, any).b; }
std::string Attr(std::string_view k, std::string_view v) { return KeyValue(k, AnyString(v)); }

constexpr uint64_t kT0 = 1'796'000'000'000'000'000ull;  // ns
constexpr int64_t kT0Ms = 1'796'000'000'000;

std::string NumberPoint(double v, uint64_t t_ns, std::vector<std::string> attrs = {}, uint32_t flags = 0) {
  Enc e;
  for (const auto& a : attrs) e.Len(7, a);
  e.Fixed64(2, t_ns - 1'000'000'000).Fixed64(3, t_ns).Double(4, v);
  if (flags != 0) e.Tag(8, 0).Varint(flags);
  return e.b;
}

std::string IntPoint(int64_t v, uint64_t t_ns) { return Enc().Fixed64(3, t_ns).Fixed64(6, static_cast<uint64_t>(v)).b; }

std::string Metric(std::string_view name, std::string_view unit, uint32_t data_field, const std::string& data) {
  return Enc().Len(1, name).Len(2, "a description").Len(3, unit).Len(data_field, data).b;
}

std::string Gauge(const std::vector<std::string>& points) {
  Enc e;
  for (const auto& p : points) e.Len(1, p);
  return e.b;
}

std::string Sum(const std::vector<std::string>& points, int temporality, bool monotonic) {
  Enc e;
  for (const auto& p : points) e.Len(1, p);
  e.Tag(2, 0).Varint(temporality).Tag(3, 0).Varint(monotonic ? 1 : 0);
  return e.b;
}

std::string Request(const std::vector<std::string>& resource_attrs, const std::vector<std::string>& metrics) {
  Enc res;
  for (const auto& a : resource_attrs) res.Len(1, a);
  Enc scope;
  scope.Len(1, Enc().Len(1, "trainer.lib").Len(2, "1.0").b);
  for (const auto& m : metrics) scope.Len(2, m);
  Enc rm;
  rm.Len(1, res.b).Len(2, scope.b);
  return Enc().Len(1, rm.b).b;
}

// What a batch would store: {name="value", ...} in label order -> [(t, v)].
using Stored = std::map<std::string, std::vector<std::pair<int64_t, double>>>;

// Native histograms a batch would store, by labels as in Stored.
using StoredH = std::map<std::string, std::vector<std::pair<int64_t, model::FloatHistogram>>>;

// The start timestamp of each value (float or histogram) a batch would
// store, by labels as in Stored; 0 for values appended without one.
using StoredST = std::map<std::string, std::vector<int64_t>>;

class Capture : public storage::Appender {
 public:
  explicit Capture(Stored* out, StoredH* hout = nullptr, StoredST* sts = nullptr) : out_(out), hout_(hout), sts_(sts) {}
  Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& labels, int64_t t, double v) override {
    return AppendST(ref, labels, 0, t, v);
  }
  Result<storage::SeriesRef> AppendST(storage::SeriesRef, const model::Labels& labels, int64_t st, int64_t t,
                                      double v) override {
    (*out_)[Key(labels)].push_back({t, v});
    if (sts_ != nullptr) (*sts_)[Key(labels)].push_back(st);
    return storage::SeriesRef{0};
  }
  Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                             const model::FloatHistogram& h) override {
    return AppendHistogramST(ref, labels, 0, t, h);
  }
  Result<storage::SeriesRef> AppendHistogramST(storage::SeriesRef, const model::Labels& labels, int64_t st, int64_t t,
                                               const model::FloatHistogram& h) override {
    EXPECT_NE(hout_, nullptr) << "unexpected histogram for " << Key(labels);
    if (hout_ != nullptr) (*hout_)[Key(labels)].push_back({t, h});
    if (sts_ != nullptr) (*sts_)[Key(labels)].push_back(st);
    return storage::SeriesRef{0};
  }
  static std::string Key(const model::Labels& labels) {
    std::string key = "{";
    for (const auto& l : labels) {
      if (key.size() > 1) key += ", ";
      key += l.name + "=\"";
      for (char c : l.value) key += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
      key += '"';
    }
    return key + "}";
  }
  Status Commit() override { return Status::OK(); }
  void Rollback() override {}

 private:
  Stored* out_;
  StoredH* hout_;
  StoredST* sts_;
};

// A native histogram's layout as stored, spans uncompacted:
// "schema:S count:C sum:X zc:Z zt:T p:[offset/length ...][buckets] n:...".
std::string Layout(const model::FloatHistogram& h) {
  std::ostringstream o;
  o << "schema:" << h.schema << " count:" << h.count << " sum:" << h.sum << " zc:" << h.zero_count
    << " zt:" << h.zero_threshold;
  auto side = [&](const char* name, const std::vector<model::Span>& spans, const std::vector<double>& buckets) {
    if (spans.empty() && buckets.empty()) return;
    o << " " << name << ":[";
    for (size_t i = 0; i < spans.size(); i++) o << (i > 0 ? " " : "") << spans[i].offset << "/" << spans[i].length;
    o << "][";
    for (size_t i = 0; i < buckets.size(); i++) o << (i > 0 ? " " : "") << buckets[i];
    o << "]";
  };
  side("p", h.positive_spans, h.positive_buckets);
  side("n", h.negative_spans, h.negative_buckets);
  return o.str();
}

Stored Store(OtlpBatch& b, StoredH* hs = nullptr, StoredST* sts = nullptr) {
  Stored s;
  Capture c(&s, hs, sts);
  EXPECT_TRUE(b.AppendTo(&c).ok());
  return s;
}

std::vector<std::string> Resource() {
  return {Attr("service.name", "trainer"), Attr("service.namespace", "ml"), Attr("service.instance.id", "node-1:0"),
          Attr("host.name", "node-1")};
}

TEST(OtlpProto, GaugesSumsAndResource) {
  const std::string body = Request(
      Resource(),
      {Metric("gpu.utilization", "1", 5, Gauge({NumberPoint(0.93, kT0, {Attr("gpu", "0")}), NumberPoint(0.5, kT0, {Attr("gpu", "1")})})),
       Metric("train.samples", "{sample}", 7, Sum({IntPoint(1000, kT0), IntPoint(2000, kT0 + 15'000'000'000)}, 2, true)),
       Metric("queue.depth", "", 7, Sum({NumberPoint(-3, kT0)}, 2, false))});
  OtlpBatch b;
  ASSERT_TRUE(b.ParseProto(body, 0, {}, nullptr).ok());
  EXPECT_EQ(b.stats().points, 5u);
  EXPECT_EQ(b.stats().rejected_points, 0u);
  Stored s = Store(b);
  const std::string id = R"(instance="node-1:0", job="ml/trainer")";
  EXPECT_EQ(s["{__name__=\"gpu_utilization_ratio\", gpu=\"0\", " + id + "}"], (std::vector<std::pair<int64_t, double>>{{kT0Ms, 0.93}}));
  EXPECT_EQ(s["{__name__=\"gpu_utilization_ratio\", gpu=\"1\", " + id + "}"].size(), 1u);
  EXPECT_EQ(s["{__name__=\"train_samples_total\", " + id + "}"],
            (std::vector<std::pair<int64_t, double>>{{kT0Ms, 1000}, {kT0Ms + 15000, 2000}}));
  EXPECT_EQ(s["{__name__=\"queue_depth\", " + id + "}"], (std::vector<std::pair<int64_t, double>>{{kT0Ms, -3}}));
  // The other resource attributes on target_info, at the first and last point.
  EXPECT_EQ(s["{__name__=\"target_info\", host_name=\"node-1\", " + id + "}"],
            (std::vector<std::pair<int64_t, double>>{{kT0Ms, 1}, {kT0Ms + 15000, 1}}));
  EXPECT_EQ(s.size(), 5u);
}

TEST(OtlpProto, HistogramsAndSummaries) {
  Enc hp;  // explicit bounds [0.1, 0.5], counts [1, 2, 3] (packed)
  hp.Len(9, Attr("phase", "fwd")).Fixed64(3, kT0).Fixed64(4, 6).Double(5, 2.5);
  {
    Enc counts, bounds;
    for (uint64_t c : {1, 2, 3}) for (int i = 0; i < 8; i++) counts.b += static_cast<char>((c >> (8 * i)) & 0xff);
    for (double d : {0.1, 0.5}) {
      uint64_t bits = std::bit_cast<uint64_t>(d);
      for (int i = 0; i < 8; i++) bounds.b += static_cast<char>((bits >> (8 * i)) & 0xff);
    }
    hp.Len(6, counts.b).Len(7, bounds.b);
  }
  Enc exp;  // scale 0: (1,2] x2, (2,4] x1; zero bucket 1; negative (-2,-1] x1
  exp.Fixed64(3, kT0).Fixed64(4, 5).Double(5, 4.5).Tag(6, 0).Varint(0).Fixed64(7, 1);
  exp.Len(8, Enc().Tag(1, 0).Varint(0).Len(2, Enc().Varint(2).Varint(1).b).b);
  exp.Len(9, Enc().Tag(1, 0).Varint(0).Len(2, Enc().Varint(1).b).b);
  Enc sp;
  sp.Fixed64(3, kT0).Fixed64(4, 10).Double(5, 3);
  sp.Len(6, Enc().Double(1, 0.5).Double(2, 0.2).b).Len(6, Enc().Double(1, 0.99).Double(2, 0.9).b);
  const std::string body = Request(
      {Attr("service.name", "trainer")},
      {Metric("step.duration", "s", 9, Enc().Len(1, hp.b).Tag(2, 0).Varint(2).b),
       Metric("batch.size", "", 10, Enc().Len(1, exp.b).Tag(2, 0).Varint(2).b),
       Metric("latency", "ms", 11, Enc().Len(1, sp.b).b)});
  OtlpBatch b;
  ASSERT_TRUE(b.ParseProto(body, 0, {}, nullptr).ok());
  EXPECT_EQ(b.stats().rejected_points, 0u) << b.stats().first_rejection;
  EXPECT_EQ(b.stats().histograms, 1u);
  StoredH hs;
  Stored s = Store(b, &hs);
  auto v = [&](const std::string& labels) {
    auto it = s.find(labels);
    return it == s.end() || it->second.size() != 1 ? NAN : it->second[0].second;
  };
  const std::string j = R"(job="trainer")";
  EXPECT_EQ(v("{__name__=\"step_duration_seconds_bucket\", " + j + ", le=\"0.1\", phase=\"fwd\"}"), 1);
  EXPECT_EQ(v("{__name__=\"step_duration_seconds_bucket\", " + j + ", le=\"0.5\", phase=\"fwd\"}"), 3);
  EXPECT_EQ(v("{__name__=\"step_duration_seconds_bucket\", " + j + ", le=\"+Inf\", phase=\"fwd\"}"), 6);
  EXPECT_EQ(v("{__name__=\"step_duration_seconds_count\", " + j + ", phase=\"fwd\"}"), 6);
  EXPECT_EQ(v("{__name__=\"step_duration_seconds_sum\", " + j + ", phase=\"fwd\"}"), 2.5);
  // Exponential: one native histogram, OTLP index i is Prometheus's i+1.
  ASSERT_EQ(hs.size(), 1u);
  const auto& h = hs["{__name__=\"batch_size\", " + j + "}"];
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].first, kT0Ms);
  EXPECT_EQ(Layout(h[0].second), "schema:0 count:5 sum:4.5 zc:1 zt:1e-128 p:[1/2][2 1] n:[1/1][1]");
  EXPECT_EQ(h[0].second.counter_reset_hint, model::CounterResetHint::kUnknown);
  EXPECT_EQ(s.count("{__name__=\"batch_size_count\", " + j + "}"), 0u);
  EXPECT_EQ(v("{__name__=\"latency_milliseconds\", " + j + ", quantile=\"0.5\"}"), 0.2);
  EXPECT_EQ(v("{__name__=\"latency_milliseconds\", " + j + ", quantile=\"0.99\"}"), 0.9);
  EXPECT_EQ(v("{__name__=\"latency_milliseconds_count\", " + j + "}"), 10);
  EXPECT_EQ(v("{__name__=\"latency_milliseconds_sum\", " + j + "}"), 3);
}

// Attributes whose names collide join their values in key order; non-string
// values as text; no-recorded-value points are staleness markers.
TEST(OtlpProto, AttributeValuesCollisionsAndStaleness) {
  std::string arr = Enc().Len(5, Enc().Len(1, AnyString("a")).Len(1, Enc().Tag(3, 0).Varint(7).b).b).b;
  const std::string body = Request(
      {}, {Metric("g", "", 5,
                  Gauge({NumberPoint(1, kT0,
                                     {Attr("a.b", "x"), Attr("a_b", "y"), KeyValue("ok", Enc().Tag(2, 0).Varint(1).b),
                                      KeyValue("n", Enc().Tag(3, 0).Varint(42).b), KeyValue("list", arr)}),
                         NumberPoint(0, kT0 + 1'000'000, {}, 1)}))});
  OtlpBatch b;
  ASSERT_TRUE(b.ParseProto(body, 0, {}, nullptr).ok());
  Stored s = Store(b);
  ASSERT_EQ(s.count(R"({__name__="g", a_b="x;y", list="[\"a\",7]", n="42", ok="true"})"), 1u) << s.begin()->first;
  ASSERT_EQ(s.count(R"({__name__="g"})"), 1u);
  EXPECT_TRUE(model::IsStaleNaN(s[R"({__name__="g"})"][0].second));
}

TEST(OtlpProto, BadPointsAreRejectedAndTheRestStored) {
  Enc hp;  // 2 counts for 2 bounds: one too few
  hp.Fixed64(3, kT0).Fixed64(4, 3).Fixed64(6, 1).Fixed64(6, 2).Double(7, 1).Double(7, 2);
  const std::string body = Request(
      {}, {Metric("bad.hist", "", 9, Enc().Len(1, hp.b).Tag(2, 0).Varint(2).b),
           Metric("no.temporality", "", 7, Sum({NumberPoint(1, kT0)}, 0, true)),
           Metric("good", "", 5, Gauge({NumberPoint(1, kT0)}))});
  OtlpBatch b;
  ASSERT_TRUE(b.ParseProto(body, 0, {}, nullptr).ok());
  EXPECT_EQ(b.stats().rejected_points, 2u);
  EXPECT_EQ(b.stats().first_rejection,
            "metric \"bad.hist\": 2 bucket counts for 2 explicit bounds (want one more count than bounds)");
  EXPECT_EQ(Store(b).size(), 1u);
  const std::string resp = OtlpResponseProto(b.stats());
  EXPECT_EQ(resp.substr(0, 1), "\x0a");
  EXPECT_NE(resp.find("bad.hist"), std::string::npos);
  EXPECT_EQ(OtlpResponseJson(b.stats()).substr(0, 48), R"({"partialSuccess":{"rejectedDataPoints":"2","err)");
  EXPECT_EQ(OtlpResponseProto(OtlpStats{}), "");
  EXPECT_EQ(OtlpResponseJson(OtlpStats{}), "{}");
}

TEST(OtlpProto, MalformedBodiesNameTheOffset) {
  OtlpBatch b;
  Status s = b.ParseProto("\x0a\x05\x01", 0, {}, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("offset"), std::string::npos) << s.message();
  // A metric whose gauge is a varint, not a message.
  std::string bad = Request({}, {Enc().Len(1, "g").Tag(5, 0).Varint(1).b});
  s = OtlpBatch().ParseProto(bad, 0, {}, nullptr);
  EXPECT_NE(s.message().find("metric data: wire type 0, want 2"), std::string::npos) << s.message();
}

TEST(OtlpProto, RequestLimits) {
  RequestLimits limits;
  limits.max_samples = 2;
  const std::string body = Request({}, {Metric("g", "", 5, Gauge({NumberPoint(1, kT0), NumberPoint(2, kT0 + 1'000'000),
                                                                   NumberPoint(3, kT0 + 2'000'000)}))});
  Status s = OtlpBatch().ParseProto(body, 0, limits, nullptr);
  EXPECT_NE(s.message().find("--ingest.max-samples-per-request"), std::string::npos) << s.message();
}

// Delta sums and histograms become cumulative; a point not after the last is
// rejected; nothing advances until the batch is committed.
TEST(OtlpDeltas, RunningTotals) {
  OtlpDeltas deltas;
  auto send = [&](std::vector<std::string> points, bool commit) {
    OtlpBatch b;
    EXPECT_TRUE(b.ParseProto(Request({}, {Metric("tokens", "", 7, Sum(points, 1, true))}), 0, {}, &deltas).ok());
    Stored s = Store(b);
    if (commit) b.Committed(kT0Ms);
    return std::make_pair(s, b.stats().rejected_points);
  };
  auto [s1, r1] = send({NumberPoint(5, kT0), NumberPoint(3, kT0 + 1'000'000'000)}, true);
  EXPECT_EQ(s1[R"({__name__="tokens_total"})"], (std::vector<std::pair<int64_t, double>>{{kT0Ms, 5}, {kT0Ms + 1000, 8}}));
  auto [s2, r2] = send({NumberPoint(10, kT0 + 2'000'000'000)}, false);  // not committed: forgotten
  EXPECT_EQ(s2[R"({__name__="tokens_total"})"][0].second, 18);
  auto [s3, r3] = send({NumberPoint(1, kT0 + 3'000'000'000), NumberPoint(1, kT0)}, true);
  EXPECT_EQ(s3[R"({__name__="tokens_total"})"], (std::vector<std::pair<int64_t, double>>{{kT0Ms + 3000, 9}}));
  EXPECT_EQ(r3, 1u);
  EXPECT_EQ(deltas.size(), 1u);
}

std::string ExpPoint(uint64_t t_ns, int32_t scale, int32_t offset, const std::vector<uint64_t>& counts, uint64_t count,
                     const double* sum, uint32_t flags = 0) {
  auto zz = [](int32_t v) { return (static_cast<uint64_t>(static_cast<uint32_t>(v)) << 1) ^ (v < 0 ? ~uint64_t{0} : 0); };
  Enc e;
  e.Fixed64(3, t_ns).Fixed64(4, count);
  if (sum != nullptr) e.Double(5, *sum);
  e.Tag(6, 0).Varint(zz(scale) & 0xffffffffu);
  Enc packed;
  for (uint64_t c : counts) packed.Varint(c);
  e.Len(8, Enc().Tag(1, 0).Varint(zz(offset) & 0xffffffffu).Len(2, packed.b).b);
  if (flags != 0) e.Tag(10, 0).Varint(flags);
  return e.b;
}

std::string ExpHist(const std::vector<std::string>& points, int temporality) {
  Enc e;
  for (const auto& p : points) e.Len(1, p);
  return e.Tag(2, 0).Varint(temporality).b;
}

// Scales above 8 merge 2^(scale-8) buckets; gaps over 2 start a new span;
// scales below -4 are rejected; no sum is 0; no recorded value is stale.
TEST(OtlpProto, ExponentialHistogramLayouts) {
  const double sum = 7;
  const std::string body = Request(
      {}, {Metric("down", "", 10, ExpHist({ExpPoint(kT0, 10, -3, {1, 1, 1, 1, 1}, 5, &sum)}, 2)),
           Metric("gaps", "", 10, ExpHist({ExpPoint(kT0, 0, 0, {1, 0, 0, 0, 0, 2}, 3, nullptr)}, 2)),
           Metric("small.gap", "", 10, ExpHist({ExpPoint(kT0, -4, -2, {1, 0, 0, 2, 0}, 3, &sum)}, 2)),
           Metric("coarse", "", 10, ExpHist({ExpPoint(kT0, -5, 0, {1}, 1, &sum)}, 2)),
           Metric("stale", "", 10, ExpHist({ExpPoint(kT0, 0, 0, {1}, 1, &sum, 1)}, 2)),
           Metric("huge.scale", "", 10, ExpHist({ExpPoint(kT0, 100, 5, {1, 2}, 3, &sum)}, 2))});
  OtlpBatch b;
  ASSERT_TRUE(b.ParseProto(body, 0, {}, nullptr).ok());
  EXPECT_EQ(b.stats().rejected_points, 1u);
  EXPECT_EQ(b.stats().first_rejection,
            "metric \"coarse\": cannot convert exponential to native histogram: scale must be >= -4, was -5");
  StoredH hs;
  Store(b, &hs);
  auto expr = [&](const std::string& name) {
    auto it = hs.find("{__name__=\"" + name + "\"}");
    return it == hs.end() || it->second.size() != 1 ? "missing" : Layout(it->second[0].second);
  };
  // Indexes (-3..1 >> 2) + 1: 0,0,0,1,1.
  EXPECT_EQ(expr("down"), "schema:8 count:5 sum:7 zc:0 zt:1e-128 p:[0/2][3 2]");
  EXPECT_EQ(expr("gaps"), "schema:0 count:3 sum:0 zc:0 zt:1e-128 p:[1/1 4/1][1 2]");
  // As Go's convertBucketsLayout: gaps of 2 filled, the last bucket kept empty.
  EXPECT_EQ(expr("small_gap"), "schema:-4 count:3 sum:7 zc:0 zt:1e-128 p:[-1/5][1 0 0 2 0]");
  EXPECT_EQ(expr("huge_scale"), "schema:8 count:3 sum:7 zc:0 zt:1e-128 p:[1/1][3]");
  ASSERT_EQ(hs.count(R"({__name__="stale"})"), 1u);
  EXPECT_TRUE(model::IsStaleNaN(hs[R"({__name__="stale"})"][0].second.sum));
}

// Delta exponential histograms are summed into a cumulative one per series.
TEST(OtlpDeltas, ExponentialHistogramRunningTotals) {
  OtlpDeltas deltas;
  const double sum = 1;
  auto send = [&](std::vector<std::string> points) {
    OtlpBatch b;
    EXPECT_TRUE(b.ParseProto(Request({}, {Metric("lat", "", 10, ExpHist(points, 1))}), 0, {}, &deltas).ok());
    StoredH hs;
    Store(b, &hs);
    b.Committed(kT0Ms);
    return std::make_pair(hs[R"({__name__="lat"})"], b.stats().rejected_points);
  };
  auto [h1, r1] = send({ExpPoint(kT0, 1, 0, {1, 1}, 2, &sum), ExpPoint(kT0 + 1'000'000'000, 0, 1, {3}, 3, &sum)});
  ASSERT_EQ(h1.size(), 2u);
  EXPECT_EQ(r1, 0u);
  EXPECT_EQ(h1[0].second.TestExpression(), "{{schema:1 count:2 sum:1 z_bucket_w:1e-128 offset:1 buckets:[1 1]}}");
  // Scale 1 + scale 0: the sum at scale 0; (1,2] holds 2, (2,4] 3.
  EXPECT_EQ(h1[1].second.TestExpression(), "{{count:5 sum:2 z_bucket_w:1e-128 offset:1 buckets:[2 3]}}");
  auto [h2, r2] = send({ExpPoint(kT0, 0, 0, {1}, 1, &sum), ExpPoint(kT0 + 2'000'000'000, 0, 0, {1}, 1, &sum)});
  EXPECT_EQ(r2, 1u);
  ASSERT_EQ(h2.size(), 1u);
  EXPECT_EQ(h2[0].second.TestExpression(), "{{count:6 sum:3 z_bucket_w:1e-128 offset:1 buckets:[3 3]}}");
  EXPECT_EQ(deltas.size(), 1u);
}

// start_time_unix_nano is the start timestamp (ms) of every series of a
// cumulative sum, histogram, exponential histogram or summary point, as
// Prometheus 3's otlptranslator passes it (for gauges too); target_info gets
// none, nor do points without one.
TEST(OtlpProto, StartTimestampsPerSeries) {
  const uint64_t start = kT0 - 60'000'000'123ull;  // ns; the ms are truncated
  const int64_t start_ms = kT0Ms - 60'001;
  Enc hp;  // explicit bounds [0.1], counts [1, 2]
  hp.Fixed64(2, start).Fixed64(3, kT0).Fixed64(4, 3).Double(5, 1.5).Fixed64(6, 1).Fixed64(6, 2).Double(7, 0.1);
  Enc exp;
  exp.Fixed64(2, start).Fixed64(3, kT0).Fixed64(4, 1).Double(5, 1.5).Tag(6, 0).Varint(0);
  exp.Len(8, Enc().Tag(1, 0).Varint(0).Len(2, Enc().Varint(1).b).b);
  Enc sp;
  sp.Fixed64(2, start).Fixed64(3, kT0).Fixed64(4, 4).Double(5, 2).Len(6, Enc().Double(1, 0.5).Double(2, 0.4).b);
  Enc no_start;  // a cumulative histogram point without start_time_unix_nano
  no_start.Fixed64(3, kT0).Fixed64(4, 1).Double(5, 1).Fixed64(6, 1);
  const std::string body = Request(
      {Attr("service.name", "trainer"), Attr("host.name", "node-1")},
      {Metric("gpu.temp", "Cel", 5, Gauge({NumberPoint(70, kT0)})),  // a gauge's start time is kept too
       Metric("steps", "", 7, Sum({NumberPoint(10, kT0), NumberPoint(0, kT0 + 1'000'000'000, {}, 1)}, 2, true)),
       Metric("queue", "", 7, Sum({NumberPoint(3, kT0)}, 2, false)),
       Metric("tokens", "", 7, Sum({IntPoint(5, kT0)}, 2, true)),
       Metric("step.time", "s", 9, Enc().Len(1, hp.b).Tag(2, 0).Varint(2).b),
       Metric("no.start", "", 9, Enc().Len(1, no_start.b).Tag(2, 0).Varint(2).b),
       Metric("batch", "", 10, Enc().Len(1, exp.b).Tag(2, 0).Varint(2).b),
       Metric("lat", "", 11, Enc().Len(1, sp.b).b)});
  OtlpBatch b;
  ASSERT_TRUE(b.ParseProto(body, 0, {}, nullptr).ok());
  EXPECT_EQ(b.stats().rejected_points, 0u) << b.stats().first_rejection;
  StoredH hs;
  StoredST sts;
  Store(b, &hs, &sts);
  const int64_t one = kT0Ms - 1000;  // NumberPoint's start: a second before its time
  const std::string j = R"(job="trainer")";
  StoredST want = {
      {"{__name__=\"gpu_temp_celsius\", " + j + "}", {one}},
      {"{__name__=\"steps_total\", " + j + "}", {one, kT0Ms}},  // the stale marker too, as Prometheus
      {"{__name__=\"queue\", " + j + "}", {one}},
      {"{__name__=\"tokens_total\", " + j + "}", {0}},
      {"{__name__=\"step_time_seconds_bucket\", " + j + ", le=\"0.1\"}", {start_ms}},
      {"{__name__=\"step_time_seconds_bucket\", " + j + ", le=\"+Inf\"}", {start_ms}},
      {"{__name__=\"step_time_seconds_count\", " + j + "}", {start_ms}},
      {"{__name__=\"step_time_seconds_sum\", " + j + "}", {start_ms}},
      {"{__name__=\"no_start_bucket\", " + j + ", le=\"+Inf\"}", {0}},
      {"{__name__=\"no_start_count\", " + j + "}", {0}},
      {"{__name__=\"no_start_sum\", " + j + "}", {0}},
      {"{__name__=\"batch\", " + j + "}", {start_ms}},
      {"{__name__=\"lat\", " + j + ", quantile=\"0.5\"}", {start_ms}},
      {"{__name__=\"lat_count\", " + j + "}", {start_ms}},
      {"{__name__=\"lat_sum\", " + j + "}", {start_ms}},
      {"{__name__=\"target_info\", host_name=\"node-1\", " + j + "}", {0, 0}},
  };
  EXPECT_EQ(sts, want);
  EXPECT_EQ(hs.size(), 1u);
}

// A delta series made cumulative starts where its running total started:
// the start time of the first delta folded in, kept across requests; a
// rejected or uncommitted point changes nothing.
TEST(OtlpDeltas, StartTimestampIsTheRunningTotalsStart) {
  OtlpDeltas deltas;
  auto send = [&](std::vector<std::string> points, bool commit) {
    OtlpBatch b;
    EXPECT_TRUE(b.ParseProto(Request({}, {Metric("tokens", "", 7, Sum(points, 1, true))}), 0, {}, &deltas).ok());
    StoredST sts;
    Store(b, nullptr, &sts);
    if (commit) b.Committed(kT0Ms);
    return sts[R"({__name__="tokens_total"})"];
  };
  const uint64_t s = 1'000'000'000;
  // NumberPoint's window is the second before its time: the first starts at kT0 - 1 s.
  EXPECT_EQ(send({NumberPoint(5, kT0), NumberPoint(3, kT0 + s)}, true), (std::vector<int64_t>{kT0Ms - 1000, kT0Ms - 1000}));
  EXPECT_EQ(send({NumberPoint(1, kT0 + 2 * s)}, false), (std::vector<int64_t>{kT0Ms - 1000}));
  EXPECT_EQ(send({NumberPoint(1, kT0 + 3 * s), NumberPoint(0, kT0 + 4 * s, {}, 1)}, true),
            (std::vector<int64_t>{kT0Ms - 1000, 0}));  // a stale marker has no running total
  // A delta without a start time starts a total of unknown start.
  OtlpDeltas fresh;
  OtlpBatch b;
  ASSERT_TRUE(b.ParseProto(Request({}, {Metric("n", "", 7, Sum({IntPoint(1, kT0), IntPoint(2, kT0 + s)}, 1, true))}), 0,
                           {}, &fresh)
                  .ok());
  StoredST sts;
  Store(b, nullptr, &sts);
  EXPECT_EQ(sts[R"({__name__="n_total"})"], (std::vector<int64_t>{0, 0}));

  // Histograms: each bucket series has its own total; a bucket that first
  // appears later starts then.
  OtlpDeltas hd;
  auto hist = [&](uint64_t t_ns, std::vector<double> bounds, std::vector<uint64_t> counts) {
    Enc p;
    p.Fixed64(2, t_ns - s).Fixed64(3, t_ns).Fixed64(4, std::accumulate(counts.begin(), counts.end(), uint64_t{0})).Double(5, 1);
    for (uint64_t c : counts) p.Fixed64(6, c);
    for (double d : bounds) p.Double(7, d);
    OtlpBatch hb;
    EXPECT_TRUE(hb.ParseProto(Request({}, {Metric("h", "", 9, Enc().Len(1, p.b).Tag(2, 0).Varint(1).b)}), 0, {}, &hd).ok());
    StoredST hsts;
    Store(hb, nullptr, &hsts);
    hb.Committed(kT0Ms);
    return hsts;
  };
  hist(kT0, {}, {1});
  StoredST h2 = hist(kT0 + 5 * s, {0.5}, {1, 1});
  EXPECT_EQ(h2[R"({__name__="h_count"})"], (std::vector<int64_t>{kT0Ms - 1000}));
  EXPECT_EQ(h2[R"({__name__="h_bucket", le="+Inf"})"], (std::vector<int64_t>{kT0Ms - 1000}));
  EXPECT_EQ(h2[R"({__name__="h_bucket", le="0.5"})"], (std::vector<int64_t>{kT0Ms + 4000}));
}

// Delta exponential histograms: the start of the running total too.
TEST(OtlpDeltas, ExponentialHistogramStartTimestamps) {
  OtlpDeltas deltas;
  const double sum = 1;
  auto point = [&](uint64_t t_ns, uint64_t start_ns) {
    std::string p = ExpPoint(t_ns, 0, 0, {1}, 1, &sum);
    return Enc().Fixed64(2, start_ns).b + p;
  };
  OtlpBatch b;
  ASSERT_TRUE(b.ParseProto(Request({}, {Metric("lat", "", 10, ExpHist({point(kT0, kT0 - 5'000'000'000),
                                                                        point(kT0 + 1'000'000'000, kT0)}, 1))}),
                           0, {}, &deltas)
                  .ok());
  StoredH hs;
  StoredST sts;
  Store(b, &hs, &sts);
  EXPECT_EQ(sts[R"({__name__="lat"})"], (std::vector<int64_t>{kT0Ms - 5000, kT0Ms - 5000}));
  // Cumulative ones carry their own.
  OtlpBatch c;
  ASSERT_TRUE(c.ParseProto(Request({}, {Metric("lat", "", 10, ExpHist({point(kT0, kT0 - 7'000'000'000)}, 2))}), 0, {},
                           nullptr)
                  .ok());
  StoredST csts;
  Store(c, &hs, &csts);
  EXPECT_EQ(csts[R"({__name__="lat"})"], (std::vector<int64_t>{kT0Ms - 7000}));
}

// convert_histograms_to_nhcb: an explicit-bucket histogram point is one
// native histogram with custom buckets under the family name, with its
// start timestamp; leading empty buckets are skipped and gaps over 2 start a
// new span (Prometheus's explicitHistogramToCustomBucketsHistogram); delta
// points are summed into a running total; bad bounds are rejected.
TEST(OtlpProto, ExplicitHistogramsAsNhcb) {
  const uint64_t s = 1'000'000'000;
  auto point = [&](uint64_t t_ns, std::vector<double> bounds, std::vector<uint64_t> counts, uint32_t flags = 0) {
    Enc p;
    p.Len(9, Attr("phase", "fwd"));
    p.Fixed64(2, t_ns - 10 * s).Fixed64(3, t_ns).Fixed64(4, std::accumulate(counts.begin(), counts.end(), uint64_t{0}));
    p.Double(5, 2.5);
    for (uint64_t c : counts) p.Fixed64(6, c);
    for (double d : bounds) p.Double(7, d);
    if (flags != 0) p.Tag(10, 0).Varint(flags);
    return p.b;
  };
  auto hist = [](const std::vector<std::string>& points, int temporality) {
    Enc e;
    for (const auto& p : points) e.Len(1, p);
    return e.Tag(2, 0).Varint(temporality).b;
  };
  const OtlpOptions nhcb{.convert_histograms_to_nhcb = true};
  const std::string series = R"({__name__="step_duration_seconds", job="trainer", phase="fwd"})";
  OtlpBatch b(nhcb);
  ASSERT_TRUE(b.ParseProto(Request({Attr("service.name", "trainer")},
                                   {Metric("step.duration", "s", 9,
                                           hist({point(kT0, {0.1, 0.5, 1, 2, 5, 10}, {0, 1, 2, 0, 0, 0, 3}),
                                                 point(kT0 + s, {0.1, 0.5}, {0, 0, 0}, 1)},
                                                2))}),
                           0, {}, nullptr)
                  .ok());
  EXPECT_EQ(b.stats().rejected_points, 0u) << b.stats().first_rejection;
  EXPECT_EQ(b.stats().histograms, 2u);
  StoredH hs;
  StoredST sts;
  Stored floats = Store(b, &hs, &sts);
  EXPECT_TRUE(floats.empty());  // no _bucket, _count, _sum
  ASSERT_EQ(hs[series].size(), 2u);
  const model::FloatHistogram& h = hs[series][0].second;
  EXPECT_EQ(Layout(h), "schema:-53 count:6 sum:2.5 zc:0 zt:0 p:[1/2 3/1][1 2 3]");
  EXPECT_EQ(h.custom_values, (std::vector<double>{0.1, 0.5, 1, 2, 5, 10}));
  EXPECT_TRUE(h.Validate().ok());
  EXPECT_EQ(sts[series], (std::vector<int64_t>{kT0Ms - 10000, kT0Ms - 9000}));
  // No recorded value: the stale marker.
  EXPECT_TRUE(model::IsStaleNaN(hs[series][1].second.sum));

  // Deltas add up per series.
  OtlpDeltas deltas;
  auto send = [&](std::vector<std::string> points) {
    OtlpBatch d(nhcb);
    EXPECT_TRUE(d.ParseProto(Request({Attr("service.name", "trainer")}, {Metric("step.duration", "s", 9, hist(points, 1))}),
                             0, {}, &deltas)
                    .ok());
    StoredH dh;
    StoredST dst;
    Store(d, &dh, &dst);
    d.Committed(kT0Ms);
    return std::make_tuple(dh[series], dst[series], d.stats().rejected_points);
  };
  auto [d1, st1, r1] = send({point(kT0, {1}, {1, 1}), point(kT0 + s, {1}, {2, 0})});
  EXPECT_EQ(r1, 0u);
  ASSERT_EQ(d1.size(), 2u);
  EXPECT_EQ(d1[1].second.count, 4);
  EXPECT_EQ(d1[1].second.positive_buckets, (std::vector<double>{3, 1}));
  EXPECT_EQ(st1, (std::vector<int64_t>{kT0Ms - 10000, kT0Ms - 10000}));

  // Bounds not increasing, or counts not matching them: rejected, named.
  OtlpBatch bad(nhcb);
  ASSERT_TRUE(bad.ParseProto(Request({}, {Metric("h", "", 9, hist({point(kT0, {1, 0.5}, {1, 1, 1}), point(kT0, {1}, {1})}, 2))}),
                             0, {}, nullptr)
                  .ok());
  EXPECT_EQ(bad.stats().rejected_points, 2u);
  EXPECT_NE(bad.stats().first_rejection.find("metric \"h\": custom buckets"), std::string::npos)
      << bad.stats().first_rejection;
  EXPECT_NE(bad.stats().first_rejection.find("strictly increasing"), std::string::npos) << bad.stats().first_rejection;
}

TEST(OtlpJson, TheSpecExampleAndErrors) {
  // opentelemetry-proto's examples/metrics.json, shortened.
  const std::string body = R"({"resourceMetrics": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "my.service"}}]},
    "scopeMetrics": [{"scope": {"name": "my.library", "version": "1.0.0"}, "metrics": [
      {"name": "my.counter", "unit": "1", "sum": {"aggregationTemporality": 2, "isMonotonic": true,
        "dataPoints": [{"asDouble": 5, "startTimeUnixNano": "1544712660300000000", "timeUnixNano": "1544712660300000000",
                        "attributes": [{"key": "my.counter.attr", "value": {"stringValue": "some value"}}]}]}},
      {"name": "my.gauge", "unit": "1", "gauge": {"dataPoints": [{"asInt": "10", "timeUnixNano": 1544712660300000000}]}},
      {"name": "my.histogram", "unit": "1", "histogram": {"aggregationTemporality": "AGGREGATION_TEMPORALITY_CUMULATIVE",
        "dataPoints": [{"timeUnixNano": "1544712660300000000", "count": "2", "sum": 2, "bucketCounts": ["1", "1"],
                        "explicitBounds": [1]}]}},
      {"name": "my.exponential.histogram", "unit": "1", "exponentialHistogram": {"aggregationTemporality": 2,
        "dataPoints": [{"timeUnixNano": "1544712660300000000", "count": "3", "sum": 10, "scale": 0, "zeroCount": "1",
                        "positive": {"offset": 1, "bucketCounts": ["0", "2"]}}]}}
    ]}]}]})";
  OtlpBatch b;
  Status st = b.ParseJson(body, 0, {}, nullptr);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(b.stats().rejected_points, 0u) << b.stats().first_rejection;
  StoredH hs;
  StoredST sts;
  Stored s = Store(b, &hs, &sts);
  const int64_t t = 1544712660300;
  EXPECT_EQ(s[R"({__name__="my_counter_total", job="my.service", my_counter_attr="some value"})"],
            (std::vector<std::pair<int64_t, double>>{{t, 5}}));
  // startTimeUnixNano (here the point's own time: OTel's "unknown start").
  EXPECT_EQ(sts[R"({__name__="my_counter_total", job="my.service", my_counter_attr="some value"})"],
            (std::vector<int64_t>{t}));
  EXPECT_EQ(sts[R"({__name__="my_histogram_count", job="my.service"})"], (std::vector<int64_t>{0}));
  EXPECT_EQ(s[R"({__name__="my_gauge_ratio", job="my.service"})"], (std::vector<std::pair<int64_t, double>>{{t, 10}}));
  EXPECT_EQ(s[R"({__name__="my_histogram_bucket", job="my.service", le="1"})"][0].second, 1);
  EXPECT_EQ(s[R"({__name__="my_histogram_bucket", job="my.service", le="+Inf"})"][0].second, 2);
  EXPECT_EQ(s[R"({__name__="my_histogram_sum", job="my.service"})"][0].second, 2);
  // OTLP buckets (2,4] (empty, kept as in Prometheus) and (4,8]: indexes 2 and 3.
  ASSERT_EQ(hs[R"({__name__="my_exponential_histogram", job="my.service"})"].size(), 1u);
  EXPECT_EQ(Layout(hs[R"({__name__="my_exponential_histogram", job="my.service"})"][0].second),
            "schema:0 count:3 sum:10 zc:1 zt:1e-128 p:[2/2][0 2]");

  st = OtlpBatch().ParseJson(R"({"resourceMetrics": [{"scopeMetrics": [{"metrics": [
      {"name": "g", "gauge": {"dataPoints": [{"asDouble": "fast"}]}}]}]}]})", 0, {}, nullptr);
  EXPECT_EQ(st.message(), "json: resourceMetrics[0].scopeMetrics[0].metrics[0].gauge.dataPoints[0].asDouble: expected a number");
  st = OtlpBatch().ParseJson(R"({"resourceMetrics": [{"scopeMetrics": [{"metrics": [
      {"name": "c", "sum": {"aggregationTemporality": 2, "dataPoints": [{"asDouble": 1, "startTimeUnixNano": "x"}]}}]}]}]})",
                             0, {}, nullptr);
  EXPECT_NE(st.message().find("dataPoints[0].startTimeUnixNano"), std::string::npos) << st.message();
  st = OtlpBatch().ParseJson("{", 0, {}, nullptr);
  EXPECT_FALSE(st.ok());
  // snake_case names (protobuf's JSON parsers accept them) and a point without a time: now.
  OtlpBatch snake;
  ASSERT_TRUE(snake.ParseJson(R"({"resource_metrics": [{"scope_metrics": [{"metrics": [
      {"name": "g", "gauge": {"data_points": [{"as_double": 2}]}}]}]}]})", 1234, {}, nullptr).ok());
  EXPECT_EQ(Store(snake)[R"({__name__="g"})"], (std::vector<std::pair<int64_t, double>>{{1234, 2}}));
}

}  // namespace
}  // namespace trainwatch::ingest
