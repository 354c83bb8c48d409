#include "tsdb/chunkenc/parts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trainwatch::chunkenc {
namespace {

// Three dense chunks of the same timestamps, one per value column.
std::string ThreeParts(std::vector<std::string>* inner) {
  const std::vector<int64_t> ts = {300000, 600000, 900000};
  const std::vector<std::vector<double>> cols = {{1, 2, 3}, {-1.5, 0, 7}, {3, 3, 3}};
  std::vector<Unwrapped> parts;
  inner->resize(cols.size());
  for (size_t i = 0; i < cols.size(); ++i) {
    EncodeDense(ts.data(), cols[i].data(), ts.size(), &(*inner)[i]);
  }
  for (const auto& b : *inner) parts.push_back({Encoding::kDense, b});
  std::string out;
  WrapParts(parts, &out);
  return out;
}

TEST(PartsChunkTest, EachPartReadsBack) {
  std::vector<std::string> inner;
  const std::string chunk = ThreeParts(&inner);
  for (size_t i = 0; i < inner.size(); ++i) {
    auto p = UnwrapPart(chunk, i);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->enc, Encoding::kDense);
    EXPECT_EQ(p->data, inner[i]);
    std::vector<int64_t> ts;
    std::vector<double> vs;
    ASSERT_TRUE(DecodeAll(p->enc, p->data, &ts, &vs).ok());
    EXPECT_EQ(ts, (std::vector<int64_t>{300000, 600000, 900000}));
  }
  auto none = UnwrapPart(chunk, 3);
  EXPECT_TRUE(none.status().IsNotFound()) << none.status().message();
  // The float readers refuse the record itself.
  std::vector<int64_t> ts;
  std::vector<double> vs;
  EXPECT_FALSE(DecodeAll(Encoding::kParts, chunk, &ts, &vs).ok());
  Iterator it(Encoding::kParts, chunk);
  EXPECT_FALSE(it.Next());
  EXPECT_FALSE(it.Err().ok());
}

TEST(PartsChunkTest, MalformedChunksAreCorruption) {
  std::vector<std::string> inner;
  const std::string chunk = ThreeParts(&inner);
  // Cut anywhere before the last part's end: the part asked for, or one
  // before it, is short.
  for (size_t cut = 0; cut < chunk.size(); ++cut) {
    auto p = UnwrapPart(std::string_view(chunk).substr(0, cut), 2);
    EXPECT_TRUE(p.status().IsCorruption()) << "cut at " << cut;
  }
  EXPECT_TRUE(UnwrapPart(std::string("\x00", 1), 0).status().IsCorruption());  // no parts
  std::string nested = "\x01";
  nested.push_back(static_cast<char>(Encoding::kParts));
  nested += "\x01" "x";
  auto p = UnwrapPart(nested, 0);
  ASSERT_TRUE(p.status().IsCorruption());
  EXPECT_NE(p.status().message().find("part 0 is a parts chunk"), std::string::npos) << p.status().message();
}

}  // namespace
}  // namespace trainwatch::chunkenc
