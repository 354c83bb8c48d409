#include "http/api.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/file.h"
#include "base/memory.h"
#include "base/coding.h"
#include "base/proto_reader.h"
#include "remote/proto.h"
#include "remote/read.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::http {
namespace {

using nlohmann::json;

// A protobuf message as text, for comparing encoded output: "field:value"
// in order, doubles with %g, varints as numbers (zigzag not undone),
// length-delimited fields as a nested message in braces when their path
// ("4", "4.7", ...) is in `msgs`, packed doubles in brackets when in
// `packed`, else as a quoted string.
std::string DumpProto(std::string_view msg, const std::set<std::string>& msgs, const std::set<std::string>& packed,
                      const std::string& path = "") {
  ProtoReader r(msg);
  std::string out;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    if (!r.Tag(&f, &w).ok()) return out + " <bad tag>";
    std::string here = path.empty() ? std::to_string(f) : path + "." + std::to_string(f);
    if (!out.empty()) out += ' ';
    out += std::to_string(f) + ":";
    char buf[40];
    if (w == kVarint) {
      uint64_t v = 0;
      (void)r.Varint(&v);
      out += std::to_string(v);
    } else if (w == kFixed64) {
      uint64_t bits = 0;
      (void)r.Fixed64(&bits);
      double d;
      std::memcpy(&d, &bits, 8);
      std::snprintf(buf, sizeof buf, "%g", d);
      out += buf;
    } else if (w == kLen) {
      std::string_view b;
      (void)r.Bytes(&b);
      if (msgs.count(here) != 0) {
        out += "{" + DumpProto(b, msgs, packed, here) + "}";
      } else if (packed.count(here) != 0) {
        out += "[";
        for (size_t i = 0; i + 8 <= b.size(); i += 8) {
          double d;
          std::memcpy(&d, b.data() + i, 8);
          std::snprintf(buf, sizeof buf, i == 0 ? "%g" : " %g", d);
          out += buf;
        }
        out += "]";
      } else {
        out += "\"" + std::string(b) + "\"";
      }
    } else {
      return out + " <wire " + std::to_string(w) + ">";
    }
  }
  return out;
}

class ApiTest : public ::testing::Test {
 protected:
  ApiTest() : engine_(promql::EngineOptions{}), api_(Deps(db_.get(), &engine_)) {}
  static ApiDeps Deps(tsdb::DB* db, promql::Engine* engine) {
    ApiDeps d{db, engine, BuildInfo{"0.1.0", "abc", "main", "me", "today", "gcc"}};
    d.enable_admin_api = true;  // as --web.enable-admin-api (AdminApiIsOffByDefault: without)
    return d;
  }

  Response Do(std::string method, std::string path, std::vector<std::pair<std::string, std::string>> params = {},
              std::string_view body = {}) {
    Request r;
    r.method = std::move(method);
    r.path = std::move(path);
    r.params = std::move(params);
    r.body = body;
    r.receive_time_ms = 1700000000000;
    return api_.Handle(r);
  }
  static std::string Drain(Response& r) {
    if (!r.stream) return r.body;
    std::string out;
    while (true) {
      Response::Chunk c = r.stream(&out);
      EXPECT_NE(c, Response::Chunk::kError);
      if (c != Response::Chunk::kMore) break;
    }
    return out;
  }

  tsdb::testing::TempDB db_;
  promql::Engine engine_;
  Api api_;
};

TEST_F(ApiTest, HealthAndReady) {
  auto r = Do("GET", "/-/healthy");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "trainwatch is Healthy.\n");
  EXPECT_EQ(Do("GET", "/-/ready").body, "trainwatch is Ready.\n");
  EXPECT_EQ(Do("GET", "/nope").status, 404);
  EXPECT_EQ(Do("GET", "/api/v1/import/prometheus").status, 405);
}

// Issue 25: a failed fsync turns /-/ready red and says why; the write that
// hit it is not acknowledged, and later writes are refused too (the kernel
// may have dropped what the fsync was to keep).
TEST_F(ApiTest, FailedFsyncTurnsReadyRedAndSaysWhy) {
  ASSERT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "before 1 1700000000000\n").status, 204);
  file::testing::SetSyncFault([](int) { return EIO; });
  auto r = Do("POST", "/api/v1/import/prometheus", {}, "during 1 1700000000000\n");
  file::testing::SetSyncFault(nullptr);
  EXPECT_EQ(r.status, 500) << r.body;
  r = Do("GET", "/-/ready");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("trainwatch is not ready: wal: "), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("fdatasync"), std::string::npos) << r.body;
  EXPECT_NE(Do("POST", "/api/v1/import/prometheus", {}, "after 1 1700000000000\n").status, 204);
  EXPECT_EQ(Do("GET", "/-/healthy").status, 200);
}

// Issue 17, a full disk: pushes answer 507 with Retry-After (Prometheus and
// the clients retry 5xx) and keep nothing; reads and /-/ready go on; when
// space returns the same push is taken.
TEST_F(ApiTest, FullDiskAnswers507WithRetryAfterAndRecovers) {
  ASSERT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "before 1 1700000000000\n").status, 204);
  file::testing::SetWriteFault([](const std::string&) { return ENOSPC; });
  auto r = Do("POST", "/api/v1/import/prometheus", {}, "during 1 1700000000000\n");
  EXPECT_EQ(r.status, 507) << r.body;
  EXPECT_NE(r.body.find("No space left on device"), std::string::npos) << r.body;
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"Retry-After", std::string(kNoSpaceRetryAfter)}));
  EXPECT_EQ(Do("GET", "/-/ready").status, 200);  // reads go on; writes come back by themselves
  r = Do("GET", "/api/v1/query", {{"query", "before"}, {"time", "1700000000"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("\"before\""), std::string::npos) << r.body;
  file::testing::SetWriteFault(nullptr);
  EXPECT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "during 1 1700000000000\n").status, 204);
  r = Do("GET", "/api/v1/query", {{"query", "during"}, {"time", "1700000000"}});
  EXPECT_NE(r.body.find("\"during\""), std::string::npos) << r.body;
  // A JSON API's error (ApiError) says the same.
  Response e = ApiError(Status::FromErrno("write wal/00000001", ENOSPC));
  EXPECT_EQ(e.status, 507);
  EXPECT_EQ(e.headers.size(), 1u);
}

// A text import into `api` at receive time 1700000000000.
Response PostImport(Api& api, std::string_view body) {
  Request r;
  r.method = "POST";
  r.path = "/api/v1/import/prometheus";
  r.body = body;
  r.receive_time_ms = 1700000000000;
  return api.Handle(r);
}

std::string GetMetrics(Api& api) {
  Request m;
  m.method = "GET";
  m.path = "/metrics";
  return api.Handle(m).body;
}

// /metrics renders the registry handed in ApiDeps.metrics: the Api's own
// families (HTTP, TSDB) and the modules' in one list sorted by name, each
// family once; the Api's registrations go with it.
TEST_F(ApiTest, MetricsRenderTheSharedRegistry) {
  common::metrics::Registry registry;
  common::metrics::CounterFamily module("a_module_events_total", "Events of a module.", {"kind"});
  common::metrics::Registration reg = registry.MustRegister({&module});
  module.With({"x"}).Inc(2);
  const std::string module_text =
      "# HELP a_module_events_total Events of a module.\n"
      "# TYPE a_module_events_total counter\n"
      "a_module_events_total{kind=\"x\"} 2\n";
  {
    ApiDeps deps{db_.get(), &engine_, {}};
    deps.metrics = &registry;
    Api api(std::move(deps));
    GetMetrics(api);
    const std::string m = GetMetrics(api);
    const size_t module_at = m.find(module_text);
    const size_t http_at = m.find("trainwatch_http_requests_total{code=\"200\",handler=\"/metrics\"} 1\n");
    const size_t tsdb_at = m.find("# TYPE trainwatch_tsdb_head_series gauge\n");
    ASSERT_NE(module_at, std::string::npos) << m;
    ASSERT_NE(http_at, std::string::npos) << m;
    ASSERT_NE(tsdb_at, std::string::npos) << m;
    EXPECT_LT(module_at, http_at);
    EXPECT_LT(http_at, tsdb_at);
    EXPECT_EQ(m.find("# TYPE trainwatch_tsdb_head_series", tsdb_at + 1), std::string::npos) << m;
  }
  std::string after;
  registry.Render(&after);
  EXPECT_EQ(after, module_text);
}

// --storage.max-series: a push with new series beyond the limit stores
// the rest and answers 400 naming what was refused (not retried by
// senders); /metrics counts the refusals.
TEST_F(ApiTest, SeriesLimitAnswers400ForNewSeriesAndStoresTheRest) {
  tsdb::testing::TempDB limited([](tsdb::Options* o) { o->series_limits.max_series = 1; });
  Api api(ApiDeps{limited.get(), &engine_, {}});
  auto post = [&](std::string_view body) { return PostImport(api, body); };
  EXPECT_EQ(post("kept 1 1700000000000\n").status, 204);
  Response r = post("kept 2 1700000001000\nnew_one 5 1700000001000\n");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.body,
            "1 of 2 samples refused: series new_one{} refused: it is new and the head holds the series limit of 1 "
            "(--storage.max-series); "
            "the other samples were stored\n");
  EXPECT_EQ(limited.NumSamples(), 2u);
  EXPECT_NE(GetMetrics(api).find("trainwatch_tsdb_series_refused_total{limit=\"max_series\"} 1\n"), std::string::npos);
}

// --ingest.max-samples-per-request, --ingest.max-series-per-request: a push
// beyond one is a 400 naming the flag, nothing of it stored; /metrics counts
// it by limit. A label limit refuses the new series alone.
TEST_F(ApiTest, RequestAndLabelLimitsAnswer400AndAreCounted) {
  tsdb::testing::TempDB db([](tsdb::Options* o) { o->series_limits.max_label_value_length = 4; });
  ApiDeps deps{db.get(), &engine_, {}};
  deps.request_limits = {.max_series = 0, .max_samples = 2};
  Api api(std::move(deps));
  auto post = [&](std::string_view body) { return PostImport(api, body); };
  Response r = post("a 1 1700000000000\na 2 1700000001000\na 3 1700000002000\n");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.body, "request has more than 2 samples (--ingest.max-samples-per-request); nothing of it was stored\n");
  r = post("a 1 1700000000000\nb{x=\"12345\"} 2 1700000000000\n");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.body,
            "1 of 2 samples refused: series b{x=\"12345\"} refused: it has a value of 5 bytes for label x, more than 4 "
            "(--ingest.max-label-value-length); the other samples were stored\n");
  EXPECT_EQ(db.NumSamples(), 1u);
  std::string metrics = GetMetrics(api);
  EXPECT_NE(metrics.find("trainwatch_ingest_requests_refused_total{limit=\"samples_per_request\"} 1\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("trainwatch_ingest_requests_refused_total{limit=\"series_per_request\"} 0\n"),
            std::string::npos);
  EXPECT_NE(metrics.find("trainwatch_tsdb_series_refused_total{limit=\"label_value_length\"} 1\n"),
            std::string::npos);
}

// --web.max-request-body-bytes bounds a snappy body as decoded: a header
// declaring 4 GiB (snappy's largest length) is a 400 naming the flag before anything is allocated.
TEST_F(ApiTest, SnappyHeaderBeyondTheBodyLimitIs400) {
  ApiDeps deps{db_.get(), &engine_, {}};
  deps.request_limits.max_decoded_bytes = 1024;
  Api api(std::move(deps));
  Request r;
  r.method = "POST";
  r.path = "/api/v1/write";
  const std::string body = std::string("\xff\xff\xff\xff\x0f", 5) + "x";  // varint 2^32 - 1 (snappy's largest), then a byte
  r.body = body;
  Response resp = api.Handle(r);
  EXPECT_EQ(resp.status, 400) << resp.body;
  EXPECT_EQ(resp.body,
            "remote write: snappy: the body declares 4294967295 decoded bytes, more than the limit of 1024 "
            "(--web.max-request-body-bytes)\n");
}

TEST_F(ApiTest, ImportThenExportRoundTrips) {
  auto r = Do("POST", "/api/v1/import/prometheus", {},
              "# TYPE up gauge\nup{job=\"a\",instance=\"x\"} 1 1700000000000\nup{job=\"a\",instance=\"x\"} 2.5 "
              "1700000015000\nup{job=\"b\"} NaN\nother +Inf 5\n");
  ASSERT_EQ(r.status, 204) << r.body;
  r = Do("GET", "/api/v1/export", {{"match[]", "up"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Drain(r),
            "{\"metric\":{\"__name__\":\"up\",\"instance\":\"x\",\"job\":\"a\"},\"values\":[1,2.5],\"timestamps\":["
            "1700000000000,1700000015000]}\n"
            "{\"metric\":{\"__name__\":\"up\",\"job\":\"b\"},\"values\":[null],\"timestamps\":[1700000000000]}\n");
  r = Do("GET", "/api/v1/export", {{"match[]", "{__name__=~\"other|up\",job!=\"a\"}"}, {"start", "0"}, {"end", "1"}});
  EXPECT_EQ(Drain(r), "{\"metric\":{\"__name__\":\"other\"},\"values\":[\"Infinity\"],\"timestamps\":[5]}\n");
  // Two selectors matching the same series write it once.
  r = Do("GET", "/api/v1/export", {{"match[]", "other"}, {"match[]", "{__name__=\"other\"}"}});
  EXPECT_EQ(Drain(r), "{\"metric\":{\"__name__\":\"other\"},\"values\":[\"Infinity\"],\"timestamps\":[5]}\n");
}

TEST_F(ApiTest, FederateWritesNewestSamplesAsPrometheus) {
  const int64_t now = NowMillis();
  auto ts = [&](int64_t ago) { return std::to_string(now - ago); };
  std::string body = "up{job=\"a\",instance=\"x\"} 1 " + ts(60000) + "\nup{job=\"a\",instance=\"x\"} 2 " + ts(1000) +
                     "\njob:up:sum{job=\"a\"} 1234567 " + ts(2000) + "\nzz{v=\"q\\\"b\\\\c\"} 0.00001 " + ts(3000) +
                     "\nup{job=\"old\"} 1 " + ts(600000) + "\n";
  auto r = Do("POST", "/api/v1/import/prometheus", {}, body);
  ASSERT_EQ(r.status, 204) << r.body;
  r = Do("GET", "/federate", {{"match[]", "up"}, {"match[]", "job:up:sum"}, {"match[]", "{__name__=~\"up|zz\"}"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  // Sorted by name; the series outside the 5 m lookback is left out; a
  // series selected twice is written once; instance="" where it is missing.
  EXPECT_EQ(r.body, "# TYPE job:up:sum untyped\njob:up:sum{job=\"a\",instance=\"\"} 1.234567e+06 " + ts(2000) +
                        "\n# TYPE up untyped\nup{instance=\"x\",job=\"a\"} 2 " + ts(1000) +
                        "\n# TYPE zz untyped\nzz{v=\"q\\\"b\\\\c\",instance=\"\"} 1e-05 " + ts(3000) + "\n");
  EXPECT_EQ(Do("GET", "/federate", {{"match[]", "up{"}}).status, 400);
  EXPECT_EQ(Do("GET", "/federate").body, "");
}

TEST_F(ApiTest, FederateServesNativeHistogramsInProtobuf) {
  const int64_t now = NowMillis();
  model::FloatHistogram exp;  // exponential buckets
  exp.schema = 1;
  exp.count = 4;
  exp.sum = 6;
  exp.zero_threshold = 0.5;
  exp.zero_count = 1;
  exp.positive_spans = {{1, 2}};
  exp.positive_buckets = {2, 1};
  model::FloatHistogram nhcb;  // custom buckets: federated as a classic histogram
  nhcb.schema = model::kCustomBucketsSchema;
  nhcb.count = 3;
  nhcb.sum = 2.5;
  nhcb.custom_values = {1, 5};
  nhcb.positive_spans = {{0, 3}};
  nhcb.positive_buckets = {1, 0, 2};
  auto app = db_->NewAppender();
  ASSERT_TRUE(app->AppendHistogram(0, model::Labels({{"__name__", "lat"}, {"job", "a"}}), now - 1000, exp).ok());
  ASSERT_TRUE(app->AppendHistogram(0, model::Labels({{"__name__", "sz"}}), now - 2000, nhcb).ok());
  ASSERT_TRUE(app->Append(0, model::Labels({{"__name__", "up"}}), now - 3000, 1).ok());
  ASSERT_TRUE(app->Commit().ok());

  Request req;
  req.method = "GET";
  req.path = "/federate";
  req.params = {{"match[]", "{__name__=~\"lat|sz|up\"}"}};
  req.accept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,"
               "text/plain;version=0.0.4;q=0.3";
  Response r = api_.Handle(req);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited");
  std::vector<std::string> families;
  ProtoReader in(r.body);
  while (!in.done()) {
    uint64_t n = 0;
    ASSERT_TRUE(in.Varint(&n).ok());
    std::string_view fam = in.rest().substr(0, n);
    ASSERT_EQ(fam.size(), n);
    families.push_back(DumpProto(fam, {"4", "4.1", "4.5", "4.7", "4.7.3", "4.7.12"}, {"4.7.14"}));
    in = ProtoReader(in.rest().substr(n));
  }
  auto t = [&](int64_t ago) { return std::to_string(now - ago); };
  ASSERT_EQ(families.size(), 3u);
  // lat: HISTOGRAM (4) with sum, float count, schema 1 (zigzag 2), zero
  // threshold and count, one positive span {offset 1 (zigzag 2), length 2}
  // and its counts.
  EXPECT_EQ(families[0], "1:\"lat\" 3:4 4:{1:{1:\"job\" 2:\"a\"} 1:{1:\"instance\" 2:\"\"} 7:{2:6 4:4 5:2 6:0.5 8:1 "
                         "12:{1:2 2:2} 14:[2 1]} 6:" + t(1000) + "}");
  // sz: the classic buckets, cumulative; +Inf implied.
  EXPECT_EQ(families[1], "1:\"sz\" 3:4 4:{1:{1:\"instance\" 2:\"\"} 7:{2:2.5 1:3 3:{1:1 2:1} 3:{1:1 2:5}} 6:" + t(2000) +
                         "}");
  EXPECT_EQ(families[2], "1:\"up\" 3:3 4:{1:{1:\"instance\" 2:\"\"} 5:{1:1} 6:" + t(3000) + "}");

  // The text format leaves the exponential histogram out and writes the
  // custom-bucket one as a classic histogram.
  r = Do("GET", "/federate", {{"match[]", "{__name__=~\"lat|sz|up\"}"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "# TYPE sz histogram\nsz_bucket{instance=\"\",le=\"1\"} 1 " + t(2000) + "\nsz_bucket{instance=\"\",le=\"5\"} 1 " +
                        t(2000) + "\nsz_bucket{instance=\"\",le=\"+Inf\"} 3 " + t(2000) + "\nsz_sum{instance=\"\"} 2.5 " +
                        t(2000) + "\nsz_count{instance=\"\"} 3 " + t(2000) + "\n# TYPE up untyped\nup{instance=\"\"} 1 " +
                        t(3000) + "\n");
}

TEST_F(ApiTest, ImportHonoursTimestampAndExtraLabels) {
  auto r = Do("POST", "/api/v1/import/prometheus", {{"timestamp", "1600000000"}, {"extra_label", "env=prod"}},
              "m{env=\"dev\"} 3\n");
  ASSERT_EQ(r.status, 204) << r.body;
  r = Do("GET", "/api/v1/export", {{"match[]", "m"}});
  EXPECT_EQ(Drain(r), "{\"metric\":{\"__name__\":\"m\",\"env\":\"prod\"},\"values\":[3],\"timestamps\":[1600000000000]}\n");
  EXPECT_EQ(Do("POST", "/api/v1/import/prometheus", {{"extra_label", "bad"}}, "m 1\n").status, 400);
}

TEST_F(ApiTest, BadImportIs400AndStoresNothing) {
  auto r = Do("POST", "/api/v1/import/prometheus", {}, "a 1\nb 2\nc{x=\"1\"} oops\n");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "line 3: invalid value \"oops\" for metric \"c\"\n");
  EXPECT_EQ(db_.NumSamples(), 0u);
}

TEST_F(ApiTest, ExportRequiresMatch) {
  auto r = Do("GET", "/api/v1/export");
  EXPECT_EQ(r.status, 400);
  r = Do("GET", "/api/v1/export", {{"match[]", "up{"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["errorType"], "bad_data");
}

TEST_F(ApiTest, LabelsValuesAndSeries) {
  ASSERT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "up{job=\"a\"} 1 1000\nup{job=\"b\",zone=\"z\"} 1 1000\nfoo 1 1000\n").status, 204);
  auto r = Do("GET", "/api/v1/labels");
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":[\"__name__\",\"job\",\"zone\"]}");
  r = Do("GET", "/api/v1/labels", {{"match[]", "foo"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":[\"__name__\"]}");
  r = Do("GET", "/api/v1/label/job/values");
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":[\"a\",\"b\"]}");
  r = Do("GET", "/api/v1/label/__name__/values");
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":[\"foo\",\"up\"]}");
  EXPECT_EQ(Do("GET", "/api/v1/label/1x/values").status, 400);
  r = Do("GET", "/api/v1/series", {{"match[]", "up"}, {"start", "0"}, {"end", "2"}});
  EXPECT_EQ(r.body,
            "{\"status\":\"success\",\"data\":[{\"__name__\":\"up\",\"job\":\"a\"},{\"__name__\":\"up\",\"job\":\"b\","
            "\"zone\":\"z\"}]}");
  r = Do("GET", "/api/v1/series");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"no match[] parameter provided\"}");
}

TEST_F(ApiTest, QueryShapes) {
  ASSERT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "up{job=\"a\"} 1 1796207136718\nup{job=\"a\"} 1 1796207141715\n").status, 204);
  auto r = Do("GET", "/api/v1/query", {{"query", "1+1"}, {"time", "1796207149"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1796207149,\"2\"]}}");
  r = Do("GET", "/api/v1/query", {{"query", "\"hello\""}, {"time", "1796207149"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":{\"resultType\":\"string\",\"result\":[1796207149,\"hello\"]}}");
  r = Do("POST", "/api/v1/query", {{"query", "up"}, {"time", "1796207149.698"}});
  EXPECT_EQ(r.body,
            "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{\"__name__\":\"up\","
            "\"job\":\"a\"},\"value\":[1796207149.698,\"1\"]}]}}");
  r = Do("GET", "/api/v1/query", {{"query", "up[15s]"}, {"time", "1796207149"}});
  EXPECT_EQ(r.body,
            "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":{\"__name__\":\"up\","
            "\"job\":\"a\"},\"values\":[[1796207136.718,\"1\"],[1796207141.715,\"1\"]]}]}}");
  r = Do("GET", "/api/v1/query", {{"query", "does_not_exist"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}");
  r = Do("GET", "/api/v1/query_range", {{"query", "up"}, {"start", "1796207140"}, {"end", "1796207150"}, {"step", "5s"}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j["data"]["resultType"], "matrix");
  EXPECT_EQ(j["data"]["result"][0]["values"].size(), 3u);
  // A user's query holds off serve's memory trim (base/memory.h) for a while.
  EXPECT_LT(memory::SinceQueryNs(), int64_t{10'000'000'000});
}

TEST_F(ApiTest, HistogramsInPrometheusShape) {
  model::FloatHistogram h;
  h.count = 5;
  h.sum = 10;
  h.zero_threshold = 0.001;
  h.zero_count = 1;
  h.positive_spans = {{0, 2}};
  h.positive_buckets = {2, 2};
  auto app = db_->NewAppender();
  model::Labels l({{"__name__", "h"}});
  ASSERT_TRUE(app->AppendHistogram(0, l, 1796207136718, h).ok());
  ASSERT_TRUE(app->AppendHistogram(0, l, 1796207141715, h).ok());
  ASSERT_TRUE(app->Commit().ok());
  const std::string hjson =
      "{\"count\":\"5\",\"sum\":\"10\",\"buckets\":[[3,\"-0.001\",\"0.001\",\"1\"],[0,\"0.5\",\"1\",\"2\"],"
      "[0,\"1\",\"2\",\"2\"]]}";
  auto r = Do("GET", "/api/v1/query", {{"query", "h"}, {"time", "1796207149"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[{\"metric\":{\"__name__\":"
                    "\"h\"},\"histogram\":[1796207149," + hjson + "]}]}}");
  r = Do("GET", "/api/v1/query", {{"query", "h[15s]"}, {"time", "1796207149"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":{\"__name__\":"
                    "\"h\"},\"histograms\":[[1796207136.718," + hjson + "],[1796207141.715," + hjson + "]]}]}}");
  // Functions over them answer floats.
  r = Do("GET", "/api/v1/query", {{"query", "histogram_count(h)"}, {"time", "1796207149"}});
  auto j = json::parse(r.body);
  EXPECT_EQ(j["data"]["result"][0]["value"][1], "5");
}

TEST_F(ApiTest, InfosBesideResults) {
  ASSERT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "up{job=\"a\"} 1 1796207136718\nup{job=\"a\"} 2 1796207141715\n").status,
            204);
  auto r = Do("GET", "/api/v1/query", {{"query", "rate(up[1m])"}, {"time", "1796207149"}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j["data"]["result"].size(), 1u);
  EXPECT_FALSE(j.contains("warnings"));
  EXPECT_EQ(j["infos"], json::array({"PromQL info: metric might not be a counter, name does not end in "
                                     "_total/_sum/_count/_bucket: \"up\" (1:6)"}));
}

TEST_F(ApiTest, QueryErrors) {
  auto r = Do("GET", "/api/v1/query", {{"query", "sum(up"}});
  EXPECT_EQ(r.status, 400);
  auto j = json::parse(r.body);
  EXPECT_EQ(j["status"], "error");
  EXPECT_EQ(j["errorType"], "bad_data");
  EXPECT_TRUE(j["error"].get<std::string>().starts_with("invalid parameter \"query\": ")) << r.body;
  r = Do("GET", "/api/v1/query_range", {{"query", "up"}, {"start", "1796207119"}, {"end", "1796207149"}, {"step", "0"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body,
            "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"invalid parameter \\\"step\\\": zero or negative "
            "query resolution step widths are not accepted. Try a positive integer\"}");
  r = Do("GET", "/api/v1/query", {{"query", "up"}, {"time", "yesterday"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"], "invalid parameter \"time\": cannot parse \"yesterday\" to a valid timestamp");
  r = Do("GET", "/api/v1/query_range", {{"query", "up"}, {"start", "10"}, {"end", "5"}, {"step", "1"}});
  EXPECT_EQ(r.status, 400);
  r = Do("GET", "/api/v1/query_range", {{"query", "up"}, {"start", "0"}, {"end", "100000"}, {"step", "1"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(ApiError(Status::Cancelled("query timed out")).status, 503);
  EXPECT_EQ(json::parse(ApiError(Status::Cancelled("x")).body)["errorType"], "timeout");
  EXPECT_EQ(ApiError(Status::ResourceExhausted("x")).status, 422);
  EXPECT_EQ(json::parse(ApiError(Status::Unavailable("x")).body)["errorType"], "unavailable");
}

TEST_F(ApiTest, LimitTruncatesWithWarning) {
  ASSERT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "up{job=\"a\"} 1 1000\nup{job=\"b\"} 1 1000\nfoo 1 1000\n").status,
            204);
  auto r = Do("GET", "/api/v1/label/job/values", {{"limit", "1"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":[\"a\"],\"warnings\":[\"results truncated due to limit\"]}");
  r = Do("GET", "/api/v1/label/job/values", {{"limit", "2"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":[\"a\",\"b\"]}");
  r = Do("GET", "/api/v1/labels", {{"limit", "1"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":[\"__name__\"],\"warnings\":[\"results truncated due to limit\"]}");
  r = Do("GET", "/api/v1/series", {{"match[]", "up"}, {"limit", "1"}});
  EXPECT_EQ(r.body,
            "{\"status\":\"success\",\"data\":[{\"__name__\":\"up\",\"job\":\"a\"}],\"warnings\":[\"results "
            "truncated due to limit\"]}");
  r = Do("GET", "/api/v1/series", {{"match[]", "up"}, {"limit", "0"}});
  EXPECT_EQ(json::parse(r.body)["data"].size(), 2u);
  r = Do("GET", "/api/v1/labels", {{"limit", "-1"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"], "invalid parameter \"limit\": limit must be non-negative");
  EXPECT_EQ(Do("GET", "/api/v1/series", {{"match[]", "up"}, {"limit", "x"}}).status, 400);
}

TEST_F(ApiTest, MatchSelectorErrorsAsPrometheus) {
  auto r = Do("GET", "/api/v1/series", {{"match[]", "{job=\"\"}"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["errorType"], "bad_data");
  EXPECT_NE(json::parse(r.body)["error"].get<std::string>().find("non-empty matcher"), std::string::npos) << r.body;
  r = Do("GET", "/api/v1/labels", {{"match[]", "up{"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(json::parse(r.body)["error"].get<std::string>().starts_with("1:")) << r.body;
}

TEST_F(ApiTest, ExemplarsAreEmptyAndValidated) {
  auto r = Do("GET", "/api/v1/query_exemplars", {{"query", "up"}, {"start", "1796207119"}, {"end", "1796207149"}});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":[]}");
  r = Do("POST", "/api/v1/query_exemplars", {{"query", "sum(up"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["errorType"], "bad_data");
  r = Do("GET", "/api/v1/query_exemplars", {{"query", "up"}, {"start", "20"}, {"end", "10"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(Do("GET", "/api/v1/query_exemplars", {{"query", "1+1"}}).body, "{\"status\":\"success\"}");
}

TEST_F(ApiTest, FormatQuery) {
  auto r = Do("GET", "/api/v1/format_query", {{"query", "sum(rate(foo[5m]))by(job)"}});
  EXPECT_EQ(r.body, "{\"status\":\"success\",\"data\":\"sum by (job) (rate(foo[5m]))\"}");
  r = Do("GET", "/api/v1/format_query", {{"query", "sum("}});
  EXPECT_EQ(r.status, 400);
  EXPECT_TRUE(json::parse(r.body)["error"].get<std::string>().starts_with("invalid parameter \"query\": 1:")) << r.body;
}

TEST_F(ApiTest, TimeoutParameterIsValidatedAndCapped) {
  ASSERT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "up 1 1000\n").status, 204);
  auto r = Do("GET", "/api/v1/query", {{"query", "up"}, {"time", "1"}, {"timeout", "nope"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"], "invalid parameter \"timeout\": cannot parse \"nope\" to a valid duration");
  // A timeout above the server's default is accepted (and capped to it).
  r = Do("GET", "/api/v1/query", {{"query", "up"}, {"time", "1"}, {"timeout", "1000d"}});
  EXPECT_EQ(r.status, 200) << r.body;
  r = Do("GET", "/api/v1/query_range", {{"query", "up"}, {"start", "1"}, {"end", "2"}, {"step", "1"}, {"timeout", "30s"}});
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(ApiTest, StatusEndpointsAndMetrics) {
  auto r = Do("POST", "/api/v1/import/prometheus", {}, "up{job=\"a\"} 1 1700000000000\nup{job=\"b\"} 1 1700000000000\n");
  ASSERT_EQ(r.status, 204) << r.body;
  r = Do("GET", "/api/v1/status/buildinfo");
  EXPECT_EQ(r.body,
            "{\"status\":\"success\",\"data\":{\"version\":\"0.1.0\",\"revision\":\"abc\",\"branch\":\"main\","
            "\"buildUser\":\"me\",\"buildDate\":\"today\",\"goVersion\":\"gcc\"}}");
  r = Do("GET", "/api/v1/status/tsdb");
  auto j = json::parse(r.body);
  EXPECT_EQ(j["data"]["seriesCountByMetricName"][0]["name"], "up");
  EXPECT_EQ(j["data"]["seriesCountByMetricName"][0]["value"], 2);
  EXPECT_TRUE(j["data"]["headStats"].contains("numSeries"));
  EXPECT_EQ(j["data"]["headStats"]["numLabelPairs"], 3);  // __name__=up, job=a, job=b
  EXPECT_EQ(j["data"]["labelValueCountByLabelName"][0], json({{"name", "job"}, {"value", 2}}));
  EXPECT_EQ(j["data"]["memoryInBytesByLabelName"][0], json({{"name", "__name__"}, {"value", 4}}));
  EXPECT_EQ(j["data"]["seriesCountByLabelValuePair"][0], json({{"name", "__name__=up"}, {"value", 2}}));
  j = json::parse(Do("GET", "/api/v1/status/tsdb", {{"limit", "1"}}).body);
  EXPECT_EQ(j["data"]["seriesCountByLabelValuePair"].size(), 1u);
  r = Do("GET", "/api/v1/status/tsdb", {{"limit", "0"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"], "limit must be a positive number");
  EXPECT_EQ(Do("POST", "/api/v1/admin/tsdb/flush").status, 204);
  EXPECT_EQ(db_->GetStats().head_series, 0u);  // persisted into a block
  EXPECT_GE(db_->GetStats().blocks, 1u);
  r = Do("GET", "/metrics");
  EXPECT_NE(r.body.find("trainwatch_http_requests_total{code=\"204\",handler=\"/api/v1/admin/tsdb/flush\"} 1\n"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("trainwatch_tsdb_head_series "), std::string::npos);
  // Its samples (2023) are older than either tier keeps: no tier is made.
  EXPECT_NE(r.body.find("trainwatch_tsdb_tier_blocks 0\n"), std::string::npos);
  EXPECT_NE(r.body.find("trainwatch_tsdb_storage_tier_bytes 0\n"), std::string::npos);
}

// GET /api/v1/status/security: the UI's banner while the port is open to
// the network with no authentication (serve sets the warning).
TEST_F(ApiTest, SecurityStatusSaysWhenThePortIsOpen) {
  EXPECT_EQ(Do("GET", "/api/v1/status/security").body, R"({"status":"success","data":{"open":false,"warning":""}})");
  ApiDeps d{db_.get(), &engine_, {}};
  d.security_warning = "listening on 0.0.0.0:9800 with no \"authentication\"";
  Api open(std::move(d));
  Request r;
  r.method = "GET";
  r.path = "/api/v1/status/security";
  EXPECT_EQ(open.Handle(r).body,
            R"({"status":"success","data":{"open":true,"warning":"listening on 0.0.0.0:9800 with no \"authentication\""}})");
}

// As Prometheus: without --web.enable-admin-api every /api/v1/admin/ route
// answers 503 "admin APIs disabled" whatever the method, and changes nothing.
TEST_F(ApiTest, AdminApiIsOffByDefault) {
  Api off(ApiDeps{db_.get(), &engine_, {}});
  ASSERT_EQ(Do("POST", "/api/v1/import/prometheus", {}, "up 1 1700000000000\n").status, 204);
  for (const char* method : {"POST", "PUT", "GET"}) {
    for (const char* path : {"/api/v1/admin/tsdb/flush", "/api/v1/admin/tsdb/snapshot", "/api/v1/admin/tsdb/delete_series"}) {
      Request r;
      r.method = method;
      r.path = path;
      Response resp = off.Handle(r);
      EXPECT_EQ(resp.status, 503) << method << " " << path;
      EXPECT_EQ(resp.body, R"({"status":"error","errorType":"unavailable","error":"admin APIs disabled"})");
    }
  }
  EXPECT_EQ(db_->GetStats().head_series, 1u);  // not flushed
  EXPECT_EQ(db_->GetStats().blocks, 0u);
  // Enabled: PUT as well as POST; skip_head is Go's ParseBool.
  EXPECT_EQ(Do("GET", "/api/v1/admin/tsdb/snapshot").status, 405);
  Response bad = Do("PUT", "/api/v1/admin/tsdb/snapshot", {{"skip_head", "yes"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("unable to parse boolean 'skip_head' argument"), std::string::npos) << bad.body;
  Response snap = Do("PUT", "/api/v1/admin/tsdb/snapshot", {{"skip_head", "T"}});
  ASSERT_EQ(snap.status, 200) << snap.body;
  EXPECT_TRUE(json::parse(snap.body)["data"]["name"].is_string()) << snap.body;
  EXPECT_EQ(Do("PUT", "/api/v1/admin/tsdb/flush").status, 204);
  EXPECT_EQ(db_->GetStats().head_series, 0u);
}

// STREAMED_XOR_CHUNKS with native histograms: FLOAT_HISTOGRAM chunks beside
// XOR ones in a mixed series, one series a frame (Prometheus's client reads
// only a frame's first series), read back by our remote_read client.
TEST_F(ApiTest, RemoteReadStreamsHistogramChunksOneSeriesAFrame) {
  const int64_t now = NowMillis() - 600000;
  auto hist = [](double c) {
    model::FloatHistogram h;
    h.schema = 1;
    h.count = c;
    h.sum = c * 3;
    h.zero_threshold = 0.001;
    h.positive_spans = {{0, 2}};
    h.positive_buckets = {c / 2, c / 2};
    return h;
  };
  const model::Labels mixed({{"__name__", "m"}, {"kind", "mixed"}}), only({{"__name__", "m"}, {"kind", "hist"}});
  auto app = db_->NewAppender();
  for (int i = 0; i < 10; i++) ASSERT_TRUE(app->Append(0, mixed, now + i * 1000, i).ok());
  for (int i = 10; i < 20; i++) {
    ASSERT_TRUE(app->AppendHistogram(0, mixed, now + i * 1000, hist(i)).ok());
    ASSERT_TRUE(app->AppendHistogram(0, only, now + i * 1000, hist(2 * i)).ok());
  }
  ASSERT_TRUE(app->Commit().ok());

  auto put_len = [](std::string* out, uint32_t f, std::string_view b) {
    PutVarint32(out, (f << 3) | 2);
    PutVarint64(out, b.size());
    out->append(b);
  };
  std::string matcher, query, read, body;
  put_len(&matcher, 2, "__name__");
  put_len(&matcher, 3, "m");
  PutVarint32(&query, 1 << 3);
  PutVarint64(&query, static_cast<uint64_t>(now));
  PutVarint32(&query, 2 << 3);
  PutVarint64(&query, static_cast<uint64_t>(now + 100000));
  put_len(&query, 3, matcher);
  put_len(&read, 1, query);
  PutVarint32(&read, 2 << 3);
  PutVarint64(&read, 1);  // STREAMED_XOR_CHUNKS
  remote::SnappyCompress(read, &body);
  Response r = Do("POST", "/api/v1/read", {}, body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse");
  const std::string out = Drain(r);

  // Frames: uvarint size, CRC, ChunkedReadResponse with one chunked_series.
  std::string_view in = out;
  std::vector<std::string> frames;
  while (!in.empty()) {
    uint64_t n = 0;
    ASSERT_TRUE(GetVarint64(&in, &n));
    ASSERT_GE(in.size(), 4 + n);
    frames.push_back(DumpProto(in.substr(4, n), {"1", "1.2"}, {}));
    in.remove_prefix(4 + n);
  }
  ASSERT_EQ(frames.size(), 2u);
  for (const std::string& f : frames) EXPECT_EQ(f.find("1:{", 1), std::string::npos) << f;  // one series
  EXPECT_NE(frames[0].find("3:3 4:"), std::string::npos) << frames[0];  // the histogram-only series: FLOAT_HISTOGRAM
  EXPECT_NE(frames[1].find("3:1 4:"), std::string::npos) << frames[1];  // the mixed one: XOR, then
  EXPECT_NE(frames[1].find("3:3 4:"), std::string::npos) << frames[1];  // FLOAT_HISTOGRAM

  auto series = remote::DecodeChunkedReadResponse(out, now, now + 100000, model::Labels());
  ASSERT_TRUE(series.ok()) << series.error().ToString();
  ASSERT_EQ(series->size(), 2u);
  auto it = (*series)[1]->Iterator();
  int floats = 0, hists = 0;
  while (it->Next()) {
    if (it->AtIsHistogram()) {
      EXPECT_EQ(it->AtHistogram()->count, (it->At().t - now) / 1000);
      EXPECT_EQ(it->AtHistogram()->positive_buckets[0], (it->At().t - now) / 1000 / 2.0);
      hists++;
    } else {
      EXPECT_EQ(it->At().v, (it->At().t - now) / 1000);
      floats++;
    }
  }
  EXPECT_EQ(floats, 10);
  EXPECT_EQ(hists, 10);
}

}  // namespace
}  // namespace trainwatch::http
