#include "base/snappy.h"

#include <gtest/gtest.h>
#include <snappy.h>

#include <string>

namespace trainwatch {
namespace {

std::string Compress(const std::string& raw) {
  std::string out;
  snappy::Compress(raw.data(), raw.size(), &out);
  return out;
}

TEST(SnappyTest, RoundTripsAtSnappysLargestRatio) {
  const std::string zeros(size_t{4} << 20, '\0');  // copies of 64 bytes for 3: the most snappy expands
  std::string body = Compress(zeros), buf;
  ASSERT_LT(body.size() * 21, zeros.size());
  auto got = SnappyBlockDecode(body, &buf, size_t{256} << 20);
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ(*got, zeros);
}

// Found by the loki_proto fuzz campaign: 12 bytes declaring 256 MiB made the
// decoder allocate and zero-fill all of it before finding the body corrupt.
TEST(SnappyTest, AHeaderDeclaringMoreThanTheBodyCanHoldIsRefusedBeforeAllocating) {
  std::string body = "\x80\x80\x80\x7f";  // varint 266338304 (254 MiB), then 8 bytes
  body += "12345678";
  std::string buf;
  auto got = SnappyBlockDecode(body, &buf, size_t{256} << 20);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message(),
            "snappy: corrupt input (the header declares 266338304 decoded bytes, more than 12 compressed bytes can "
            "hold)");
  EXPECT_EQ(buf.capacity() < 1024, true);
  auto limit = SnappyBlockDecode(body, &buf, 1000);
  ASSERT_FALSE(limit.ok());
  EXPECT_EQ(limit.error().message(),
            "snappy: the body declares 266338304 decoded bytes, more than the limit of 1000 "
            "(--web.max-request-body-bytes)");
  EXPECT_FALSE(SnappyBlockDecode("", &buf, 1000).ok());
}

}  // namespace
}  // namespace trainwatch
