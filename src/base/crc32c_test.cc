#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace trainwatch {
namespace {

// Test vectors from RFC 3720 (iSCSI), appendix B.4.
TEST(Crc32cTest, MatchesRfc3720Vectors) {
  std::string zeros(32, '\0');
  EXPECT_EQ(crc32c::Value(zeros), 0x8a9136aau);
  std::string ones(32, '\xff');
  EXPECT_EQ(crc32c::Value(ones), 0x62a8ab43u);
  std::string inc(32, '\0');
  for (int i = 0; i < 32; i++) inc[i] = static_cast<char>(i);
  EXPECT_EQ(crc32c::Value(inc), 0x46dd794eu);
  EXPECT_EQ(crc32c::Value("123456789"), 0xe3069283u);
}

TEST(Crc32cTest, ExtendEqualsWholeValue) {
  std::string s = "hello world, this is a longer string for crc32c";
  for (size_t cut = 0; cut <= s.size(); cut++) {
    uint32_t a = crc32c::Value(s.data(), cut);
    EXPECT_EQ(crc32c::Extend(a, s.data() + cut, s.size() - cut), crc32c::Value(s));
  }
}

}  // namespace
}  // namespace trainwatch
