#include "ingest/remote_write2.h"

#include <gtest/gtest.h>
#include <snappy.h>

#include <map>
#include <string>
#include <vector>

#include "ingest/proto_enc_test_util.h"

namespace trainwatch::ingest {
namespace {

// ---- io.prometheus.write.v2 builders (types.proto field numbers) ----

std::string Refs(const std::vector<uint32_t>& refs) {
  Enc e;
  for (uint32_t r : refs) e.Varint(r);
  return e.b;
}

std::string Sample(double v, int64_t t, int64_t st = 0) {
  Enc e;
  e.Double(1, v).Tag(2, 0).Varint(static_cast<uint64_t>(t));
  if (st != 0) e.Tag(3, 0).Varint(static_cast<uint64_t>(st));
  return e.b;
}

// An integer histogram: schema 0, count 3, sum 4, zero count 1, positive
// span {1,2} deltas [1, 0] (counts 1, 1) at t, with start_timestamp (field
// 17) `st` when not 0.
std::string IntHistogram(int64_t t, int64_t st = 0) {
  Enc e;
  e.Tag(1, 0).Varint(3).Double(3, 4).Tag(4, 0).Varint(0).Double(5, 0.001).Tag(6, 0).Varint(1);
  e.Len(11, Enc().Tag(1, 0).Varint(2).Tag(2, 0).Varint(2).b);  // offset 1 (zigzag 2), length 2
  e.Len(12, Enc().Varint(2).Varint(0).b);                        // deltas +1, 0 (zigzag)
  e.Tag(15, 0).Varint(static_cast<uint64_t>(t));
  if (st != 0) e.Tag(17, 0).Varint(static_cast<uint64_t>(st));
  return e.b;
}

std::string Request(const std::vector<std::string>& symbols, const std::vector<std::string>& series) {
  Enc e;
  for (const auto& s : symbols) e.Len(4, s);
  for (const auto& s : series) e.Len(5, s);
  return e.b;
}

using Stored = std::map<std::string, std::vector<std::pair<int64_t, double>>>;

// Records every value with its start timestamp (0 through Append and
// AppendHistogram).
class Capture : public storage::Appender {
 public:
  Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& labels, int64_t t, double v) override {
    return AppendST(ref, labels, 0, t, v);
  }
  Result<storage::SeriesRef> AppendST(storage::SeriesRef, const model::Labels& labels, int64_t st, int64_t t,
                                      double v) override {
    floats[labels.ToString()].push_back({t, v});
    float_sts[labels.ToString()].push_back(st);
    return storage::SeriesRef{1};
  }
  Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                             const model::FloatHistogram& h) override {
    return AppendHistogramST(ref, labels, 0, t, h);
  }
  Result<storage::SeriesRef> AppendHistogramST(storage::SeriesRef, const model::Labels& labels, int64_t st, int64_t t,
                                               const model::FloatHistogram& h) override {
    hists[labels.ToString()].push_back({t, h});
    hist_sts[labels.ToString()].push_back(st);
    return storage::SeriesRef{1};
  }
  Status Commit() override { return Status::OK(); }
  void Rollback() override {}
  Stored floats;
  std::map<std::string, std::vector<std::pair<int64_t, model::FloatHistogram>>> hists;
  std::map<std::string, std::vector<int64_t>> float_sts, hist_sts;  // per value, in append order
};

const std::vector<std::string> kSymbols = {"", "__name__", "http_requests_total", "job", "api", "latency_seconds",
                                           "help text", "seconds"};

TEST(RemoteWrite2Test, EveryField) {
  Enc s1;  // labels packed; two samples (one with a start timestamp); metadata
  s1.Len(1, Refs({1, 2, 3, 4})).Len(2, Sample(5, 1000, 900)).Len(2, Sample(7, 2000));
  s1.Len(5, Enc().Tag(1, 0).Varint(1).Tag(3, 0).Varint(6).b);
  s1.Tag(6, 0).Varint(800);  // created_timestamp of the drafts
  Enc s2;  // labels unpacked, out of order; a histogram and an exemplar
  s2.Tag(1, 0).Varint(3).Tag(1, 0).Varint(4).Tag(1, 0).Varint(1).Tag(1, 0).Varint(5);
  s2.Len(3, IntHistogram(1500)).Len(4, Enc().Len(1, Refs({3, 4})).Double(2, 0.5).Tag(3, 0).Varint(1500).b);
  s2.Len(5, Enc().Tag(1, 0).Varint(3).Tag(4, 0).Varint(7).b);
  Enc s3;  // the first series again: one series, three samples
  s3.Len(1, Refs({3, 4, 1, 2})).Len(2, Sample(9, 3000));
  // Symbols after the series that use them are fine.
  const std::string body = Request({}, {s1.b, s2.b, s3.b}) + Request(kSymbols, {});
  RemoteWrite2Batch b;
  std::string compressed;
  snappy::Compress(body.data(), body.size(), &compressed);
  Status st = b.ParseSnappy(compressed);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b.stats().series, 2u);
  EXPECT_EQ(b.stats().samples, 3u);
  EXPECT_EQ(b.stats().histograms, 1u);
  EXPECT_EQ(b.stats().exemplars, 1u);
  Capture c;
  ASSERT_TRUE(b.AppendTo(&c).ok());
  EXPECT_EQ(b.stats().samples_written, 3u);
  EXPECT_EQ(b.stats().histograms_written, 1u);
  EXPECT_EQ(c.floats[R"(http_requests_total{job="api"})"],
            (std::vector<std::pair<int64_t, double>>{{1000, 5}, {2000, 7}, {3000, 9}}));
  // Its own start timestamp; else the drafts' created_timestamp of its
  // TimeSeries message (s1's), else none (s3 has no created_timestamp).
  EXPECT_EQ(c.float_sts[R"(http_requests_total{job="api"})"], (std::vector<int64_t>{900, 800, 0}));
  const auto& h = c.hists[R"(latency_seconds{job="api"})"];
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].first, 1500);
  EXPECT_EQ(h[0].second.TestExpression(), "{{count:3 sum:4 z_bucket:1 z_bucket_w:0.001 offset:1 buckets:[1 1]}}");
  EXPECT_EQ(c.hist_sts[R"(latency_seconds{job="api"})"], (std::vector<int64_t>{0}));
}

// Histogram.start_timestamp (field 17) is the histogram's start timestamp;
// the drafts' created_timestamp stands in only where it is absent.
TEST(RemoteWrite2Test, HistogramStartTimestamps) {
  Enc s1;
  s1.Len(1, Refs({1, 5})).Len(3, IntHistogram(1500, 1200)).Len(3, IntHistogram(2500)).Tag(6, 0).Varint(700);
  Enc s2;
  s2.Len(1, Refs({1, 5, 3, 4})).Len(3, IntHistogram(1500, 1100)).Len(2, Sample(1, 1500));
  RemoteWrite2Batch b;
  Status st = b.Parse(Request(kSymbols, {s1.b, s2.b}));
  ASSERT_TRUE(st.ok()) << st.ToString();
  Capture c;
  ASSERT_TRUE(b.AppendTo(&c).ok());
  EXPECT_EQ(b.stats().histograms_written, 3u);
  EXPECT_EQ(c.hist_sts["latency_seconds{}"], (std::vector<int64_t>{1200, 700}));
  EXPECT_EQ(c.hist_sts[R"(latency_seconds{job="api"})"], (std::vector<int64_t>{1100}));
  EXPECT_EQ(c.float_sts[R"(latency_seconds{job="api"})"], (std::vector<int64_t>{0}));
  // A start timestamp that is not a varint names the field.
  Enc bad;
  bad.Len(1, Refs({1, 5})).Len(3, IntHistogram(1500) + Enc().Double(17, 1).b);
  st = RemoteWrite2Batch().Parse(Request(kSymbols, {bad.b}));
  EXPECT_NE(st.message().find("histogram start_timestamp"), std::string::npos) << st.ToString();
}

TEST(RemoteWrite2Test, MalformedRequestsNameTheField) {
  auto err = [](const std::string& body) {
    RemoteWrite2Batch b;
    Status s = b.Parse(body);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    return s.message();
  };
  auto series = [](const std::vector<uint32_t>& refs) { return Enc().Len(1, Refs(refs)).Len(2, Sample(1, 1)).b; };
  EXPECT_EQ(err(Request(kSymbols, {series({1, 2, 3, 99})})),
            "timeseries[0].labels_refs[3]: symbol ref 99 out of range (8 symbols)");
  EXPECT_EQ(err(Request(kSymbols, {series({1, 2}), series({1, 2, 3})})),
            "timeseries[1].labels_refs: odd number of refs (3), want name and value pairs");
  EXPECT_EQ(err(Request({"x", "__name__", "a"}, {series({1, 2})})), "symbols[0] must be the empty string");
  EXPECT_EQ(err(Request({}, {series({1, 2})})), "timeseries[0].labels_refs[0]: symbol ref 1 out of range (0 symbols)");
  EXPECT_NE(err(Request(kSymbols, {series({3, 4})})).find("no metric name (__name__)"), std::string::npos);
  EXPECT_NE(err(Request(kSymbols, {Enc().Len(1, Refs({1, 2})).b})).find("timeseries[0] http_requests_total{}: no samples or histograms"),
            std::string::npos);
  EXPECT_NE(err(Request(kSymbols, {series({1, 2, 1, 5})})).find("duplicate label name"), std::string::npos);
  EXPECT_NE(err(Request({"", "__name__", "bad name"}, {series({1, 2})})).find("invalid metric name"), std::string::npos);
  EXPECT_NE(err(Request(kSymbols, {Enc().Len(1, Refs({1, 2})).Len(2, Sample(1, 1)).Len(5, Enc().Tag(3, 0).Varint(50).b).b}))
                .find("timeseries[0].metadata.help_ref: symbol ref 50 out of range"),
            std::string::npos);
  EXPECT_NE(err(Request(kSymbols, {Enc().Len(1, Refs({1, 2})).Len(4, Enc().Len(1, Refs({3})).b).Len(2, Sample(1, 1)).b}))
                .find("timeseries[0].exemplars.labels_refs: odd number"),
            std::string::npos);
  // A histogram whose counts do not match its spans; a 1.0 body sent as 2.0.
  Enc bad_hist;
  bad_hist.Tag(1, 0).Varint(1).Len(11, Enc().Tag(1, 0).Varint(0).Tag(2, 0).Varint(2).b).Len(12, Enc().Varint(2).b);
  EXPECT_NE(err(Request(kSymbols, {Enc().Len(1, Refs({1, 5})).Len(3, bad_hist.b).b})).find("timeseries[0].histograms[0]"),
            std::string::npos);
  EXPECT_NE(err(Enc().Len(1, Enc().Len(1, Enc().Len(1, "__name__").Len(2, "x").b).b).b).find("field 1 is reserved"),
            std::string::npos);
  EXPECT_NE(err(Request(kSymbols, {}) + "\x2a\x05\x01").find("past end"), std::string::npos);
  EXPECT_FALSE(RemoteWrite2Batch().ParseSnappy("\xff\xff\xff\xff\x0f not snappy").ok());
}

TEST(RemoteWrite2Test, Limits) {
  RequestLimits limits;
  limits.max_samples = 2;
  const std::string s = Enc().Len(1, Refs({1, 2})).Len(2, Sample(1, 1)).Len(2, Sample(2, 2)).Len(2, Sample(3, 3)).b;
  Status st = RemoteWrite2Batch().Parse(Request(kSymbols, {s}), limits);
  EXPECT_NE(st.message().find("--ingest.max-samples-per-request"), std::string::npos) << st.ToString();
}

TEST(RemoteWrite2Test, ContentTypes) {
  EXPECT_EQ(RemoteWriteProtoOf(""), RemoteWriteProto::kV1);
  EXPECT_EQ(RemoteWriteProtoOf("application/x-protobuf"), RemoteWriteProto::kV1);
  EXPECT_EQ(RemoteWriteProtoOf("application/x-protobuf;proto=prometheus.WriteRequest"), RemoteWriteProto::kV1);
  EXPECT_EQ(RemoteWriteProtoOf("application/x-protobuf;proto=io.prometheus.write.v2.Request"), RemoteWriteProto::kV2);
  EXPECT_EQ(RemoteWriteProtoOf("application/x-protobuf; proto=\"io.prometheus.write.v2.Request\""), RemoteWriteProto::kV2);
  EXPECT_EQ(RemoteWriteProtoOf("application/x-protobuf;proto=io.prometheus.write.v3.Request"), RemoteWriteProto::kUnknown);
  EXPECT_EQ(RemoteWriteProtoOf("application/json"), RemoteWriteProto::kUnknown);
}

}  // namespace
}  // namespace trainwatch::ingest
