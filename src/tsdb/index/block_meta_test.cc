#include "tsdb/index/block_meta.h"

#include <gtest/gtest.h>

namespace trainwatch::index {
namespace {

TEST(BlockMetaTest, RoundTrip) {
  BlockMeta m;
  m.id = "01HZX3V5Q8K2M9ZQ6W7Y1T4B3C";
  m.mint = -5;
  m.maxt = 7200000;
  m.num_series = 100000;
  m.num_samples = 1ull << 40;
  m.num_chunks = 12345;
  m.compaction_level = 2;
  m.sources = {"A", "B"};
  m.seq = 9;
  auto d = DecodeBlockMeta(EncodeBlockMeta(m));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, m);
}

TEST(BlockMetaTest, Malformed) {
  EXPECT_TRUE(DecodeBlockMeta("").status().IsCorruption());
  EXPECT_TRUE(DecodeBlockMeta("{").status().IsCorruption());
  EXPECT_TRUE(DecodeBlockMeta("[]").status().IsCorruption());
  EXPECT_TRUE(DecodeBlockMeta(R"({"version":1})").status().IsCorruption());
  BlockMeta m;
  m.id = "x";
  std::string s = EncodeBlockMeta(m);
  EXPECT_TRUE(DecodeBlockMeta(s).ok());
  std::string bad = s;
  bad.replace(bad.find("\"seq\": 0"), 8, "\"seq\": -1");
  EXPECT_TRUE(DecodeBlockMeta(bad).status().IsCorruption());
  m.mint = 10;
  m.maxt = 5;
  EXPECT_TRUE(DecodeBlockMeta(EncodeBlockMeta(m)).status().IsCorruption());
  // Every truncation is an error, never a crash.
  for (size_t n = 0; n + 1 < s.size(); ++n) EXPECT_FALSE(DecodeBlockMeta(s.substr(0, n)).ok());
}

}  // namespace
}  // namespace trainwatch::index
