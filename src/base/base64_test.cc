#include "base/base64.h"

#include <gtest/gtest.h>

namespace trainwatch {
namespace {

TEST(Base64, RoundTripsRfc4648Vectors) {
  const std::pair<const char*, const char*> kVectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"}};
  for (auto [plain, encoded] : kVectors) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    EXPECT_EQ(Base64Decode(encoded), plain);
  }
}

TEST(Base64, PaddingIsOptional) {
  EXPECT_EQ(Base64Decode("Zg"), "f");
  EXPECT_EQ(Base64Decode("Zm8"), "fo");
}

TEST(Base64, RejectsWhatNoEncoderWrites) {
  EXPECT_FALSE(Base64Decode("Z"));          // a length no encoding has
  EXPECT_FALSE(Base64Decode("Zm9v!"));      // outside the alphabet
  EXPECT_FALSE(Base64Decode("Zg=a"));       // padding inside
  EXPECT_FALSE(Base64Decode("Zm9vY=="));    // padding that does not complete a quantum
}

TEST(Base64, AllByteValues) {
  std::string all;
  for (int i = 0; i < 256; i++) all += static_cast<char>(i);
  EXPECT_EQ(Base64Decode(Base64Encode(all)), all);
}

}  // namespace
}  // namespace trainwatch
