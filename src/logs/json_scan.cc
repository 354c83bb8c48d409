#include "logs/json_scan.h"

#include <bit>
#include <charconv>
#include <cstring>

#include "base/json.h"

namespace trainwatch::logs {

namespace {

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighs = 0x8080808080808080ull;

// High bit set in (at least) the lowest byte of `x` that a string scan must
// stop at: '"', '\\', a control byte or a byte >= 0x80. A borrow can only set
// bits above a real hit, so the lowest set bit is exact.
inline uint64_t StringStops(uint64_t x) {
  uint64_t q = x ^ (kOnes * '"');
  uint64_t b = x ^ (kOnes * '\\');
  return (((q - kOnes) & ~q) | ((b - kOnes) & ~b) | ((x - kOnes * 0x20) & ~x) | x) & kHighs;
}

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The 4 hex digits at s[pos..], or -1.
int32_t Hex4(std::string_view s, size_t pos) {
  if (pos + 4 > s.size()) return -1;
  int32_t v = 0;
  for (size_t i = 0; i < 4; ++i) {
    int h = HexValue(s[pos + i]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Whether the number `text` (valid JSON grammar) is finite as a double: the
// decimal exponent of its first significant digit decides, and at 308 the
// exact conversion (a value that rounds to infinity is an overflow, as it was
// for nlohmann::json; one that underflows is 0 and fine).
bool FiniteNumber(std::string_view text) {
  size_t i = text[0] == '-' ? 1 : 0;
  size_t int_start = i;
  while (i < text.size() && IsDigit(text[i])) ++i;
  size_t int_end = i;
  size_t frac_start = i, frac_end = i;
  if (i < text.size() && text[i] == '.') {
    frac_start = ++i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    frac_end = i;
  }
  int64_t exp = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool neg = text[i] == '-';
    if (text[i] == '-' || text[i] == '+') ++i;
    for (; i < text.size(); ++i) exp = std::min<int64_t>(exp * 10 + (text[i] - '0'), 1000000000);
    if (neg) exp = -exp;
  }
  int64_t e10;
  if (text[int_start] != '0') {
    e10 = static_cast<int64_t>(int_end - int_start) - 1 + exp;
  } else {
    size_t j = frac_start;
    while (j < frac_end && text[j] == '0') ++j;
    if (j == frac_end) return true;  // zero
    e10 = -static_cast<int64_t>(j - frac_start + 1) + exp;
  }
  if (e10 < 308) return true;
  if (e10 > 308) return false;
  double d;
  auto r = std::from_chars(text.data(), text.data() + text.size(), d);
  return r.ec == std::errc();
}

}  // namespace

bool JsonScanner::Escape() {
  // At a backslash.
  if (pos_ + 1 >= s_.size()) return false;
  switch (s_[pos_ + 1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
      pos_ += 2;
      return true;
    case 'u': {
      int32_t cp = Hex4(s_, pos_ + 2);
      if (cp < 0) return false;
      pos_ += 6;
      if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // a low surrogate first
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (pos_ + 1 >= s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') return false;
        int32_t lo = Hex4(s_, pos_ + 2);
        if (lo < 0xDC00 || lo > 0xDFFF) return false;
        pos_ += 6;
      }
      return true;
    }
    default:
      return false;
  }
}

bool JsonScanner::Utf8() {
  // At a byte >= 0x80: one well-formed sequence (Unicode table 3-7).
  auto at = [&](size_t k) { return static_cast<unsigned char>(s_[pos_ + k]); };
  unsigned char c = at(0);
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return false;
  }
  if (pos_ + n > s_.size()) return false;
  if (at(1) < lo || at(1) > hi) return false;
  for (size_t k = 2; k < n; ++k) {
    if ((at(k) & 0xC0) != 0x80) return false;
  }
  pos_ += n;
  return true;
}

bool JsonScanner::String(JsonValue* v) {
  const size_t start = pos_++;
  const char* p = s_.data();
  const size_t n = s_.size();
  bool escaped = false;
  for (;;) {
    if constexpr (std::endian::native == std::endian::little) {
      while (pos_ + 8 <= n) {
        uint64_t x;
        std::memcpy(&x, p + pos_, 8);
        uint64_t stops = StringStops(x);
        if (stops != 0) {
          pos_ += static_cast<size_t>(std::countr_zero(stops)) / 8;
          break;
        }
        pos_ += 8;
      }
    }
    if (pos_ >= n) return false;
    unsigned char c = static_cast<unsigned char>(p[pos_]);
    if (c == '"') break;
    if (c == '\\') {
      escaped = true;
      if (!Escape()) return false;
    } else if (c < 0x20) {
      return false;
    } else if (c >= 0x80) {
      if (!Utf8()) return false;
    } else {
      ++pos_;
    }
  }
  ++pos_;
  v->type = JsonType::kString;
  v->text = s_.substr(start, pos_ - start);
  v->escaped = escaped;
  return true;
}

bool JsonScanner::Number(JsonValue* v) {
  const size_t start = pos_;
  const size_t n = s_.size();
  if (s_[pos_] == '-') ++pos_;
  if (pos_ >= n) return false;
  if (s_[pos_] == '0') {
    ++pos_;
  } else if (s_[pos_] >= '1' && s_[pos_] <= '9') {
    while (pos_ < n && IsDigit(s_[pos_])) ++pos_;
  } else {
    return false;
  }
  const size_t int_digits = pos_ - start - (s_[start] == '-' ? 1 : 0);
  bool integer = true;
  size_t exp_digits = 0;
  if (pos_ < n && s_[pos_] == '.') {
    integer = false;
    size_t d = ++pos_;
    while (pos_ < n && IsDigit(s_[pos_])) ++pos_;
    if (pos_ == d) return false;
  }
  if (pos_ < n && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
    integer = false;
    ++pos_;
    if (pos_ < n && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
    size_t d = pos_;
    while (pos_ < n && IsDigit(s_[pos_])) ++pos_;
    if (pos_ == d) return false;
    exp_digits = pos_ - d;
  }
  v->type = JsonType::kNumber;
  v->text = s_.substr(start, pos_ - start);
  v->integer = integer;
  // Below 10^(200 + 99) nothing can reach infinity: only a long mantissa or
  // an exponent of three digits or more needs the exact check.
  if ((int_digits > 200 || exp_digits > 2) && !FiniteNumber(v->text)) return false;
  return true;
}

bool JsonScanner::Literal(std::string_view word, JsonType type, JsonValue* v) {
  if (s_.substr(pos_, word.size()) != word) return false;
  v->type = type;
  v->text = s_.substr(pos_, word.size());
  pos_ += word.size();
  return true;
}

bool JsonScanner::Container(JsonValue* v) {
  const size_t start = pos_;
  std::string stack;  // '{' or '[' per open level
  bool spaced = false;
  JsonValue scalar;
  auto space = [&] {
    size_t before = pos_;
    SkipSpace();
    if (pos_ != before) spaced = true;
  };
  stack += s_[pos_++];
  bool first = true;  // just after the opening bracket: the close may follow
  for (;;) {
    space();
    if (AtEnd()) return false;
    bool closed = false;
    if (stack.back() == '{') {
      if (first && Consume('}')) {
        closed = true;
      } else {
        if (!Peek('"') || !String(&scalar)) return false;
        space();
        if (!Consume(':')) return false;
        space();
      }
    } else if (first && Consume(']')) {
      closed = true;
    }
    if (!closed) {
      if (AtEnd()) return false;
      char c = s_[pos_];
      if (c == '{' || c == '[') {
        // Stored fields are later parsed and dumped by recursive code
        // (forwarding, Loki metadata): nesting is bounded here, for free.
        if (stack.size() >= kMaxJsonDepth) return false;
        stack += c;
        ++pos_;
        first = true;
        continue;
      }
      if (!Value(&scalar)) return false;
    } else {
      stack.pop_back();
    }
    // After a value (or a closed container): a comma, or closes.
    for (;;) {
      if (stack.empty()) {
        v->type = s_[start] == '{' ? JsonType::kObject : JsonType::kArray;
        v->text = s_.substr(start, pos_ - start);
        v->spaced = spaced;
        return true;
      }
      space();
      if (Consume(',')) break;
      if (!Consume(stack.back() == '{' ? '}' : ']')) return false;
      stack.pop_back();
    }
    first = false;
  }
}

bool JsonScanner::Value(JsonValue* v) {
  if (AtEnd()) return false;
  v->escaped = v->spaced = v->integer = false;
  switch (s_[pos_]) {
    case '"': return String(v);
    case '{': case '[': return Container(v);
    case 't': return Literal("true", JsonType::kTrue, v);
    case 'f': return Literal("false", JsonType::kFalse, v);
    case 'n': return Literal("null", JsonType::kNull, v);
    default:
      if (s_[pos_] == '-' || IsDigit(s_[pos_])) return Number(v);
      return false;
  }
}

void AppendJsonStringContent(std::string* out, std::string_view quoted) {
  std::string_view s = quoted.substr(1, quoted.size() - 2);
  size_t i = 0;
  while (i < s.size()) {
    size_t bs = s.find('\\', i);
    if (bs == std::string_view::npos) bs = s.size();
    out->append(s.data() + i, bs - i);
    if (bs == s.size()) break;
    char e = s[bs + 1];
    i = bs + 2;
    switch (e) {
      case 'b': *out += '\b'; break;
      case 'f': *out += '\f'; break;
      case 'n': *out += '\n'; break;
      case 'r': *out += '\r'; break;
      case 't': *out += '\t'; break;
      case 'u': {
        uint32_t cp = static_cast<uint32_t>(Hex4(s, i));
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {  // the scanner checked the low half follows
          uint32_t lo = static_cast<uint32_t>(Hex4(s, i + 2));
          i += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        AppendUtf8(out, cp);
        break;
      }
      default: *out += e;  // " \ /
    }
  }
}

void AppendCompactJson(std::string* out, const JsonValue& v) {
  if (!v.spaced) {
    out->append(v.text);
    return;
  }
  std::string_view t = v.text;
  for (size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (JsonScanner::IsSpace(c)) continue;
    if (c != '"') {
      *out += c;
      continue;
    }
    size_t j = i + 1;  // the closing quote: the first one not escaped
    while (t[j] != '"') j += t[j] == '\\' ? 2 : 1;
    out->append(t.substr(i, j + 1 - i));
    i = j;
  }
}

void AppendJsonQuoted(std::string* out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  *out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) {
          *out += "\\u00";
          *out += kHex[c >> 4];
          *out += kHex[c & 15];
        } else {
          *out += ch;
        }
    }
  }
  *out += '"';
}

}  // namespace trainwatch::logs
