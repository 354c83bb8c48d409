#include "tsdb/chunkenc/parts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tsdb/chunkenc/chunk.h"

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

// A value chunk read with a count chunk of the same points
// (Iterator::ResetCounted): dense beside dense skips the counts'
// timestamps, anything else decodes both. Counts of another number of
// points are Corruption, and so, where both are decoded, are counts at
// other timestamps.
TEST(PartsChunkTest, ValuesReadWithTheirCounts) {
  for (int64_t jitter : {0, 13}) {  // regular timestamps (skipped as a header) or not
    std::vector<int64_t> ts;
    std::vector<double> vs, cs;
    for (int64_t i = 1; i <= 40; ++i) {
      ts.push_back(i * 300000 + (i * i % 7) * jitter);
      vs.push_back(static_cast<double>(i) * 1.5);
      cs.push_back(static_cast<double>(20 + i % 3));
    }
    auto encode = [](Encoding enc, const std::vector<int64_t>& t, const std::vector<double>& v) {
      std::string out;
      if (enc == Encoding::kDense) {
        EncodeDense(t.data(), v.data(), t.size(), &out);
      } else {
        EncodeXor(t.data(), v.data(), t.size(), &out);
      }
      return out;
    };
    for (Encoding venc : {Encoding::kDense, Encoding::kXor}) {
      for (Encoding cenc : {Encoding::kDense, Encoding::kXor}) {
        SCOPED_TRACE(testing::Message() << "jitter " << jitter << " values " << static_cast<int>(venc) << " counts "
                                        << static_cast<int>(cenc));
        const std::string values = encode(venc, ts, vs), counts = encode(cenc, ts, cs);
        Iterator it;
        it.ResetCounted(venc, values, cenc, counts);
        ASSERT_TRUE(it.Next()) << it.Err().ToString();
        EXPECT_EQ(it.t(), ts[0]);
        EXPECT_EQ(it.count(), cs[0]);
        ASSERT_TRUE(it.Seek(ts[10]));
        EXPECT_EQ(it.v(), vs[10]);
        EXPECT_EQ(it.count(), cs[10]);
        std::vector<model::Sample> out;
        std::vector<double> got;
        ASSERT_TRUE(it.AppendCountedUntil(ts[29], &out, &got));  // stops on ts[30]
        ASSERT_EQ(out.size(), 20u);
        ASSERT_EQ(got.size(), 20u);
        for (size_t i = 0; i < out.size(); ++i) {
          EXPECT_EQ(out[i].t, ts[10 + i]);
          EXPECT_EQ(out[i].v, vs[10 + i]);
          EXPECT_EQ(got[i], cs[10 + i]);
        }
        EXPECT_EQ(it.count(), cs[30]);
        EXPECT_FALSE(it.AppendCountedUntil(ts.back(), &out, &got));
        EXPECT_EQ(got.size(), 30u);
        EXPECT_EQ(got.back(), cs.back());
        EXPECT_TRUE(it.Err().ok()) << it.Err().ToString();

        // Counts of one point fewer, or of the same number at other times.
        std::vector<int64_t> short_ts(ts.begin(), ts.end() - 1), moved = ts;
        moved[5] += 1;
        for (const auto& other : {short_ts, moved}) {
          if (venc == Encoding::kDense && cenc == Encoding::kDense && other.size() == ts.size()) continue;
          std::vector<double> oc(cs.begin(), cs.begin() + static_cast<std::ptrdiff_t>(other.size()));
          const std::string bad = encode(cenc, other, oc);
          it.ResetCounted(venc, values, cenc, bad);
          EXPECT_FALSE(it.Next());
          EXPECT_TRUE(it.Err().IsCorruption()) << it.Err().ToString();
        }
      }
    }
  }
}

}  // namespace
}  // namespace trainwatch::chunkenc
