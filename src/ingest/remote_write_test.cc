#include "ingest/remote_write.h"

#include <gtest/gtest.h>
#include <snappy.h>

#include <atomic>
#include <bit>
#include <map>
#include <random>

#include "ingest/import.h"
#include "ingest/proto_enc_test_util.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::ingest {
namespace {

std::string Label(std::string_view name, std::string_view value) { return Enc().Len(1, name).Len(2, value).b; }

std::string Sample(double v, int64_t t) {
  return Enc().Fixed64(1, std::bit_cast<uint64_t>(v)).Tag(2, 0).Varint(static_cast<uint64_t>(t)).b;
}

std::string Series(const std::vector<std::pair<std::string, std::string>>& labels,
                   const std::vector<std::pair<double, int64_t>>& samples) {
  Enc e;
  for (const auto& [n, v] : labels) e.Len(1, Label(n, v));
  for (const auto& [v, t] : samples) e.Len(2, Sample(v, t));
  return e.b;
}

std::string Request(const std::vector<std::string>& series) {
  Enc e;
  for (const std::string& s : series) e.Len(1, s);
  return e.b;
}

std::string Snappy(std::string_view raw) {
  std::string out;
  snappy::Compress(raw.data(), raw.size(), &out);
  return out;
}

class TestStorage : public storage::Appendable {
 public:
  explicit TestStorage(uint64_t max_series = 0)
      : db_([max_series](tsdb::Options* o) { o->series_limits.max_series = max_series; }) {}
  std::unique_ptr<storage::Appender> NewAppender() override {
    commits++;
    return db_->NewAppender();
  }
  std::map<model::Labels, std::vector<model::Sample>> Data() { return db_.Data(); }
  int commits = 0;  // appenders opened

 private:
  tsdb::testing::TempDB db_;
};

// --ingest.max-series-per-request, --ingest.max-samples-per-request: a body
// beyond either is refused whole as it is decoded, naming the flag, and
// counted; one exactly at both bounds is stored.
TEST(RemoteWriteTest, RequestLimitsRefuseTheWholeBody) {
  TestStorage db;
  common::metrics::Counter series_refused, samples_refused;
  RequestLimits lim{.max_series = 2, .max_samples = 3, .series_refused = &series_refused,
                    .samples_refused = &samples_refused};
  auto a = [](std::vector<std::pair<double, int64_t>> s) { return Series({{"__name__", "a"}}, std::move(s)); };
  auto b = Series({{"__name__", "b"}}, {{1, 1000}});
  ASSERT_TRUE(RemoteWrite(Snappy(Request({a({{1, 1000}, {2, 2000}}), b})), nullptr, db, lim).ok());
  auto r = RemoteWrite(Snappy(Request({a({{3, 3000}}), b, Series({{"__name__", "c"}}, {{1, 1000}})})), nullptr, db, lim);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "request has more than 2 series (--ingest.max-series-per-request); nothing of it was stored");
  r = RemoteWrite(Snappy(Request({a({{3, 3000}, {4, 4000}, {5, 5000}, {6, 6000}})})), nullptr, db, lim);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(),
            "request has more than 3 samples (--ingest.max-samples-per-request); nothing of it was stored");
  auto data = db.Data();
  EXPECT_EQ(data[model::Labels({{"__name__", "a"}})].size(), 2u);
  EXPECT_EQ(data[model::Labels({{"__name__", "b"}})].size(), 1u);
  EXPECT_EQ(data.count(model::Labels({{"__name__", "c"}})), 0u);
  EXPECT_EQ(series_refused.Value(), 1u);
  EXPECT_EQ(samples_refused.Value(), 1u);
}

TEST(RemoteWriteTest, AppendsAndReadsBack) {
  TestStorage db;
  std::string req = Request({
      Series({{"__name__", "up"}, {"job", "a"}, {"instance", "x"}}, {{1, 1000}, {0, 2000}}),
      Series({{"job", "b"}, {"__name__", "up"}}, {{3.5, 1500}}),  // unsorted on the wire
  });
  auto r = RemoteWrite(Snappy(req), nullptr, db);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->samples, 3u);
  EXPECT_EQ(r->series, 2u);
  auto data = db.Data();
  ASSERT_EQ(data.size(), 2u);
  auto a = data[model::Labels({{"__name__", "up"}, {"instance", "x"}, {"job", "a"}})];
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].t, 1000);
  EXPECT_EQ(a[0].v, 1);
  EXPECT_EQ(a[1].t, 2000);
  auto b = data[model::Labels({{"__name__", "up"}, {"job", "b"}})];
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].v, 3.5);
}

// At the TSDB's series limit (--storage.max-series) the samples of new
// series are refused and named in a 400-type error after the rest of the
// batch is stored: existing series keep flowing.
TEST(RemoteWriteTest, NewSeriesBeyondTheSeriesLimitAreRefusedTheRestStored) {
  TestStorage db(2);
  ASSERT_TRUE(RemoteWrite(Snappy(Request({Series({{"__name__", "a"}}, {{1, 1000}}), Series({{"__name__", "b"}}, {{1, 1000}})})),
                          nullptr, db)
                  .ok());
  auto r = RemoteWrite(Snappy(Request({Series({{"__name__", "a"}}, {{2, 2000}}), Series({{"__name__", "c"}}, {{2, 2000}, {3, 3000}}),
                                       Series({{"__name__", "b"}}, {{2, 2000}})})),
                       nullptr, db);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().IsInvalidArgument()) << r.error().ToString();
  EXPECT_EQ(r.error().message(),
            "2 of 4 samples refused: series c{} refused: it is new and the head holds the series limit of 2 "
            "(--storage.max-series); "
            "the other samples were stored");
  auto data = db.Data();
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[model::Labels({{"__name__", "a"}})].size(), 2u);
  EXPECT_EQ(data[model::Labels({{"__name__", "b"}})].size(), 2u);
}

TEST(RemoteWriteTest, PreservesNaNBitsAndNegativeTimestamps) {
  TestStorage db;
  const uint64_t kStale = 0x7ff0000000000002ull;
  const uint64_t kNaN = 0x7ff8000000000001ull;
  std::string req = Request({Series({{"__name__", "m"}},
                                    {{std::bit_cast<double>(kNaN), -5000}, {std::bit_cast<double>(kStale), 1000}})});
  auto r = RemoteWrite(Snappy(req), nullptr, db);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  auto data = db.Data();
  ASSERT_EQ(data.size(), 1u);
  auto s = data.begin()->second;
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].t, -5000);
  EXPECT_EQ(std::bit_cast<uint64_t>(s[0].v), kNaN);
  EXPECT_EQ(s[1].t, 1000);
  EXPECT_EQ(std::bit_cast<uint64_t>(s[1].v), kStale);
}

TEST(RemoteWriteTest, SkipsUnknownFieldsExemplarsAndMetadata) {
  TestStorage db;
  auto unknown = [](Enc& e) {
    e.Tag(15, 0).Varint(~0ull);        // varint, 10 bytes
    e.Fixed64(16, 42);                  // fixed64
    e.Len(17, "junk");                  // length-delimited
    e.Fixed32(18, 7);                   // fixed32
    e.Tag(19, 3).Tag(20, 0).Varint(1);  // group with a nested group
    e.Tag(21, 3).Fixed32(22, 1).Tag(21, 4);
    e.Tag(19, 4);
  };
  Enc label;
  unknown(label);
  label.Len(1, "__name__").Len(2, "m");
  unknown(label);
  Enc sample;
  unknown(sample);
  sample.Fixed64(1, std::bit_cast<uint64_t>(2.0)).Tag(2, 0).Varint(77);
  Enc ts;
  unknown(ts);
  ts.Len(1, label.b);
  ts.Len(3, "exemplar-bytes");
  ts.Len(2, sample.b);
  Enc req;
  unknown(req);
  req.Len(3, "metadata");
  req.Len(1, ts.b);
  // A series with only an exemplar: validated, not stored.
  req.Len(1, Enc().Len(1, Label("__name__", "h")).Len(3, "exemplar").b);
  RemoteWriteBatch batch;
  Status s = batch.Parse(req.b, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(batch.stats().samples, 1u);
  EXPECT_EQ(batch.stats().series, 1u);
  EXPECT_EQ(batch.stats().histograms, 0u);
  EXPECT_EQ(batch.stats().exemplars, 2u);
  auto r = RemoteWrite(Snappy(req.b), nullptr, db);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  auto data = db.Data();
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data.begin()->first, model::Labels({{"__name__", "m"}}));
  EXPECT_EQ(data.begin()->second[0].t, 77);
  EXPECT_EQ(data.begin()->second[0].v, 2.0);
}

// prompb Histogram helpers: sint encodings and packed fields.
uint64_t Zig(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
std::string Span(int32_t offset, uint32_t length) { return Enc().Tag(1, 0).Varint(Zig(offset)).Tag(2, 0).Varint(length).b; }
std::string PackedSint(const std::vector<int64_t>& v) {
  Enc e;
  for (int64_t x : v) e.Varint(Zig(x));
  return e.b;
}
std::string PackedDouble(const std::vector<double>& v) {
  std::string out;
  for (double d : v) {
    uint64_t b = std::bit_cast<uint64_t>(d);
    for (int i = 0; i < 8; i++) out += static_cast<char>((b >> (8 * i)) & 0xff);
  }
  return out;
}

// An integer histogram as Prometheus's client sends it: deltas.
std::string IntHistogram(int64_t t) {
  Enc h;
  h.Tag(1, 0).Varint(12);             // count_int
  h.Double(3, 18.4);                  // sum
  h.Tag(4, 0).Varint(Zig(1));         // schema 1
  h.Double(5, 0.001);                 // zero_threshold
  h.Tag(6, 0).Varint(2);              // zero_count_int
  h.Len(8, Span(0, 2));               // negative_spans
  h.Len(9, PackedSint({1, 1}));       // negative_deltas: 1, 2
  h.Len(11, Span(0, 2)).Len(11, Span(1, 2));  // positive_spans
  h.Len(12, PackedSint({2, -1, 2, -2}));      // positive_deltas: 2, 1, 3, 1
  h.Tag(14, 0).Varint(2);             // reset_hint NO
  h.Tag(15, 0).Varint(static_cast<uint64_t>(t));
  return h.b;
}

// Captures what AppendTo appends.
class Capture final : public storage::Appender {
 public:
  Result<storage::SeriesRef> Append(storage::SeriesRef, const model::Labels& l, int64_t t, double v) override {
    floats.push_back({l, {t, v}});
    return storage::SeriesRef{1};
  }
  Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef, const model::Labels& l, int64_t t,
                                             const model::FloatHistogram& h) override {
    hists.push_back({l, t, h});
    return storage::SeriesRef{2};
  }
  Status Commit() override { return Status::OK(); }
  void Rollback() override {}
  std::vector<std::pair<model::Labels, model::Sample>> floats;
  struct H {
    model::Labels labels;
    int64_t t;
    model::FloatHistogram h;
  };
  std::vector<H> hists;
};

TEST(RemoteWriteTest, IntegerHistogramDeltasBecomeAbsoluteFloatCounts) {
  model::FloatHistogram h;
  int64_t t = 0;
  std::string msg = IntHistogram(5000);
  Status s = DecodeRemoteWriteHistogram(msg, 0, &h, &t);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(t, 5000);
  EXPECT_EQ(h.count, 12);
  EXPECT_EQ(h.sum, 18.4);
  EXPECT_EQ(h.schema, 1);
  EXPECT_EQ(h.zero_threshold, 0.001);
  EXPECT_EQ(h.zero_count, 2);
  EXPECT_EQ(h.counter_reset_hint, model::CounterResetHint::kNotCounterReset);
  EXPECT_EQ(h.negative_buckets, (std::vector<double>{1, 2}));
  EXPECT_EQ(h.positive_buckets, (std::vector<double>{2, 1, 3, 1}));
  EXPECT_EQ(h.positive_spans, (std::vector<model::Span>{{0, 2}, {1, 2}}));
  EXPECT_EQ(h.negative_spans, (std::vector<model::Span>{{0, 2}}));
}

TEST(RemoteWriteTest, FloatHistogramWithCustomBucketsUnpackedFields) {
  Enc e;
  e.Double(2, 7.5);                   // count_float
  e.Double(3, 3.25);                  // sum
  e.Tag(4, 0).Varint(Zig(-53));       // custom buckets
  e.Len(11, Span(0, 3));
  e.Double(13, 1.5).Double(13, 4);    // positive_counts, unpacked
  e.Len(13, PackedDouble({2}));       // and packed
  e.Len(16, PackedDouble({0.5, 1}));  // custom_values
  e.Tag(14, 0).Varint(3);             // GAUGE
  e.Tag(15, 0).Varint(static_cast<uint64_t>(-5));  // negative timestamp
  model::FloatHistogram h;
  int64_t t = 0;
  Status s = DecodeRemoteWriteHistogram(e.b, 0, &h, &t);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(t, -5);
  EXPECT_EQ(h.count, 7.5);
  EXPECT_EQ(h.schema, -53);
  EXPECT_EQ(h.positive_buckets, (std::vector<double>{1.5, 4, 2}));
  EXPECT_EQ(h.custom_values, (std::vector<double>{0.5, 1}));
  EXPECT_EQ(h.counter_reset_hint, model::CounterResetHint::kGauge);
}

TEST(RemoteWriteTest, MalformedHistogramsAreRefusedNamingTheField) {
  auto err = [](const std::string& hist) {
    std::string req = Request({Enc().Len(1, Label("__name__", "h")).Len(4, hist).b});
    RemoteWriteBatch batch;
    Status s = batch.Parse(req, nullptr);
    EXPECT_FALSE(s.ok());
    return s.message();
  };
  EXPECT_NE(err(Enc().Len(4, "x").b).find("histogram schema"), std::string::npos);
  EXPECT_NE(err(Enc().Tag(4, 0).Varint(Zig(9)).b).find("invalid schema"), std::string::npos);
  EXPECT_NE(err(Enc().Tag(14, 0).Varint(9).b).find("reset_hint"), std::string::npos);
  EXPECT_NE(err(Enc().Len(13, "abc").b).find("positive_counts"), std::string::npos);
  EXPECT_NE(err(Enc().Double(2, 1).Len(12, PackedSint({1})).b).find("count_float with integer fields"),
            std::string::npos);
  // Spans say 3 buckets, deltas give 2.
  std::string m = err(Enc().Tag(1, 0).Varint(3).Len(11, Span(0, 3)).Len(12, PackedSint({1, 1})).b);
  EXPECT_NE(m.find("timeseries 0"), std::string::npos) << m;
  EXPECT_NE(m.find("histogram 0"), std::string::npos) << m;
  // A delta below zero makes a negative count.
  m = err(Enc().Tag(1, 0).Varint(3).Len(11, Span(0, 1)).Len(12, PackedSint({-1})).b);
  EXPECT_NE(m.find("negative"), std::string::npos) << m;
  EXPECT_NE(err(Enc().Tag(15, 1).b).find("histogram timestamp"), std::string::npos);
}

TEST(RemoteWriteTest, HistogramsAreAppendedWithFloatsAndStored) {
  std::string req = Request({
      Enc().Len(1, Label("__name__", "h")).Len(4, IntHistogram(1000)).Len(4, IntHistogram(2000)).b,
      Series({{"__name__", "up"}}, {{1, 1000}}),
      Enc().Len(1, Label("__name__", "h")).Len(2, Sample(4, 3000)).b,  // the same series, a float later
  });
  RemoteWriteBatch batch;
  Status s = batch.Parse(req, nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(batch.stats().samples, 2u);
  EXPECT_EQ(batch.stats().histograms, 2u);
  EXPECT_EQ(batch.stats().series, 2u);
  Capture c;
  ASSERT_TRUE(batch.AppendTo(&c).ok());
  ASSERT_EQ(c.hists.size(), 2u);
  EXPECT_EQ(c.hists[1].labels, model::Labels({{"__name__", "h"}}));
  EXPECT_EQ(c.hists[1].t, 2000);
  EXPECT_EQ(c.floats.size(), 2u);

  // Through the TSDB: both histograms read back, the float too.
  TestStorage db;
  auto r = RemoteWrite(Snappy(req), nullptr, db);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->histograms, 2u);
  auto data = db.Data();
  EXPECT_EQ(data[model::Labels({{"__name__", "h"}})].size(), 3u);
}

TEST(RemoteWriteTest, EmptyRequestIsOk) {
  TestStorage db;
  auto r = RemoteWrite(Snappy(""), nullptr, db);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->samples, 0u);
}

TEST(RemoteWriteTest, RejectsInvalidLabelsAndStoresNothing) {
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>> cases = {
      {{{"__name__", "m"}, {"a", "1"}, {"a", "2"}}, "duplicate label name \"a\""},
      {{{"__name__", "m"}, {"a", ""}, {"a", "2"}}, "duplicate label name"},
      {{{"__name__", "m"}, {"1bad", "x"}}, "invalid label name"},
      {{{"__name__", "m"}, {"", "x"}}, "empty label name"},
      {{{"__name__", "bad-name"}}, "invalid metric name"},
      {{{"__name__", "m"}, {"a", "\xff"}}, "UTF-8"},
      {{}, "empty label set"},
      {{{"a", ""}}, "empty label set"},
  };
  for (const auto& [labels, want] : cases) {
    std::string req = Request({Series({{"__name__", "ok"}}, {{1, 1}}), Series(labels, {{1, 1}})});
    // Without a cache labels are decoded as each series is read; with one,
    // after the whole body (SeriesCache::GetMany): the same error either way.
    std::string without_cache;
    for (bool with_cache : {false, true}) {
      TestStorage db;
      SeriesCache cache;
      auto r = RemoteWrite(Snappy(req), with_cache ? &cache : nullptr, db);
      ASSERT_FALSE(r.ok()) << want;
      EXPECT_TRUE(r.error().IsInvalidArgument());
      EXPECT_NE(r.error().message().find(want), std::string::npos) << r.error().message();
      EXPECT_NE(r.error().message().find("timeseries 1 (offset "), std::string::npos) << r.error().message();
      if (with_cache) {
        EXPECT_EQ(r.error().message(), without_cache);
      }
      without_cache = r.error().message();
      EXPECT_TRUE(db.Data().empty());
      EXPECT_EQ(db.commits, 0);
    }
  }
}

TEST(RemoteWriteTest, AcceptsMissingMetricName) {
  TestStorage db;
  RemoteWriteBatch batch;
  Status s = batch.Parse(Request({Series({{"job", "x"}}, {{1, 1}})}), nullptr);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(RemoteWriteTest, EveryTruncationIsRejectedWithOffset) {
  std::string req = Request({Series({{"__name__", "up"}, {"job", "a"}}, {{1, 1000}, {2, -2000}}),
                             Series({{"__name__", "x"}}, {{3, 3}})});
  RemoteWriteBatch full;
  ASSERT_TRUE(full.Parse(req, nullptr).ok());
  // The only valid prefixes end exactly at a top-level timeseries boundary.
  size_t first_end = Request({Series({{"__name__", "up"}, {"job", "a"}}, {{1, 1000}, {2, -2000}})}).size();
  for (size_t n = 0; n < req.size(); n++) {
    RemoteWriteBatch batch;
    std::string prefix = req.substr(0, n);  // own copy: ASan sees reads past it
    Status s = batch.Parse(prefix, nullptr);
    if (n == 0 || n == first_end) {
      EXPECT_TRUE(s.ok()) << n << ": " << s.ToString();
      continue;
    }
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_NE(s.message().find("offset "), std::string::npos) << s.message();
    EXPECT_EQ(batch.stats().samples, 0u);
  }
}

TEST(RemoteWriteTest, GarbageNeverCrashes) {
  std::string req = Request({Series({{"__name__", "up"}, {"job", "a"}}, {{1, 1000}}),
                             Series({{"__name__", "x"}, {"i", "y"}}, {{3, 3}, {4, 4}})});
  std::mt19937 rng(1);
  for (int i = 0; i < 20000; i++) {
    std::string m = req;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int j = 0; j < flips; j++) m[rng() % m.size()] = static_cast<char>(rng());
    RemoteWriteBatch batch;
    (void)batch.Parse(m, nullptr);
    (void)batch.ParseSnappy(m, nullptr);
    std::string z = Snappy(req);
    z[rng() % z.size()] = static_cast<char>(rng());
    (void)batch.ParseSnappy(z, nullptr);
  }
  // Unterminated, mismatched and deeply nested groups; bad wire types.
  for (std::string bad : {Enc().Tag(9, 3).b, Enc().Tag(9, 3).Tag(8, 4).b, std::string(100000, '\x4b'),
                          Enc().Tag(9, 6).b, Enc().Tag(9, 7).b, Enc().Tag(9, 4).b, std::string("\x00", 1),
                          std::string(11, '\xff'), Enc().Tag(1, 0).Varint(1).b}) {
    RemoteWriteBatch batch;
    EXPECT_FALSE(batch.Parse(bad, nullptr).ok());
  }
}

TEST(RemoteWriteTest, RejectsBadSnappy) {
  TestStorage db;
  for (std::string bad : {std::string(), std::string("\xff\xff\xff\xff\xff\xff", 6), std::string("\x0a\x00", 2),
                          std::string("garbage body")}) {
    auto r = RemoteWrite(bad, nullptr, db);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.error().IsInvalidArgument());
    EXPECT_NE(r.error().message().find("snappy"), std::string::npos) << r.error().message();
  }
  // A header declaring more than the limit is refused before allocating.
  std::string huge = Enc().Varint(kDefaultMaxBodyBytes + 1).b + "x";
  auto r = RemoteWrite(huge, nullptr, db);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("limit"), std::string::npos) << r.error().message();
}

// The decoded-size bound is the server's body limit (--web.max-request-body-bytes),
// checked against the header before allocating: 4 GiB declared is refused at once.
TEST(RemoteWriteTest, DecodedSizeBoundIsTheBodyLimit) {
  TestStorage db;
  RequestLimits limits;
  limits.max_decoded_bytes = 1024;
  std::string four_gib = Enc().Varint((uint64_t{4} << 30) - 1).b + "x";  // snappy's largest length
  auto r = RemoteWrite(four_gib, nullptr, db, limits);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().IsInvalidArgument());
  EXPECT_NE(r.error().message().find("4294967295 decoded bytes, more than the limit of 1024 (--web.max-request-body-bytes)"),
            std::string::npos)
      << r.error().message();
  std::vector<std::pair<double, int64_t>> many;
  for (int i = 0; i < 200; ++i) many.emplace_back(i, 1000 + i);
  std::string req = Request({Series({{"__name__", "c"}}, many)});
  ASSERT_GT(req.size(), 1024u);
  EXPECT_FALSE(RemoteWrite(Snappy(req), nullptr, db, limits).ok());
  limits.max_decoded_bytes = req.size();
  EXPECT_TRUE(RemoteWrite(Snappy(req), nullptr, db, limits).ok());
}

TEST(RemoteWriteTest, CacheKeysOnLabelBytesAndSurvivesStaleRefs) {
  TestStorage db;
  SeriesCache cache;
  auto push = [&](double v, int64_t t) {
    std::string req = Request({Series({{"__name__", "c"}, {"k", "v"}}, {{v, t}})});
    return RemoteWrite(Snappy(req), &cache, db);
  };
  ASSERT_TRUE(push(1, 1000).ok());
  EXPECT_EQ(cache.size(), 1u);
  ASSERT_TRUE(push(2, 2000).ok());
  EXPECT_EQ(cache.size(), 1u);
  // A stale ref (a series unknown to this DB) re-resolves from the bytes.
  TestStorage other;
  std::string req = Request({Series({{"__name__", "c"}, {"k", "v"}}, {{3, 3000}})});
  auto r = RemoteWrite(Snappy(req), &cache, other);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(other.Data().size(), 1u);
  auto data = db.Data();
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data.begin()->second.size(), 2u);
}

// GetMany answers as Get does, key by key: over every shard, with misses,
// repeats, and a table grown (rehashed) in between.
TEST(SeriesCacheTest, GetManyAnswersAsGet) {
  SeriesCache cache;
  std::vector<SeriesCache::Key> keys;
  for (int i = 0; i < 20000; i++) {
    keys.push_back(SeriesCache::KeyOf("series " + std::to_string(i), 7));
    if (i % 3 != 0) cache.Put(keys.back(), static_cast<storage::SeriesRef>(i + 1));
  }
  keys.push_back(keys[5]);  // a repeat
  std::vector<storage::SeriesRef> refs(keys.size(), 12345);
  cache.GetMany(keys, refs);
  size_t hits = 0;
  for (size_t i = 0; i < keys.size(); i++) {
    EXPECT_EQ(refs[i], cache.Get(keys[i])) << i;
    hits += refs[i] != 0 ? 1 : 0;
  }
  EXPECT_EQ(hits, 13333u + 1);
  EXPECT_EQ(refs[2], 3u);
  EXPECT_EQ(refs[3], 0u);
  cache.GetMany({}, {});
}

// Both halves of a key change with every byte of the text, at every length
// around the hash's 16-byte rounds (the tail included), with a trailing zero
// byte, and with the salt.
TEST(SeriesCacheTest, KeysChangeWithEveryByte) {
  for (size_t n = 0; n <= 49; n++) {
    std::string text;
    for (size_t i = 0; i < n; i++) text.push_back(static_cast<char>('a' + i % 26));
    const SeriesCache::Key k = SeriesCache::KeyOf(text, 7);
    EXPECT_EQ(k, SeriesCache::KeyOf(text, 7));
    EXPECT_NE(k.a, SeriesCache::KeyOf(text, 8).a) << n;
    const SeriesCache::Key z = SeriesCache::KeyOf(text + std::string(1, '\0'), 7);
    EXPECT_NE(k.a, z.a) << n;
    EXPECT_NE(k.b, z.b) << n;
    for (size_t i = 0; i < n; i++) {
      for (int bit : {0, 7}) {
        std::string t = text;
        t[i] = static_cast<char>(t[i] ^ (1 << bit));
        const SeriesCache::Key d = SeriesCache::KeyOf(t, 7);
        EXPECT_NE(k.a, d.a) << n << " " << i;
        EXPECT_NE(k.b >> 32, d.b >> 32) << n << " " << i;  // the CRC
      }
    }
  }
}

TEST(RemoteWriteTest, InterleavedLabelsAndRepeatedSeries) {
  TestStorage db;
  Enc ts;
  ts.Len(1, Label("__name__", "m")).Len(2, Sample(1, 10)).Len(1, Label("z", "1")).Len(2, Sample(2, 20));
  Enc ts2;  // the same series again, contiguous this time: different bytes
  ts2.Len(1, Label("__name__", "m")).Len(1, Label("z", "1")).Len(2, Sample(3, 30));
  std::string req = Enc().Len(1, ts.b).Len(1, ts.b).Len(1, ts2.b).b;
  RemoteWriteBatch batch;
  ASSERT_TRUE(batch.Parse(req, nullptr).ok());
  EXPECT_EQ(batch.stats().series, 1u);  // concatenated label bytes are equal
  auto r = RemoteWrite(Snappy(Enc().Len(1, ts.b).Len(1, ts2.b).b), nullptr, db);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  auto data = db.Data();
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data.begin()->first, model::Labels({{"__name__", "m"}, {"z", "1"}}));
  EXPECT_EQ(data.begin()->second.size(), 3u);
}

// One batch reused for bodies of different sizes, as a server worker does:
// thousands of series, each written twice in one body, then a smaller body
// with other series; the series index grows and is emptied between bodies.
TEST(RemoteWriteTest, ReusedBatchWithManyRepeatedSeries) {
  TestStorage db;
  SeriesCache cache;
  RemoteWriteBatch batch;
  auto body = [](int n, int64_t t, std::string_view name) {
    std::vector<std::string> ts;
    for (int round = 0; round < 2; round++) {
      for (int i = 0; i < n; i++) {
        ts.push_back(Series({{"__name__", std::string(name)}, {"i", std::to_string(i)}},
                            {{static_cast<double>(i), t + round}}));
      }
    }
    return Snappy(Request(ts));
  };
  for (auto [n, name] : {std::pair{3000, "big"}, std::pair{10, "small"}}) {
    ASSERT_TRUE(batch.ParseSnappy(body(n, 1000, name), &cache).ok());
    EXPECT_EQ(batch.stats().series, static_cast<uint64_t>(n));
    EXPECT_EQ(batch.stats().samples, 2u * n);
    ASSERT_TRUE(AppendAndCommit(db, [&](storage::Appender* app) { return batch.AppendTo(app); }).ok());
    batch.Clear();
  }
  auto data = db.Data();
  ASSERT_EQ(data.size(), 3010u);
  for (const auto& [labels, samples] : data) {
    ASSERT_EQ(samples.size(), 2u) << labels.ToString();
    EXPECT_EQ(samples[0].t, 1000);
    EXPECT_EQ(samples[1].t, 1001);
    EXPECT_EQ(samples[0].v, std::stod(std::string(labels.Get("i"))));
  }
}

// A body from the peer benchmark's encoder (/work/shared/bench/peers/wire.py:
// proto_series_prefix + proto_sample, framed by snappy_block_literal), so the
// decoder agrees with an independent implementation.
TEST(RemoteWriteTest, DecodesPeerBenchEncoderBody) {
  TestStorage db;
  static const char kBody[] =
      "\x80\x01\xf0\x7f\x0a\x3e\x0a\x14\x0a\x08\x5f\x5f\x6e\x61\x6d\x65\x5f\x5f\x12\x08\x67\x70\x75\x5f"
      "\x75\x74\x69\x6c\x0a\x08\x0a\x03\x67\x70\x75\x12\x01\x30\x0a\x0a\x0a\x04\x68\x6f\x73\x74\x12\x02"
      "\x6e\x31\x12\x10\x09\x00\x00\x00\x00\x00\x00\xe8\x3f\x10\x80\xd0\x95\xff\xbc\x31\x0a\x3e\x0a\x14"
      "\x0a\x08\x5f\x5f\x6e\x61\x6d\x65\x5f\x5f\x12\x08\x67\x70\x75\x5f\x75\x74\x69\x6c\x0a\x08\x0a\x03"
      "\x67\x70\x75\x12\x01\x31\x0a\x0a\x0a\x04\x68\x6f\x73\x74\x12\x02\x6e\x31\x12\x10\x09\x00\x00\x00"
      "\x00\x00\x00\xf4\x3f\x10\xe8\xd7\x95\xff\xbc\x31";
  auto r = RemoteWrite(std::string_view(kBody, sizeof(kBody) - 1), nullptr, db);
  ASSERT_TRUE(r.ok()) << r.error().ToString();
  EXPECT_EQ(r->samples, 2u);
  auto data = db.Data();
  ASSERT_EQ(data.size(), 2u);
  auto g0 = data[model::Labels({{"__name__", "gpu_util"}, {"gpu", "0"}, {"host", "n1"}})];
  ASSERT_EQ(g0.size(), 1u);
  EXPECT_EQ(g0[0].t, 1700000000000);
  EXPECT_EQ(g0[0].v, 0.75);
  auto g1 = data[model::Labels({{"__name__", "gpu_util"}, {"gpu", "1"}, {"host", "n1"}})];
  ASSERT_EQ(g1.size(), 1u);
  EXPECT_EQ(g1[0].t, 1700000001000);
  EXPECT_EQ(g1[0].v, 1.25);
}

}  // namespace
}  // namespace trainwatch::ingest
