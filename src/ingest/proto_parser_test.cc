#include "ingest/proto_parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ingest/proto_enc_test_util.h"

namespace trainwatch::ingest {
namespace {

uint64_t Zz(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }

std::string Label(std::string_view n, std::string_view v) { return Enc().Len(1, n).Len(2, v).b; }
std::string Span(int32_t offset, uint32_t length) { return Enc().Tag(1, 0).Varint(Zz(offset)).Tag(2, 0).Varint(length).b; }
std::string Delimited(std::string_view msg) { return Enc().Varint(msg.size()).b + std::string(msg); }
std::string Family(std::string_view name, int type, const std::vector<std::string>& metrics, std::string_view help = "") {
  Enc e;
  e.Len(1, name);
  if (!help.empty()) e.Len(2, help);
  e.Tag(3, 0).Varint(static_cast<uint64_t>(type));
  for (const auto& m : metrics) e.Len(4, m);
  return Delimited(e.b);
}

struct Out {
  std::string series;  // name{l="v",...} as parsed
  double value = 0;
  int64_t t = 0;
  bool hist = false;
  model::FloatHistogram h;
  int64_t st = 0;
};

Result<std::vector<Out>> Parse(std::string_view body, ProtoParseOptions o = {}) {
  o.default_timestamp_ms = 1000;
  ProtoParser p(body, std::move(o));
  std::vector<Out> out;
  while (p.Next()) {
    const TextSample& s = p.sample();
    Out x;
    x.series = std::string(s.name) + "{";
    for (size_t i = 0; i < s.num_labels; i++) {
      x.series += std::string(i ? "," : "") + std::string(s.labels[i].name) + "=\"" + std::string(s.labels[i].value) + "\"";
    }
    x.series += "}";
    x.value = s.value;
    x.t = s.timestamp_ms;
    x.hist = p.is_histogram();
    if (x.hist) x.h = p.histogram();
    x.st = s.start_timestamp_ms;
    out.push_back(std::move(x));
  }
  if (!p.status().ok()) return p.status();
  return out;
}

TEST(ProtoParserTest, CounterGaugeUntypedWithLabelsAndTimestamp) {
  std::string body = Family("c_total", 0, {Enc().Len(1, Label("a", "1")).Len(3, Enc().Double(1, 5).b).b}, "help") +
                     Family("g", 1, {Enc().Len(2, Enc().Double(1, -2.5).b).Tag(6, 0).Varint(1234).b}) +
                     Family("u", 3, {Enc().Len(1, Label("x", "y")).Len(1, Label("z", "w")).Len(5, Enc().Double(1, 7).b).b});
  std::vector<std::pair<std::string, std::string>> md;
  ProtoParseOptions o;
  o.on_metadata = [&](const MetadataLine& m) { md.emplace_back(std::string(m.family), std::string(m.text)); };
  auto r = Parse(body, o);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].series, "c_total{a=\"1\"}");
  EXPECT_EQ((*r)[0].value, 5);
  EXPECT_EQ((*r)[0].t, 1000);
  EXPECT_EQ((*r)[1].series, "g{}");
  EXPECT_EQ((*r)[1].value, -2.5);
  EXPECT_EQ((*r)[1].t, 1234);
  EXPECT_EQ((*r)[2].series, "u{x=\"y\",z=\"w\"}");
  EXPECT_EQ((*r)[2].value, 7);
  ASSERT_EQ(md.size(), 4u);
  EXPECT_EQ(md[0], (std::pair<std::string, std::string>{"c_total", "help"}));
  EXPECT_EQ(md[1], (std::pair<std::string, std::string>{"c_total", "counter"}));
  EXPECT_EQ(md[3], (std::pair<std::string, std::string>{"u", "unknown"}));
}

TEST(ProtoParserTest, SummaryYieldsCountSumQuantiles) {
  std::string s = Enc()
                      .Tag(1, 0).Varint(10)
                      .Double(2, 4.5)
                      .Len(3, Enc().Double(1, 0.5).Double(2, 0.3).b)
                      .Len(3, Enc().Double(1, 1).Double(2, 0.9).b)
                      .b;
  auto r = Parse(Family("s", 2, {Enc().Len(4, s).b}));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].series, "s_count{}");
  EXPECT_EQ((*r)[0].value, 10);
  EXPECT_EQ((*r)[1].series, "s_sum{}");
  EXPECT_EQ((*r)[2].series, "s{quantile=\"0.5\"}");
  EXPECT_EQ((*r)[3].series, "s{quantile=\"1.0\"}");
  EXPECT_EQ((*r)[3].value, 0.9);
}

std::string Bucket(uint64_t cum, double upper) { return Enc().Tag(1, 0).Varint(cum).Double(2, upper).b; }

TEST(ProtoParserTest, ClassicHistogramAddsInfBucket) {
  std::string h = Enc().Tag(1, 0).Varint(7).Double(2, 12).Len(3, Bucket(2, 0.5)).Len(3, Bucket(5, 1)).Len(3, Bucket(6, 1e22)).b;
  auto r = Parse(Family("h", 4, {Enc().Len(1, Label("k", "v")).Len(7, h).b}));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 6u);
  EXPECT_EQ((*r)[0].series, "h_count{k=\"v\"}");
  EXPECT_EQ((*r)[0].value, 7);
  EXPECT_EQ((*r)[1].series, "h_sum{k=\"v\"}");
  EXPECT_EQ((*r)[1].value, 12);
  EXPECT_EQ((*r)[2].series, "h_bucket{k=\"v\",le=\"0.5\"}");
  EXPECT_EQ((*r)[3].series, "h_bucket{k=\"v\",le=\"1.0\"}");
  EXPECT_EQ((*r)[4].series, "h_bucket{k=\"v\",le=\"1e+22\"}");
  EXPECT_EQ((*r)[5].series, "h_bucket{k=\"v\",le=\"+Inf\"}");
  EXPECT_EQ((*r)[5].value, 7);
  for (const auto& o : *r) EXPECT_FALSE(o.hist);
}

TEST(ProtoParserTest, ClassicHistogramFloatCountsAndExplicitInf) {
  const double inf = std::numeric_limits<double>::infinity();
  std::string h = Enc()
                      .Double(4, 3.5)
                      .Double(2, 1)
                      .Len(3, Enc().Double(4, 1.5).Double(2, 2).Len(3, Enc().Double(2, 1).b).b)  // with an exemplar
                      .Len(3, Enc().Double(4, 3.5).Double(2, inf).b)
                      .Len(3, Bucket(9, 9))  // after +Inf: not read, as Prometheus
                      .b;
  auto r = Parse(Family("h", 4, {Enc().Len(7, h).b}));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].value, 3.5);
  EXPECT_EQ((*r)[2].series, "h_bucket{le=\"2.0\"}");
  EXPECT_EQ((*r)[2].value, 1.5);
  EXPECT_EQ((*r)[3].series, "h_bucket{le=\"+Inf\"}");
}

// An integer native histogram: schema 1, zero bucket, spans on both sides,
// deltas packed on one side and unpacked on the other.
std::string NativeInt(bool with_classic) {
  Enc e;
  e.Tag(1, 0).Varint(12).Double(2, 100).Tag(5, 0).Varint(Zz(1)).Double(6, 0.001).Tag(7, 0).Varint(2);
  e.Len(9, Span(-1, 2));
  e.Tag(10, 0).Varint(Zz(1)).Tag(10, 0).Varint(Zz(2));  // neg: 1, 3
  e.Len(12, Span(0, 2)).Len(12, Span(2, 1));
  e.Len(13, Enc().Varint(Zz(2)).Varint(Zz(-1)).Varint(Zz(2)).b);  // pos: 2, 1, 3
  if (with_classic) e.Len(3, Bucket(4, 1)).Len(3, Bucket(12, 10));
  e.Len(15, Enc().Tag(1, 0).Varint(5).b);  // created_timestamp: 5 s
  e.Len(16, Enc().Double(2, 1).b);         // exemplar: skipped
  return e.b;
}

TEST(ProtoParserTest, NativeIntegerHistogram) {
  auto r = Parse(Family("n", 4, {Enc().Len(1, Label("a", "b")).Len(7, NativeInt(false)).Tag(6, 0).Varint(77).b}));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 1u);
  const Out& o = (*r)[0];
  EXPECT_TRUE(o.hist);
  EXPECT_EQ(o.series, "n{a=\"b\"}");
  EXPECT_EQ(o.t, 77);
  EXPECT_EQ(o.h.schema, 1);
  EXPECT_EQ(o.h.count, 12);
  EXPECT_EQ(o.h.sum, 100);
  EXPECT_EQ(o.h.zero_threshold, 0.001);
  EXPECT_EQ(o.h.zero_count, 2);
  EXPECT_EQ(o.h.counter_reset_hint, model::CounterResetHint::kUnknown);
  EXPECT_EQ(o.h.negative_spans, (std::vector<model::Span>{{-1, 2}}));
  EXPECT_EQ(o.h.negative_buckets, (std::vector<double>{1, 3}));
  EXPECT_EQ(o.h.positive_spans, (std::vector<model::Span>{{0, 2}, {2, 1}}));
  EXPECT_EQ(o.h.positive_buckets, (std::vector<double>{2, 1, 3}));
  EXPECT_TRUE(o.h.Validate().ok());
}

TEST(ProtoParserTest, NativeWithClassicKeptOnlyWhenAsked) {
  std::string body = Family("n", 4, {Enc().Len(7, NativeInt(true)).b});
  auto r = Parse(body);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_TRUE((*r)[0].hist);
  ProtoParseOptions keep;
  keep.keep_classic = true;
  r = Parse(body, keep);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 6u);  // histogram, _count, _sum, le=1, le=10, le=+Inf (added)
  EXPECT_TRUE((*r)[0].hist);
  EXPECT_EQ((*r)[1].series, "n_count{}");
  EXPECT_EQ((*r)[4].series, "n_bucket{le=\"10.0\"}");
  EXPECT_EQ((*r)[5].series, "n_bucket{le=\"+Inf\"}");
  ProtoParseOptions off;
  off.native_histograms = false;
  r = Parse(body, off);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 5u);  // _count, _sum, le=1, le=10, le=+Inf
  EXPECT_FALSE((*r)[0].hist);
  EXPECT_EQ((*r)[4].series, "n_bucket{le=\"+Inf\"}");
  EXPECT_EQ((*r)[4].value, 12);
}

// convert_nhcb: a classic histogram is one native histogram with custom
// buckets named after the family (its classic series first with
// keep_classic), a gauge histogram's with hint kGauge; one that does not
// convert fails the parse, as Prometheus's ProtobufParser.
TEST(ProtoParserTest, ClassicHistogramToNhcb) {
  std::string h = Enc()
                      .Tag(1, 0).Varint(7).Double(2, 12)
                      .Len(3, Bucket(2, 0.5)).Len(3, Bucket(5, 1)).Len(3, Bucket(6, 1e22))
                      .Len(15, Enc().Tag(1, 0).Varint(5).b)  // created_timestamp: 5 s
                      .b;
  ProtoParseOptions o;
  o.convert_nhcb = true;
  auto r = Parse(Family("h", 4, {Enc().Len(1, Label("k", "v")).Len(7, h).b}), o);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 1u);
  const Out& n = (*r)[0];
  EXPECT_TRUE(n.hist);
  EXPECT_EQ(n.series, "h{k=\"v\"}");
  EXPECT_EQ(n.st, 5000);
  EXPECT_EQ(n.h.schema, model::kCustomBucketsSchema);
  EXPECT_EQ(n.h.custom_values, (std::vector<double>{0.5, 1, 1e22}));
  EXPECT_EQ(n.h.positive_spans, (std::vector<model::Span>{{0, 4}}));
  EXPECT_EQ(n.h.positive_buckets, (std::vector<double>{2, 3, 1, 1}));
  EXPECT_EQ(n.h.count, 7);
  EXPECT_EQ(n.h.sum, 12);
  EXPECT_EQ(n.h.counter_reset_hint, model::CounterResetHint::kUnknown);
  EXPECT_TRUE(n.h.Validate().ok());

  o.keep_classic = true;
  r = Parse(Family("h", 5, {Enc().Len(1, Label("k", "v")).Len(7, h).b}), o);  // a gauge histogram
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 7u);  // _count, _sum, 4 buckets, then the NHCB
  EXPECT_EQ((*r)[0].series, "h_count{k=\"v\"}");
  EXPECT_EQ((*r)[5].series, "h_bucket{k=\"v\",le=\"+Inf\"}");
  EXPECT_TRUE((*r)[6].hist);
  EXPECT_EQ((*r)[6].h.counter_reset_hint, model::CounterResetHint::kGauge);
  EXPECT_EQ((*r)[6].h.count, 7);

  // A native histogram stays native; read as classic (native_histograms
  // off) its classic buckets convert.
  std::string native = Family("n", 4, {Enc().Len(7, NativeInt(true)).b});
  ProtoParseOptions conv;
  conv.convert_nhcb = true;
  r = Parse(native, conv);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].h.schema, 1);
  conv.native_histograms = false;
  r = Parse(native, conv);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].h.schema, model::kCustomBucketsSchema);
  EXPECT_EQ((*r)[0].h.custom_values, (std::vector<double>{1, 10}));
  EXPECT_EQ((*r)[0].h.count, 12);

  auto bad = [&](const std::string& hist, std::string_view want) {
    auto e = Parse(Family("bad", 4, {Enc().Len(7, hist).b}), o);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message().find(want), std::string::npos) << e.error().message();
  };
  bad(Enc().Tag(1, 0).Varint(7).Len(3, Bucket(5, 0.5)).Len(3, Bucket(2, 1)).b,
      "histogram \"bad\": convert to native histogram with custom buckets: count is not cumulative: 2 < 5");
  bad(Enc().Tag(1, 0).Varint(7).Len(3, Bucket(2, 0.5)).Len(3, Bucket(5, std::numeric_limits<double>::infinity())).b,
      "count mismatch: count=7 != le=inf count=5");
}

TEST(ProtoParserTest, NativeFloatGaugeHistogramIsCompacted) {
  Enc e;
  e.Double(4, 6.5).Double(2, 3).Tag(5, 0).Varint(Zz(-2)).Double(8, 0.5);
  e.Len(12, Span(3, 4));
  e.Len(14, Enc().Double(0, 0).b.substr(1) + Enc().Double(0, 2).b.substr(1) + Enc().Double(0, 4).b.substr(1) +
                Enc().Double(0, 0).b.substr(1));  // packed doubles: 0 2 4 0
  e.Double(11, 9);                               // unpacked count with no negative span: Validate fails
  auto bad = Parse(Family("f", 5, {Enc().Len(7, e.b).b}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("histogram \"f\""), std::string::npos) << bad.error().message();

  Enc g;
  g.Double(4, 6.5).Double(2, 3).Tag(5, 0).Varint(Zz(-2)).Double(8, 0.5);
  g.Len(12, Span(3, 4));
  g.Len(14, Enc().Double(0, 0).b.substr(1) + Enc().Double(0, 2).b.substr(1) + Enc().Double(0, 4).b.substr(1) +
                Enc().Double(0, 0).b.substr(1));
  auto r = Parse(Family("f", 5, {Enc().Len(7, g.b).b}));
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  const auto& h = (*r)[0].h;
  EXPECT_EQ(h.schema, -2);
  EXPECT_EQ(h.count, 6.5);
  EXPECT_EQ(h.zero_count, 0.5);
  EXPECT_EQ(h.counter_reset_hint, model::CounterResetHint::kGauge);
  EXPECT_EQ(h.positive_spans, (std::vector<model::Span>{{4, 2}}));  // Compact(0): empty ends dropped
  EXPECT_EQ(h.positive_buckets, (std::vector<double>{2, 4}));
}

TEST(ProtoParserTest, EmptyNativeHistogramNeedsNoOpSpan) {
  // No spans, no zero bucket: classic (Prometheus's rule); a 0/0 span makes it native.
  auto r = Parse(Family("e", 4, {Enc().Len(7, Enc().Tag(5, 0).Varint(Zz(3)).b).b}));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 3u);
  EXPECT_FALSE((*r)[0].hist);
  r = Parse(Family("e", 4, {Enc().Len(7, Enc().Tag(5, 0).Varint(Zz(3)).Len(12, Span(0, 0)).b).b}));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_TRUE((*r)[0].hist);
  EXPECT_EQ((*r)[0].h.schema, 3);
  EXPECT_TRUE((*r)[0].h.positive_spans.empty());
}

// google.protobuf.Timestamp{seconds, nanos}.
std::string Ts(int64_t seconds, int32_t nanos) {
  Enc e;
  if (seconds != 0) e.Tag(1, 0).Varint(static_cast<uint64_t>(seconds));
  if (nanos != 0) e.Tag(2, 0).Varint(static_cast<uint64_t>(static_cast<int64_t>(nanos)));
  return e.b;
}

// created_timestamp (Counter 3, Summary 4, Histogram 15) is the start
// timestamp of every sample of its metric: seconds*1e3 + nanos/1e6.
TEST(ProtoParserTest, CreatedTimestampsAreStartTimestamps) {
  const std::string created = Ts(1700000000, 123'999'999);  // 1700000000123 ms
  const int64_t st = 1700000000123;
  std::string body =
      Family("c_total", 0,
             {Enc().Len(1, Label("a", "1")).Len(3, Enc().Double(1, 5).Len(3, created).b).b,
              Enc().Len(1, Label("a", "2")).Len(3, Enc().Double(1, 6).b).b,                     // none
              Enc().Len(1, Label("a", "3")).Len(3, Enc().Double(1, 7).Len(3, Ts(-2, -500'000'000)).b).b}) +
      Family("g", 1, {Enc().Len(2, Enc().Double(1, 1).Len(3, created).b).b}) +  // not a Gauge field
      Family("s", 2, {Enc().Len(4, Enc().Tag(1, 0).Varint(2).Double(2, 1).Len(3, Enc().Double(1, 0.5).Double(2, 0.4).b)
                                    .Len(4, created).b).b}) +
      Family("h", 4, {Enc().Len(7, Enc().Tag(1, 0).Varint(2).Double(2, 1).Len(3, Bucket(1, 0.5)).Len(15, created).b).b}) +
      Family("n", 4, {Enc().Len(7, NativeInt(true) + Enc().Len(15, Ts(1, 0)).b).b}) +
      Family("gh", 5, {Enc().Len(7, NativeInt(false) + Enc().Len(15, Ts(2, 0)).b).b});
  ProtoParseOptions keep;
  keep.keep_classic = true;
  auto r = Parse(body, keep);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  std::vector<std::pair<std::string, int64_t>> got;
  for (const Out& o : *r) got.emplace_back(o.series, o.st);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, int64_t>>{
                     {"c_total{a=\"1\"}", st},
                     {"c_total{a=\"2\"}", 0},
                     {"c_total{a=\"3\"}", -2500},
                     {"g{}", 0},
                     {"s_count{}", st},
                     {"s_sum{}", st},
                     {"s{quantile=\"0.5\"}", st},
                     {"h_count{}", st},
                     {"h_sum{}", st},
                     {"h_bucket{le=\"0.5\"}", st},
                     {"h_bucket{le=\"+Inf\"}", st},
                     {"n{}", 1000},  // the native histogram and its classic series
                     {"n_count{}", 1000},
                     {"n_sum{}", 1000},
                     {"n_bucket{le=\"1.0\"}", 1000},
                     {"n_bucket{le=\"10.0\"}", 1000},
                     {"n_bucket{le=\"+Inf\"}", 1000},
                     {"gh{}", 2000},  // gauge histograms too, as Prometheus's StartTimestamp
                 }));
  // A created_timestamp that is not a message names the field.
  auto bad = Parse(Family("c", 0, {Enc().Len(3, Enc().Double(1, 1).Tag(3, 0).Varint(1).b).b}));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("Counter.created_timestamp"), std::string::npos) << bad.error().message();
}

TEST(ProtoParserTest, EmptyFamiliesAndUnknownFieldsSkipped) {
  std::string body = Family("", 0, {}) + Delimited(Enc().Len(1, "x").Tag(99, 0).Varint(1).Len(4, Enc().Len(2, Enc().Double(1, 1).b).b).b);
  // Family "x" has type COUNTER (default) but a gauge field: value 0, as Prometheus's GetCounter().GetValue().
  auto r = Parse(body);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].series, "x{}");
  EXPECT_EQ((*r)[0].value, 0);
  EXPECT_TRUE(Parse("").ok());
}

TEST(ProtoParserTest, SeriesKeysDifferPerLabelSet) {
  std::string body = Family("c", 1, {Enc().Len(1, Label("a", "1")).b, Enc().Len(1, Label("a", "2")).b});
  ProtoParser p(body, {});
  ASSERT_TRUE(p.Next());
  std::string k1(p.sample().series);
  ASSERT_TRUE(p.Next());
  EXPECT_NE(k1, std::string(p.sample().series));
  EXPECT_EQ(p.sample().line, 2u);
  EXPECT_FALSE(p.Next());
  EXPECT_TRUE(p.status().ok());
}

TEST(ProtoParserTest, MalformedInputsNameFieldAndOffset) {
  auto f = [](const std::string& body, std::string_view want) {
    auto r = Parse(body);
    ASSERT_FALSE(r.ok()) << "accepted: " << want;
    EXPECT_NE(r.error().message().find(want), std::string::npos) << r.error().message();
  };
  f("\x05\x0a", "offset 0: length 5 past end");
  f("\x80", "offset 1: truncated varint");
  f(Family("ok", 1, {Enc().Len(2, Enc().Double(1, 1).b).b}) + "\x03\x0a\x01", "offset 20: length 3");
  f(Delimited(Enc().Tag(1, 0).Varint(1).b), "MetricFamily.name: wire type 0, want 2");
  f(Family("bad\xff", 1, {Enc().Len(2, "").b}), "invalid metric name");
  f(Family("m", 9, {Enc().Len(2, "").b}), "unknown metric type 9");
  f(Family("m", 1, {Enc().Len(1, Label("", "v")).b}), "invalid label");
  f(Family("m", 1, {Enc().Len(1, Label("n", "\xc3")).b}), "invalid label");
  f(Family("m", 1, {Enc().Len(2, Enc().Tag(1, 0).Varint(1).b).b}), "value: wire type 0, want 1");
  f(Family("m", 1, {Enc().Tag(6, 2).Varint(0).b}), "Metric.timestamp_ms: wire type 2");
  f(Family("h", 4, {Enc().Len(7, Enc().Tag(5, 1).b).b}), "Histogram.schema: wire type 1, want 0");
  f(Family("h", 4, {Enc().Len(7, Enc().Len(12, Enc().Tag(1, 1).b).b).b}), "BucketSpan.offset");
  f(Family("h", 4, {Enc().Len(7, Enc().Tag(13, 2).Varint(1).b + "\x80").b}), "truncated varint");
  f(Family("h", 4, {Enc().Len(7, Enc().Len(12, Span(0, 2)).Len(13, Enc().Varint(Zz(1)).b).b).b}), "histogram \"h\"");
  f(Family("h", 4, {Enc().Len(7, Enc().Len(12, Span(0, 1)).Len(13, Enc().Varint(Zz(-1)).b).b).b}), "histogram \"h\"");
  f(Family("s", 2, {Enc().Len(4, Enc().Len(3, Enc().Tag(1, 0).Varint(1).b).b).b}), "Quantile.quantile");
}

TEST(ProtoParserTest, FormatOpenMetricsFloatAsGo) {
  EXPECT_EQ(FormatOpenMetricsFloat(1), "1.0");
  EXPECT_EQ(FormatOpenMetricsFloat(0), "0.0");
  EXPECT_EQ(FormatOpenMetricsFloat(-1), "-1.0");
  EXPECT_EQ(FormatOpenMetricsFloat(0.25), "0.25");
  EXPECT_EQ(FormatOpenMetricsFloat(2.5), "2.5");
  EXPECT_EQ(FormatOpenMetricsFloat(100), "100.0");
  EXPECT_EQ(FormatOpenMetricsFloat(0.0001), "0.0001");
  EXPECT_EQ(FormatOpenMetricsFloat(0.00001), "1e-05");
  EXPECT_EQ(FormatOpenMetricsFloat(1e20), "100000000000000000000.0");
  EXPECT_EQ(FormatOpenMetricsFloat(1e21), "1e+21");
  EXPECT_EQ(FormatOpenMetricsFloat(-1.5e-7), "-1.5e-07");
  EXPECT_EQ(FormatOpenMetricsFloat(1.7976931348623157e308), "1.7976931348623157e+308");
  EXPECT_EQ(FormatOpenMetricsFloat(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatOpenMetricsFloat(std::nan("")), "NaN");
}

TEST(ProtoParserTest, ContentTypes) {
  EXPECT_TRUE(IsProtobufContentType("application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"));
  EXPECT_TRUE(IsProtobufContentType("Application/Vnd.Google.Protobuf"));
  EXPECT_FALSE(IsProtobufContentType("text/plain; version=0.0.4"));
  EXPECT_FALSE(IsProtobufContentType(""));
}

}  // namespace
}  // namespace trainwatch::ingest
