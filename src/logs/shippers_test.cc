#include "logs/shippers.h"

#include <gtest/gtest.h>
#include <snappy.h>

namespace trainwatch::logs {
namespace {

constexpr size_t kMaxBody = size_t{256} << 20;

// Issue 25: a Loki JSON push is depth-checked before nlohmann builds it.
TEST(ShippersTest, DeeplyNestedLokiJsonIsRefusedByDepth) {
  std::string body = "{\"streams\":" + std::string(1000000, '[') + std::string(1000000, ']') + "}";
  std::vector<Record> out;
  Status s = ParseLokiJson(body, 0, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("nesting deeper than 128 levels"), std::string::npos) << s.message();
  EXPECT_TRUE(out.empty());
}

TEST(ShippersTest, NativeBatchNamesBadLine) {
  std::vector<Record> out;
  model::Labels stream{{"project", "p"}};
  ASSERT_TRUE(ParseNative("{\"message\":\"a\"}\nplain text\n\n", stream, 5, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].message, "plain text");
  EXPECT_EQ(out[1].labels.Get("project"), "p");
  out.clear();
  Status s = ParseNative("{\"message\":\"a\"}\n{\"time\":[1]}\n", stream, 5, &out);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"time\""), std::string::npos) << s.message();
}

TEST(ShippersTest, BulkIndexCreateAndPerItemErrors) {
  BulkRequest req;
  std::string body =
      "{\"index\":{\"_index\":\"train\"}}\n{\"@timestamp\":\"2024-01-01T00:00:00Z\",\"message\":\"hello\",\"host\":\"n1\",\"x\":1}\n"
      "{\"create\":{}}\n{\"msg\":\"to default\"}\n"
      "{\"index\":{}}\nnot json\n"
      "{\"delete\":{\"_id\":\"1\"}}\n";
  ASSERT_TRUE(ParseBulk(body, "def", 9, &req).ok());
  ASSERT_EQ(req.records.size(), 2u);
  EXPECT_EQ(req.records[0].labels.Get("index"), "train");
  EXPECT_EQ(req.records[0].labels.Get("host"), "n1");
  EXPECT_EQ(req.records[0].fields, "{\"x\":1}");
  EXPECT_EQ(req.records[0].time_ns, 1704067200000000000LL);
  EXPECT_EQ(req.records[1].labels.Get("index"), "def");
  ASSERT_EQ(req.items.size(), 4u);
  EXPECT_EQ(req.items[2].status, 400);
  EXPECT_EQ(req.items[3].status, 400);
  std::string resp = BulkResponseJson(req, 3);
  EXPECT_NE(resp.find("\"errors\":true"), std::string::npos);
  EXPECT_NE(resp.find("\"status\":201"), std::string::npos);
  BulkRequest bad;
  Status s = ParseBulk("{\"index\":{}}\n{}\n[1]\n", "d", 0, &bad);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("line 3"), std::string::npos);
}

TEST(ShippersTest, LokiJsonAndProtobuf) {
  std::vector<Record> out;
  ASSERT_TRUE(ParseLokiJson(R"({"streams":[{"stream":{"job":"train","level":"error"},"values":[["1700000000000000001","boom",{"trace":"t1"}]]}]})",
                            0, &out)
                  .ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].time_ns, 1700000000000000001LL);
  EXPECT_EQ(out[0].level, "ERROR");
  EXPECT_EQ(out[0].fields, R"({"trace":"t1"})");
  Status s = ParseLokiJson(R"({"streams":[{"stream":{},"values":[["x","a"]]}]})", 0, &out);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("streams[0].values[0]"), std::string::npos);

  // logproto.PushRequest{streams:[{labels:'{job="t"}', entries:[{timestamp:{seconds:5,nanos:7}, line:"hi"}]}]}
  auto len = [](std::string s) { return std::string(1, static_cast<char>(s.size())) + s; };
  std::string ts = "\x08\x05\x10\x07";
  std::string entry = "\x0a" + len(ts) + "\x12" + len("hi");
  std::string stream = "\x0a" + len("{job=\"t\"}") + "\x12" + len(entry);
  std::string push = "\x0a" + len(stream);
  std::string compressed;
  snappy::Compress(push.data(), push.size(), &compressed);
  out.clear();
  ASSERT_TRUE(ParseLokiProto(compressed, 0, kMaxBody, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message, "hi");
  EXPECT_EQ(out[0].time_ns, 5000000007LL);
  EXPECT_EQ(out[0].labels.Get("job"), "t");
  EXPECT_FALSE(ParseLokiProto("garbage", 0, kMaxBody, &out).ok());
  // Beyond --web.max-request-body-bytes as decoded: refused, naming the flag.
  Status big = ParseLokiProto(compressed, 0, push.size() - 1, &out);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.message().find("(--web.max-request-body-bytes)"), std::string::npos) << big.message();
}

// A hostile line with 100k labels: merging was quadratic (LabelsBuilder::Set
// scans the whole set per label), minutes for this input; now n log n.
TEST(ShippersTest, MergeLabelsOfHundredThousandLabelsIsRightAndNotQuadratic) {
  constexpr int kN = 100000;
  std::vector<model::Label> extra;
  for (int i = 0; i < kN; ++i) extra.push_back({"l" + std::to_string(i), "v" + std::to_string(i)});
  for (int i = 0; i < kN; i += 2) extra.push_back({"l" + std::to_string(i), "w"});  // later repeats win
  extra.push_back({"gone", ""});  // an empty value deletes
  extra.push_back({"l1", ""});
  model::Labels base{{"project", "p"}, {"gone", "x"}, {"l3", "base"}};
  auto m = MergeLabels(base, extra);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ(m->size(), static_cast<size_t>(kN) - 1 + 1);  // l0..l99999 minus l1, plus project
  EXPECT_EQ(m->Get("project"), "p");
  EXPECT_EQ(m->Get("l0"), "w");
  EXPECT_EQ(m->Get("l3"), "v3");
  EXPECT_EQ(m->Get("l99998"), "w");
  EXPECT_EQ(m->Get("l99999"), "v99999");
  EXPECT_FALSE(m->Has("gone"));
  EXPECT_FALSE(m->Has("l1"));
  for (size_t i = 1; i < m->pairs().size(); ++i) ASSERT_LT(m->pairs()[i - 1].name, m->pairs()[i].name);

  // The same through a native line's "labels" object (under the 1 MiB line limit).
  constexpr int kLineLabels = 60000;
  std::string line = "{\"message\":\"m\",\"labels\":{";
  for (int i = 0; i < kLineLabels; ++i) line += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":\"" + std::to_string(i % 7 + 1) + "\"";
  line += "}}\n";
  std::vector<Record> out;
  ASSERT_TRUE(ParseNative(line, model::Labels{{"k5", "stream"}}, 1, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].labels.size(), static_cast<size_t>(kLineLabels));
  EXPECT_EQ(out[0].labels.Get("k5"), "6");  // the line's labels win over the stream's
}

TEST(ShippersTest, MergeLabelsRefusesNonUtf8Values) {
  auto m = MergeLabels(model::Labels(), {{"run", "\xff\xfe"}});
  ASSERT_TRUE(m.error().IsInvalidArgument());
  EXPECT_NE(m.error().message().find("\"run\""), std::string::npos) << m.error().message();
}

// Each push format names the line out of bounds and which bound; bounds->rejected says why.
TEST(ShippersTest, LinesOutsideTimeBoundsFailTheWholeBodyNamingTheLine) {
  constexpr int64_t kNow = 1700000000000;  // ms
  auto bounds = [] {
    TimeBounds b;
    b.now_ms = kNow;
    b.max_future_ms = 600000;
    b.retention_ms = 86400000;
    b.max_ns = (kNow + b.max_future_ms) * 1000000;
    b.min_ns = (kNow - b.retention_ms) * 1000000;
    return b;
  };
  std::vector<Record> out;
  TimeBounds b = bounds();
  Status s = ParseNative("{\"message\":\"ok\"}\n\n{\"time\":\"2262-01-01T00:00:00Z\",\"message\":\"evil\"}\n",
                         model::Labels{{"run", "r"}}, kNow * 1000000, &out, &b);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("line 3: time 2262-01-01T00:00:00Z is more than 10m after the server clock"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(b.rejected, TimeReject::kTooFarInFuture);

  b = bounds();
  BulkRequest bulk;
  s = ParseBulk("{\"index\":{}}\n{\"message\":\"ok\"}\n{\"index\":{}}\n{\"@timestamp\":\"2000-01-01T00:00:00Z\"}\n", "i",
                kNow * 1000000, &bulk, &b);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("line 4: time 2000-01-01T00:00:00Z is more than the log retention 1d"), std::string::npos)
      << s.message();
  EXPECT_EQ(b.rejected, TimeReject::kTooOld);

  b = bounds();
  out.clear();
  std::string ok = std::to_string(kNow * 1000000);
  s = ParseLokiJson(R"({"streams":[{"stream":{"job":"a"},"values":[[")" + ok + R"(","a"]]},{"stream":{"job":"b"},"values":[[")" +
                        ok + R"(","b"],["9000000000000000000","evil"]]}]})",
                    0, &out, &b);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("streams[1].values[1]: time 2255-"), std::string::npos) << s.message();
  EXPECT_EQ(b.rejected, TimeReject::kTooFarInFuture);

  // Without bounds (the default) the same bodies parse.
  out.clear();
  EXPECT_TRUE(ParseNative("{\"time\":\"2262-01-01T00:00:00Z\",\"message\":\"evil\"}\n", model::Labels(), 0, &out).ok());
}

namespace {

std::string LokiProto(const std::string& selector, uint64_t secs) {
  auto len = [](std::string s) {
    std::string v;
    for (uint64_t n = s.size(); ; n >>= 7) {
      v += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
      if (n < 0x80) break;
    }
    return v + s;
  };
  std::string ts = "\x08";
  for (uint64_t n = secs; ; n >>= 7) {
    ts += static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0));
    if (n < 0x80) break;
  }
  std::string entry = "\x0a" + len(ts) + "\x12" + len("hi");
  std::string stream = "\x0a" + len(selector) + "\x12" + len(entry);
  std::string push = "\x0a" + len(stream);
  std::string compressed;
  snappy::Compress(push.data(), push.size(), &compressed);
  return compressed;
}

}  // namespace

TEST(ShippersTest, LokiProtoTimestampOverflowAndNonUtf8LabelsAreRefused) {
  std::vector<Record> out;
  ASSERT_TRUE(ParseLokiProto(LokiProto("{job=\"t\"}", 5), 0, kMaxBody, &out).ok());
  // seconds * 1e9 overflowed int64 (UB) for a hostile seconds field.
  Status s = ParseLokiProto(LokiProto("{job=\"t\"}", UINT64_MAX / 2), 0, kMaxBody, &out);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("streams[0].entries[0]: timestamp"), std::string::npos) << s.message();
  // Found by fuzz/loki_proto_fuzz.cc: label names are checked as in the JSON push.
  s = ParseLokiProto(LokiProto("{job=\"t\", @run=\"r1\"}", 5), 0, kMaxBody, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("invalid label name \"@run\""), std::string::npos) << s.message();
  s = ParseLokiProto(LokiProto("{job=\"\xff\xfe\"}", 5), 0, kMaxBody, &out);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("stream label \"job\": value is not valid UTF-8"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace trainwatch::logs
