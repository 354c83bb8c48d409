#include "logs/shippers.h"

#include <gtest/gtest.h>
#include <snappy.h>

namespace trainwatch::logs {
namespace {

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
  ASSERT_TRUE(ParseLokiProto(compressed, 0, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].message, "hi");
  EXPECT_EQ(out[0].time_ns, 5000000007LL);
  EXPECT_EQ(out[0].labels.Get("job"), "t");
  EXPECT_FALSE(ParseLokiProto("garbage", 0, &out).ok());
}

}  // namespace
}  // namespace trainwatch::logs
