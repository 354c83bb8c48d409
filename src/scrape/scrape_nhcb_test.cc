// convert_classic_histograms_to_nhcb: classic histograms of a scrape stored
// as native histograms with custom buckets, as Prometheus 3 does.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ingest/proto_enc_test_util.h"
#include "model/sample.h"
#include "scrape/scrape_loop.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::scrape {
namespace {

using Data = std::map<model::Labels, std::vector<model::Sample>>;

constexpr const char* kJob = "{job_name: j, static_configs: [{targets: ['h:1']}], convert_classic_histograms_to_nhcb: true";
constexpr const char* kText = "text/plain; version=0.0.4";
constexpr const char* kOM = "application/openmetrics-text; version=1.0.0";
constexpr const char* kProtoType = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

std::unique_ptr<ScrapeLoop> MakeLoop(const std::string& job_yaml, tsdb::testing::TempDB& db) {
  auto r = ParseScrapeConfigs(YAML::Load("scrape_configs: [" + job_yaml + "]"), GlobalDefaults{15000, 10000});
  EXPECT_TRUE(r.ok()) << r.error().ToString();
  auto c = std::make_shared<const ScrapeConfig>((*r)[0]);
  return std::make_unique<ScrapeLoop>(c, TargetsFromGroup(*c, c->static_configs[0])[0], db.get());
}

model::Labels L(std::initializer_list<std::pair<std::string_view, std::string_view>> extra) {
  model::LabelsBuilder b(model::Labels{{"instance", "h:1"}, {"job", "j"}});
  for (auto [k, v] : extra) b.Set(k, v);
  return b.Build();
}

double Last(const Data& d, const model::Labels& l) {
  auto it = d.find(l);
  if (it == d.end() || it->second.empty()) return -12345;
  return it->second.back().v;
}

struct HistSample {
  int64_t t;
  int64_t st;
  model::FloatHistogram h;
};

// The histogram samples of series `l`, with their start timestamps.
std::vector<HistSample> Hists(tsdb::testing::TempDB& db, const model::Labels& l) {
  std::vector<HistSample> out;
  auto q = db->NewQuerier(model::kMinTime, model::kMaxTime);
  auto m = model::Matcher::Make(model::MatchType::kEqual, "__name__", std::string(l.Get("__name__")));
  auto set = (*q)->Select(true, {}, {*m});
  while (set->Next()) {
    if (set->At().labels() != l) continue;
    auto it = set->At().Iterator();
    while (it->Next()) {
      if (it->AtIsHistogram()) out.push_back({it->At().t, it->AtST(), *it->AtHistogram()});
    }
  }
  return out;
}

// Two label sets of one classic histogram (the second without +Inf, its
// _count standing in) and a gauge.
constexpr const char* kBody =
    "# HELP rpc_seconds Latency.\n"
    "# TYPE rpc_seconds histogram\n"
    "rpc_seconds_bucket{code=\"200\",le=\"0.1\"} 2\n"
    "rpc_seconds_bucket{code=\"200\",le=\"1\"} 5\n"
    "rpc_seconds_bucket{code=\"200\",le=\"+Inf\"} 6\n"
    "rpc_seconds_sum{code=\"200\"} 3.5\n"
    "rpc_seconds_count{code=\"200\"} 6\n"
    "rpc_seconds_bucket{le=\"1\",code=\"500\"} 1\n"
    "rpc_seconds_count{code=\"500\"} 4\n"
    "rpc_seconds_sum{code=\"500\"} 9\n"
    "# TYPE temp gauge\n"
    "temp 21\n";

TEST(ScrapeNhcbTest, TextClassicHistogramsBecomeNativeWithCustomBuckets) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(std::string(kJob) + "}", db);
  loop->ProcessScrape(Status::OK(), kBody, kText, 1000, 0);
  EXPECT_EQ(loop->state().last_error, "");
  Data d = db.Data();
  // The classic series are not stored; the others are.
  EXPECT_EQ(d.count(L({{"__name__", "rpc_seconds_count"}, {"code", "200"}})), 0u);
  EXPECT_EQ(d.count(L({{"__name__", "rpc_seconds_bucket"}, {"code", "200"}, {"le", "1"}})), 0u);
  EXPECT_EQ(Last(d, L({{"__name__", "temp"}})), 21);
  // A histogram counts as one sample, as in Prometheus.
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_scraped"}})), 3);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_post_metric_relabeling"}})), 3);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_series_added"}})), 3);
  auto ok = Hists(db, L({{"__name__", "rpc_seconds"}, {"code", "200"}}));
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].t, 1000);
  EXPECT_EQ(ok[0].h.schema, model::kCustomBucketsSchema);
  EXPECT_EQ(ok[0].h.custom_values, (std::vector<double>{0.1, 1}));
  EXPECT_EQ(ok[0].h.positive_buckets, (std::vector<double>{2, 3, 1}));
  EXPECT_EQ(ok[0].h.count, 6);
  EXPECT_EQ(ok[0].h.sum, 3.5);
  auto err = Hists(db, L({{"__name__", "rpc_seconds"}, {"code", "500"}}));
  ASSERT_EQ(err.size(), 1u);
  EXPECT_EQ(err[0].h.custom_values, (std::vector<double>{1}));
  EXPECT_EQ(err[0].h.positive_buckets, (std::vector<double>{1, 3}));  // +Inf added with _count
  EXPECT_EQ(err[0].h.count, 4);
  EXPECT_EQ(loop->metadata().at("rpc_seconds").type, "histogram");

  // Next scrape: the cached series by ref.
  loop->ProcessScrape(Status::OK(), kBody, kText, 2000, 0);
  d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_series_added"}})), 0);
  EXPECT_EQ(Hists(db, L({{"__name__", "rpc_seconds"}, {"code", "200"}})).size(), 2u);
  // The histogram goes away: its stale marker is a histogram with a stale sum.
  loop->ProcessScrape(Status::OK(), "temp 22\n", kText, 3000, 0);
  ok = Hists(db, L({{"__name__", "rpc_seconds"}, {"code", "200"}}));
  ASSERT_EQ(ok.size(), 3u);
  EXPECT_EQ(ok[2].t, 3000);
  EXPECT_TRUE(model::IsStaleNaN(ok[2].h.sum));
}

TEST(ScrapeNhcbTest, AlwaysScrapeClassicHistogramsKeepsBoth) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(std::string(kJob) + ", always_scrape_classic_histograms: true}", db);
  loop->ProcessScrape(Status::OK(), kBody, kText, 1000, 0);
  loop->ProcessScrape(Status::OK(), kBody, kText, 2000, 0);
  EXPECT_EQ(loop->state().last_error, "");
  Data d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "rpc_seconds_count"}, {"code", "200"}})), 6);
  EXPECT_EQ(Last(d, L({{"__name__", "rpc_seconds_bucket"}, {"code", "500"}, {"le", "1"}})), 1);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_scraped"}})), 8 + 2 + 1);  // classic, NHCBs, gauge
  EXPECT_EQ(Hists(db, L({{"__name__", "rpc_seconds"}, {"code", "500"}})).size(), 2u);
}

// What Prometheus's NHCBParser leaves alone or drops.
TEST(ScrapeNhcbTest, OnlyHistogramFamiliesAndBrokenOnesAreDropped) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(std::string(kJob) + "}", db);
  loop->ProcessScrape(Status::OK(),
                      // Not cumulative: neither the NHCB nor the classic series.
                      "# TYPE bad histogram\n"
                      "bad_bucket{le=\"1\"} 5\n"
                      "bad_bucket{le=\"2\"} 3\n"
                      "bad_count 5\n"
                      // _count differs from +Inf: the same.
                      "# TYPE mismatch histogram\n"
                      "mismatch_bucket{le=\"+Inf\"} 3\n"
                      "mismatch_count 4\n"
                      // A bucket whose le is no float is an ordinary series.
                      "# TYPE odd histogram\n"
                      "odd_bucket{le=\"x\"} 1\n"
                      "odd_count 1\n"
                      // Not TYPE histogram: untouched.
                      "# TYPE g gauge\n"
                      "g_bucket{le=\"+Inf\"} 1\n"
                      "u_bucket{le=\"1\"} 1\n"
                      "# TYPE s summary\n"
                      "s_count 2\n"
                      "s_sum 3\n",
                      kText, 1000, 0);
  EXPECT_EQ(loop->state().last_error, "");
  Data d = db.Data();
  EXPECT_EQ(d.count(L({{"__name__", "bad_count"}})), 0u);
  EXPECT_EQ(d.count(L({{"__name__", "bad_bucket"}, {"le", "1"}})), 0u);
  EXPECT_EQ(Hists(db, L({{"__name__", "bad"}})).size(), 0u);
  EXPECT_EQ(d.count(L({{"__name__", "mismatch_count"}})), 0u);
  EXPECT_EQ(Hists(db, L({{"__name__", "mismatch"}})).size(), 0u);
  EXPECT_EQ(Last(d, L({{"__name__", "odd_bucket"}, {"le", "x"}})), 1);
  auto odd = Hists(db, L({{"__name__", "odd"}}));
  ASSERT_EQ(odd.size(), 1u);
  EXPECT_EQ(odd[0].h.count, 1);
  EXPECT_EQ(Last(d, L({{"__name__", "g_bucket"}, {"le", "+Inf"}})), 1);
  EXPECT_EQ(Last(d, L({{"__name__", "u_bucket"}, {"le", "1"}})), 1);
  EXPECT_EQ(Last(d, L({{"__name__", "s_count"}})), 2);
  EXPECT_EQ(Last(d, L({{"__name__", "up"}})), 1);
}

// The histogram's series goes through metric_relabel_configs with its own
// labels (name without suffix, no le) and counts against sample_limit as one.
TEST(ScrapeNhcbTest, MetricRelabelingAndSampleLimit) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(std::string(kJob) +
                           ", sample_limit: 2, metric_relabel_configs: ["
                           "{source_labels: [__name__, code], regex: 'rpc_seconds;500', action: drop},"
                           "{source_labels: [code], target_label: status}, {regex: code, action: labeldrop}]}",
                       db);
  loop->ProcessScrape(Status::OK(), kBody, kText, 1000, 0);
  EXPECT_EQ(loop->state().last_error, "");
  Data d = db.Data();
  EXPECT_EQ(Hists(db, L({{"__name__", "rpc_seconds"}, {"status", "200"}})).size(), 1u);
  EXPECT_EQ(Hists(db, L({{"__name__", "rpc_seconds"}, {"status", "500"}})).size(), 0u);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_scraped"}})), 3);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_post_metric_relabeling"}})), 2);

  tsdb::testing::TempDB db2;
  auto limited = MakeLoop(std::string(kJob) + ", sample_limit: 2}", db2);
  limited->ProcessScrape(Status::OK(), kBody, kText, 1000, 0);
  EXPECT_EQ(limited->state().last_error, "sample limit exceeded");
  EXPECT_EQ(Hists(db2, L({{"__name__", "rpc_seconds"}, {"code", "200"}})).size(), 0u);
}

// OpenMetrics: `_created` is the histogram's start timestamp (the
// _created series itself is still stored, as before); explicit timestamps
// are kept.
TEST(ScrapeNhcbTest, OpenMetricsCreatedIsTheStartTimestamp) {
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(std::string(kJob) + "}", db);
  const std::string body =
      "# TYPE lat histogram\n"
      "lat_bucket{le=\"1.0\"} 1 5.5\n"
      "lat_bucket{le=\"+Inf\"} 3 5.5\n"
      "lat_count 3 5.5\n"
      "lat_sum 2.5 5.5\n"
      "lat_created 4.25 5.5\n"
      "# TYPE gh gaugehistogram\n"  // not converted (Prometheus: TYPE histogram only)
      "gh_bucket{le=\"+Inf\"} 2\n"
      "gh_gcount 2\n"
      "# EOF\n";
  loop->ProcessScrape(Status::OK(), body, kOM, 9000, 0);
  EXPECT_EQ(loop->state().last_error, "");
  auto h = Hists(db, L({{"__name__", "lat"}}));
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].t, 5500);
  EXPECT_EQ(h[0].st, 4250);
  EXPECT_EQ(h[0].h.count, 3);
  EXPECT_EQ(h[0].h.custom_values, (std::vector<double>{1}));
  Data d = db.Data();
  EXPECT_EQ(Last(d, L({{"__name__", "lat_created"}})), 4.25);
  EXPECT_EQ(Last(d, L({{"__name__", "gh_bucket"}, {"le", "+Inf"}})), 2);
  EXPECT_EQ(Hists(db, L({{"__name__", "gh"}})).size(), 0u);
}

// Protobuf: a classic histogram (native histograms off, or none exposed)
// becomes one NHCB; one that does not convert fails the scrape.
TEST(ScrapeNhcbTest, ProtobufClassicHistogram) {
  using ingest::Enc;
  auto delimited = [](const std::string& m) { return Enc().Varint(m.size()).b + m; };
  auto bucket = [](uint64_t cum, double upper) { return Enc().Tag(1, 0).Varint(cum).Double(2, upper).b; };
  const std::string h = Enc().Tag(1, 0).Varint(7).Double(2, 12).Len(3, bucket(2, 0.5)).Len(3, bucket(5, 1)).b;
  const std::string body = delimited(Enc().Len(1, "ph").Tag(3, 0).Varint(4).Len(4, Enc().Len(7, h).b).b);
  tsdb::testing::TempDB db;
  auto loop = MakeLoop(std::string(kJob) + "}", db);
  loop->ProcessScrape(Status::OK(), body, kProtoType, 1000, 0);
  EXPECT_EQ(loop->state().last_error, "");
  auto got = Hists(db, L({{"__name__", "ph"}}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].h.custom_values, (std::vector<double>{0.5, 1}));
  EXPECT_EQ(got[0].h.positive_buckets, (std::vector<double>{2, 3, 2}));
  Data d = db.Data();
  EXPECT_EQ(d.count(L({{"__name__", "ph_count"}})), 0u);
  EXPECT_EQ(Last(d, L({{"__name__", "scrape_samples_scraped"}})), 1);

  // _count is not the +Inf bucket's.
  const std::string broken =
      Enc().Tag(1, 0).Varint(7).Len(3, bucket(2, 0.5)).Len(3, bucket(5, std::numeric_limits<double>::infinity())).b;
  loop->ProcessScrape(Status::OK(), delimited(Enc().Len(1, "ph").Tag(3, 0).Varint(4).Len(4, Enc().Len(7, broken).b).b),
                      kProtoType, 2000, 0);
  EXPECT_NE(loop->state().last_error.find("histogram \"ph\": convert to native histogram with custom buckets: count mismatch"),
            std::string::npos)
      << loop->state().last_error;
}

}  // namespace
}  // namespace trainwatch::scrape
