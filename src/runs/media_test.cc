#include "runs/media.h"

#include <gtest/gtest.h>

#include "base/base64.h"

namespace trainwatch::runs {
namespace {

// The signature and IHDR of a PNG of w x h (what the size is read from).
std::string PngHeader(uint32_t w, uint32_t h) {
  std::string b("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16);
  for (uint32_t v : {w, h}) {
    for (int s = 24; s >= 0; s -= 8) b += static_cast<char>((v >> s) & 0xff);
  }
  b += std::string("\x08\x02\0\0\0", 5);
  return b;
}

// SOI, an APP0 segment, then SOF0 of h x w.
std::string JpegHeader(uint16_t w, uint16_t h) {
  std::string b("\xFF\xD8\xFF\xE0\x00\x04" "ab" "\xFF\xC0\x00\x11\x08", 13);
  b += static_cast<char>(h >> 8);
  b += static_cast<char>(h & 0xff);
  b += static_cast<char>(w >> 8);
  b += static_cast<char>(w & 0xff);
  b += std::string(12, '\0');
  return b;
}

Result<RichValue> Parse(std::string_view json) { return ParseRichValue("k", Json::parse(json)); }

TEST(RichValue, HistogramBucketsAreCheckedAndStoredAsJson) {
  auto h = Parse(R"({"_type": "histogram", "buckets": [[0, 1, 3], [1, 2.5, 0], [3, 3, 7]]})");
  ASSERT_TRUE(h.ok()) << h.error().ToString();
  EXPECT_EQ(h->kind, "histogram");
  EXPECT_EQ(Json::parse(h->data), Json::parse("[[0.0, 1.0, 3.0], [1.0, 2.5, 0.0], [3.0, 3.0, 7.0]]"));
  const std::pair<const char*, const char*> kBad[] = {
      {R"({"_type": "histogram"})", "buckets: expected an array"},
      {R"({"_type": "histogram", "buckets": []})", "expected 1-4096 buckets"},
      {R"({"_type": "histogram", "buckets": [[0, 1]]})", "buckets[0]: expected [lower, upper, count]"},
      {R"({"_type": "histogram", "buckets": [[2, 1, 1]]})", "buckets[0]: lower is above upper"},
      {R"({"_type": "histogram", "buckets": [[0, 2, 1], [1, 3, 1]]})", "buckets[1]: lower is below"},
      {R"({"_type": "histogram", "buckets": [[0, 1, -1]]})", "buckets[0]: count is negative"},
  };
  for (auto [json, error] : kBad) {
    auto r = Parse(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.error().message().find(error), std::string::npos) << r.error().message();
  }
}

TEST(RichValue, ImagesCarryTheirFormatAndSize) {
  Json v = {{"_type", "image"}, {"format", "png"}, {"data", Base64Encode(PngHeader(640, 480))}, {"caption", "c"}};
  auto png = ParseRichValue("samples", v);
  ASSERT_TRUE(png.ok()) << png.error().ToString();
  EXPECT_EQ(png->data, PngHeader(640, 480));
  EXPECT_EQ(png->meta, Json::parse(R"({"format": "png", "width": 640, "height": 480, "caption": "c"})"));

  v = {{"_type", "image"}, {"format", "jpeg"}, {"data", Base64Encode(JpegHeader(32, 16))}};
  auto jpeg = ParseRichValue("samples", v);
  ASSERT_TRUE(jpeg.ok()) << jpeg.error().ToString();
  EXPECT_EQ(jpeg->meta["width"], 32);
  EXPECT_EQ(jpeg->meta["height"], 16);
  EXPECT_EQ(ImageContentType("jpeg"), "image/jpeg");

  v["format"] = "png";  // JPEG bytes said to be a PNG
  auto wrong = ParseRichValue("samples", v);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("not a PNG"), std::string::npos);
  v["format"] = "gif";
  EXPECT_FALSE(ParseRichValue("samples", v).ok());
  v = {{"_type", "image"}, {"format", "png"}, {"data", "not base64!"}};
  auto b64 = ParseRichValue("samples", v);
  ASSERT_FALSE(b64.ok());
  EXPECT_NE(b64.error().message().find("data: not base64"), std::string::npos);
}

TEST(RichValue, TextAndTables) {
  auto t = Parse(R"({"_type": "text", "text": "# Title\n*hi*"})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->data, "# Title\n*hi*");
  auto tab = Parse(R"({"_type": "table", "columns": ["a", "b"], "rows": [[1, "x"], [null, true]]})");
  ASSERT_TRUE(tab.ok()) << tab.error().ToString();
  EXPECT_EQ(Json::parse(tab->data), Json::parse(R"({"columns": ["a", "b"], "rows": [[1, "x"], [null, true]]})"));
  auto ragged = Parse(R"({"_type": "table", "columns": ["a", "b"], "rows": [[1]]})");
  ASSERT_FALSE(ragged.ok());
  EXPECT_NE(ragged.error().message().find("rows[0]: expected an array of 2 cells"), std::string::npos);
  auto nested = Parse(R"({"_type": "table", "columns": ["a"], "rows": [[{"x": 1}]]})");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.error().message().find("rows[0][0]"), std::string::npos);
}

TEST(RichValue, UnknownTypeOrKeyIsNamed) {
  auto r = Parse(R"({"_type": "audio"})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("unknown type \"audio\""), std::string::npos);
  EXPECT_FALSE(Parse(R"({"type": "text"})").ok());
  EXPECT_FALSE(ParseRichValue("", Json::parse(R"({"_type": "text", "text": ""})")).ok());
}

}  // namespace
}  // namespace trainwatch::runs
