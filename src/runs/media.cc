#include "runs/media.h"

#include <cmath>

#include "base/base64.h"
#include "base/utf8.h"

namespace trainwatch::runs {
namespace {

Status Invalid(std::string_view kind, std::string_view msg) {
  return Status::InvalidArgument(std::string(kind) + ": " + std::string(msg));
}

uint32_t Be32(std::string_view b, size_t at) {
  auto u = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])); };
  return u(0) << 24 | u(1) << 16 | u(2) << 8 | u(3);
}
uint32_t Be16(std::string_view b, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(b[at])) << 8 | static_cast<unsigned char>(b[at + 1]);
}

Result<ImageSize> PngSize(std::string_view b) {
  static constexpr std::string_view kSignature("\x89PNG\r\n\x1a\n", 8);
  // The signature, then the IHDR chunk: length 13, "IHDR", width, height.
  if (b.size() < 24 || !b.starts_with(kSignature) || b.substr(12, 4) != "IHDR") {
    return Invalid("image", "data is not a PNG file (no PNG signature and IHDR chunk)");
  }
  ImageSize s{Be32(b, 16), Be32(b, 20)};
  if (s.width == 0 || s.height == 0) return Invalid("image", "PNG of width or height 0");
  return s;
}

Result<ImageSize> JpegSize(std::string_view b) {
  if (b.size() < 4 || static_cast<unsigned char>(b[0]) != 0xFF || static_cast<unsigned char>(b[1]) != 0xD8) {
    return Invalid("image", "data is not a JPEG file (no SOI marker)");
  }
  // Walk the marker segments up to a start of frame (SOF0-SOF15 but DHT,
  // JPG and DAC): FF Cn, length, precision, height, width.
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (static_cast<unsigned char>(b[i]) != 0xFF) return Invalid("image", "JPEG: expected a marker");
    unsigned char m = static_cast<unsigned char>(b[i + 1]);
    if (m == 0xFF) {  // fill byte
      i++;
      continue;
    }
    if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  // markers without a length
      i += 2;
      continue;
    }
    uint32_t len = Be16(b, i + 2);
    if (len < 2) return Invalid("image", "JPEG: a segment shorter than its length field");
    if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
      if (i + 9 > b.size()) break;
      ImageSize s{Be16(b, i + 7), Be16(b, i + 5)};  // height, then width
      if (s.width == 0 || s.height == 0) return Invalid("image", "JPEG of width or height 0");
      return s;
    }
    if (m == 0xDA || m == 0xD9) break;  // scan data or the end before any frame header
    i += 2 + len;
  }
  return Invalid("image", "JPEG: no frame header (SOF marker) found");
}

Result<RichValue> ParseHistogram(RichValue r, const Json& v) {
  auto b = v.find("buckets");
  if (b == v.end() || !b->is_array()) return Invalid("histogram", "buckets: expected an array of [lower, upper, count]");
  if (b->empty() || b->size() > kMaxHistogramBuckets) {
    return Invalid("histogram", "buckets: expected 1-" + std::to_string(kMaxHistogramBuckets) + " buckets");
  }
  Json out = Json::array();
  double prev_upper = -INFINITY;
  for (size_t i = 0; i < b->size(); i++) {
    const Json& e = (*b)[i];
    std::string where = "buckets[" + std::to_string(i) + "]";
    if (!e.is_array() || e.size() != 3 || !e[0].is_number() || !e[1].is_number() || !e[2].is_number()) {
      return Invalid("histogram", where + ": expected [lower, upper, count] (numbers)");
    }
    double lo = e[0].get<double>(), hi = e[1].get<double>(), n = e[2].get<double>();
    if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(n)) return Invalid("histogram", where + ": not finite");
    if (lo > hi) return Invalid("histogram", where + ": lower is above upper");
    if (lo < prev_upper) return Invalid("histogram", where + ": lower is below the previous bucket's upper");
    if (n < 0) return Invalid("histogram", where + ": count is negative");
    prev_upper = hi;
    out.push_back(Json::array({lo, hi, n}));
  }
  r.data = out.dump();
  return r;
}

Result<RichValue> ParseImage(RichValue r, const Json& v) {
  auto f = v.find("format");
  if (f == v.end() || !f->is_string() || (*f != "png" && *f != "jpeg")) {
    return Invalid("image", "format: expected \"png\" or \"jpeg\"");
  }
  auto d = v.find("data");
  if (d == v.end() || !d->is_string()) return Invalid("image", "data: expected the image's bytes in base64");
  const std::string& text = d->get_ref<const std::string&>();
  if (text.size() / 4 * 3 > kMaxImageBytes + 3) {
    return Invalid("image", "data: larger than " + std::to_string(kMaxImageBytes >> 20) + " MiB");
  }
  auto bytes = Base64Decode(text);
  if (!bytes) return Invalid("image", "data: not base64 (RFC 4648)");
  if (bytes->size() > kMaxImageBytes) {
    return Invalid("image", "data: larger than " + std::to_string(kMaxImageBytes >> 20) + " MiB");
  }
  const std::string format = f->get<std::string>();
  ASSIGN_OR_RETURN(ImageSize size, ReadImageSize(format, *bytes));
  r.meta = {{"format", format}, {"width", size.width}, {"height", size.height}};
  auto c = v.find("caption");
  if (c != v.end() && !c->is_null()) {
    if (!c->is_string() || c->get_ref<const std::string&>().size() > kMaxTextBytes) {
      return Invalid("image", "caption: expected a string");
    }
    r.meta["caption"] = *c;
  }
  r.data = std::move(*bytes);
  return r;
}

Result<RichValue> ParseText(RichValue r, const Json& v) {
  auto t = v.find("text");
  if (t == v.end() || !t->is_string()) return Invalid("text", "text: expected a string");
  const std::string& s = t->get_ref<const std::string&>();
  if (s.size() > kMaxTextBytes) return Invalid("text", "text: larger than 1 MiB");
  if (!IsValidUtf8(s)) return Invalid("text", "text: not valid UTF-8");
  r.data = s;
  return r;
}

Result<RichValue> ParseTable(RichValue r, const Json& v) {
  auto c = v.find("columns");
  if (c == v.end() || !c->is_array() || c->empty() || c->size() > kMaxTableColumns) {
    return Invalid("table", "columns: expected an array of 1-" + std::to_string(kMaxTableColumns) + " strings");
  }
  for (size_t i = 0; i < c->size(); i++) {
    if (!(*c)[i].is_string()) return Invalid("table", "columns[" + std::to_string(i) + "]: expected a string");
  }
  auto rows = v.find("rows");
  if (rows == v.end() || !rows->is_array()) return Invalid("table", "rows: expected an array of rows");
  if (rows->size() * c->size() > kMaxTableCells) {
    return Invalid("table", "more than " + std::to_string(kMaxTableCells) + " cells");
  }
  for (size_t i = 0; i < rows->size(); i++) {
    const Json& row = (*rows)[i];
    std::string where = "rows[" + std::to_string(i) + "]";
    if (!row.is_array() || row.size() != c->size()) {
      return Invalid("table", where + ": expected an array of " + std::to_string(c->size()) + " cells");
    }
    for (size_t k = 0; k < row.size(); k++) {
      const Json& cell = row[k];
      if (!(cell.is_string() || cell.is_number() || cell.is_boolean() || cell.is_null())) {
        return Invalid("table", where + "[" + std::to_string(k) + "]: expected a string, number, boolean or null");
      }
    }
  }
  r.data = DumpJson(Json{{"columns", *c}, {"rows", *rows}});
  return r;
}

}  // namespace

Result<ImageSize> ReadImageSize(std::string_view format, std::string_view bytes) {
  if (format == "png") return PngSize(bytes);
  if (format == "jpeg") return JpegSize(bytes);
  return Invalid("image", "format: expected \"png\" or \"jpeg\"");
}

std::string_view ImageContentType(std::string_view format) {
  return format == "jpeg" ? "image/jpeg" : "image/png";
}

Result<RichValue> ParseRichValue(std::string_view key, const Json& v) {
  if (key.empty() || key.size() > kMaxMediaKeyBytes || !IsValidUtf8(key)) {
    return Status::InvalidArgument("key: expected 1-256 bytes of UTF-8");
  }
  auto t = v.find("_type");
  if (t == v.end() || !t->is_string()) {
    return Status::InvalidArgument("_type: expected \"histogram\", \"image\", \"text\" or \"table\"");
  }
  RichValue r;
  r.key = std::string(key);
  r.kind = t->get<std::string>();
  if (r.kind == "histogram") return ParseHistogram(std::move(r), v);
  if (r.kind == "image") return ParseImage(std::move(r), v);
  if (r.kind == "text") return ParseText(std::move(r), v);
  if (r.kind == "table") return ParseTable(std::move(r), v);
  return Status::InvalidArgument("_type: unknown type \"" + r.kind +
                                 "\" (expected \"histogram\", \"image\", \"text\" or \"table\")");
}

}  // namespace trainwatch::runs
