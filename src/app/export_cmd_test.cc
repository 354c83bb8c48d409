#include "app/export_cmd.h"

#include <gtest/gtest.h>

namespace trainwatch::app {
namespace {

// What GET /api/v1/runs/{id}/history?format=csv writes (src/http/api_runs.cc).
const std::string kCsv =
    "rank,key,step,timestamp,value\n"
    ",loss,0,1700000000.000,2.5\n"
    ",loss,1,1700000001.250,NaN\n"
    ",\"a,b \"\"q\"\"\nline\",7,1700000002.001,+Inf\n"
    "0,train/acc,3,1700000003.999,-Inf\n"
    "12,lr,9007199254740993,0.000,3e-05\n";

const std::string kJsonl =
    "{\"key\":\"loss\",\"rank\":null,\"step\":0,\"timestamp\":1700000000000,\"value\":2.5}\n"
    "{\"key\":\"loss\",\"rank\":null,\"step\":1,\"timestamp\":1700000001250,\"value\":\"NaN\"}\n"
    "{\"key\":\"a,b \\\"q\\\"\\nline\",\"rank\":null,\"step\":7,\"timestamp\":1700000002001,\"value\":\"Inf\"}\n"
    "{\"key\":\"train/acc\",\"rank\":0,\"step\":3,\"timestamp\":1700000003999,\"value\":\"-Inf\"}\n"
    "{\"key\":\"lr\",\"rank\":12,\"step\":9007199254740993,\"timestamp\":0,\"value\":3e-05}\n";

TEST(HistoryCsvToJsonlTest, RowsBecomeJsonLines) {
  HistoryCsvToJsonl c;
  std::string out;
  ASSERT_TRUE(c.Feed(kCsv, &out).ok());
  ASSERT_TRUE(c.Finish(&out).ok());
  EXPECT_EQ(out, kJsonl);
  EXPECT_EQ(c.rows(), 5u);
}

TEST(HistoryCsvToJsonlTest, AnyChunkingGivesTheSameLines) {
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{7}, size_t{64}}) {
    HistoryCsvToJsonl c;
    std::string out;
    for (size_t i = 0; i < kCsv.size(); i += chunk) ASSERT_TRUE(c.Feed(std::string_view(kCsv).substr(i, chunk), &out).ok());
    ASSERT_TRUE(c.Finish(&out).ok());
    EXPECT_EQ(out, kJsonl) << chunk;
  }
}

TEST(HistoryCsvToJsonlTest, LastRowWithoutNewlineAndEmptyHistory) {
  HistoryCsvToJsonl c;
  std::string out;
  ASSERT_TRUE(c.Feed("rank,key,step,timestamp,value\r\n,x,1,2.000,3", &out).ok());
  EXPECT_EQ(out, "");
  ASSERT_TRUE(c.Finish(&out).ok());
  EXPECT_EQ(out, "{\"key\":\"x\",\"rank\":null,\"step\":1,\"timestamp\":2000,\"value\":3.0}\n");

  HistoryCsvToJsonl empty;
  out.clear();
  ASSERT_TRUE(empty.Feed("rank,key,step,timestamp,value\n", &out).ok());
  ASSERT_TRUE(empty.Finish(&out).ok());
  EXPECT_EQ(out, "");
  EXPECT_EQ(empty.rows(), 0u);
}

TEST(HistoryCsvToJsonlTest, WhatIsNotTheHistoryCsvIsAnError) {
  for (std::string bad : {"{\"status\":\"error\"}\n", "rank,key,step,timestamp,value\n,x,one,1.0,2\n",
                          "rank,key,step,timestamp,value\n,x,1,1.0\n", "rank,key,step,timestamp,value\n,x,1,1.0,2,3\n",
                          "rank,key,step,timestamp,value\n,x,1,1.0,abc\n", "rank,key,step,timestamp,value\n,\"x,1,1.0,2\n",
                          ""}) {
    HistoryCsvToJsonl c;
    std::string out;
    Status s = c.Feed(bad, &out);
    if (s.ok()) s = c.Finish(&out);
    EXPECT_FALSE(s.ok()) << bad;
  }
}

TEST(MediaIndexTest, LinesCarryTheKeyAndImagesTheirUrlNotTheirBytes) {
  using nlohmann::json;
  json image = json::parse(R"({"run": "r1", "rank": null, "step": 3, "timestamp": 1700000000000, "kind": "image",
                               "format": "png", "width": 2, "height": 1, "bytes": 70, "data": "iVBORw0K",
                               "url": "/api/v1/runs/r1/media/content?key=a%2Fb&step=3"})");
  json line = MediaIndexLine(image, "a/b", "/tw");
  EXPECT_EQ(line["key"], "a/b");
  EXPECT_FALSE(line.contains("data"));
  EXPECT_EQ(line["url"], "/tw/api/v1/runs/r1/media/content?key=a%2Fb&step=3");
  EXPECT_EQ(line["bytes"], 70);
  EXPECT_EQ(line["rank"], nullptr);
  json text = json::parse(R"({"run": "r1", "rank": 2, "step": 5, "timestamp": 1, "kind": "text", "text": "hi"})");
  line = MediaIndexLine(text, "notes", "");
  EXPECT_EQ(line, json::parse(R"({"run": "r1", "rank": 2, "step": 5, "timestamp": 1, "kind": "text", "text": "hi",
                                  "key": "notes"})"));
}

}  // namespace
}  // namespace trainwatch::app
