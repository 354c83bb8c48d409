#include "base/coding.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace trainwatch {
namespace {

TEST(CodingTest, VarintRoundTripsEdgeValues) {
  auto f = [](uint64_t v) {
    std::string s;
    PutVarint64(&s, v);
    EXPECT_EQ(static_cast<int>(s.size()), VarintLength(v));
    std::string_view in = s;
    uint64_t got;
    ASSERT_TRUE(GetVarint64(&in, &got));
    EXPECT_EQ(got, v);
    EXPECT_TRUE(in.empty());
  };
  for (uint64_t v : std::initializer_list<uint64_t>{0ull, 1ull, 127ull, 128ull, 16383ull, 16384ull, (1ull << 32) - 1, 1ull << 32,
                     std::numeric_limits<uint64_t>::max()}) {
    f(v);
  }
}

TEST(CodingTest, SignedVarintRoundTripsRandomValues) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 10000; i++) {
    int64_t v = static_cast<int64_t>(rng()) >> (rng() % 64);
    std::string s;
    PutVarsint64(&s, v);
    std::string_view in = s;
    int64_t got;
    ASSERT_TRUE(GetVarsint64(&in, &got));
    EXPECT_EQ(got, v);
  }
}

TEST(CodingTest, TruncatedVarintIsRejected) {
  std::string s;
  PutVarint64(&s, 1ull << 40);
  for (size_t n = 0; n < s.size(); n++) {
    std::string_view in(s.data(), n);
    uint64_t v;
    EXPECT_FALSE(GetVarint64(&in, &v)) << n;
  }
}

TEST(CodingTest, OverlongVarintIsRejected) {
  std::string s(11, '\xff');
  std::string_view in = s;
  uint64_t v;
  EXPECT_FALSE(GetVarint64(&in, &v));
}

TEST(CodingTest, LengthPrefixedRejectsLengthBeyondInput) {
  std::string s;
  PutVarint64(&s, 10);
  s += "abc";
  std::string_view in = s, out;
  EXPECT_FALSE(GetLengthPrefixed(&in, &out));
}

}  // namespace
}  // namespace trainwatch
