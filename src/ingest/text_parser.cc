#include "ingest/text_parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/ascii.h"

namespace trainwatch::ingest {
namespace {

// Character classes, one table lookup per byte on the hot path.
enum : uint8_t { kNameStart = 1, kNameChar = 2, kColon = 4, kSpace = 8 };

constexpr std::array<uint8_t, 256> MakeTable() {
  std::array<uint8_t, 256> t{};
  for (int c = 'a'; c <= 'z'; c++) t[c] = kNameStart | kNameChar;
  for (int c = 'A'; c <= 'Z'; c++) t[c] = kNameStart | kNameChar;
  for (int c = '0'; c <= '9'; c++) t[c] = kNameChar;
  t['_'] = kNameStart | kNameChar;
  t[':'] = kColon;
  t[' '] = kSpace;
  t['\t'] = kSpace;
  return t;
}
constexpr std::array<uint8_t, 256> kTable = MakeTable();

inline uint8_t Class(char c) { return kTable[static_cast<uint8_t>(c)]; }
inline bool IsSpace(char c) { return Class(c) & kSpace; }

inline void SkipSpaces(std::string_view s, size_t* pos) {
  while (*pos < s.size() && IsSpace(s[*pos])) ++*pos;
}

// The token at `pos` up to the next space (or end).
inline std::string_view Token(std::string_view s, size_t* pos) {
  size_t start = *pos;
  while (*pos < s.size() && !IsSpace(s[*pos])) ++*pos;
  return s.substr(start, *pos - start);
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

inline bool IsNameChar(char c) { return Class(c) & (kNameChar | kColon); }

// The longest metric name at the start of `s` ([a-zA-Z_:][a-zA-Z0-9_:]*).
inline size_t NameLength(std::string_view s) {
  if (s.empty() || !(Class(s[0]) & (kNameStart | kColon))) return 0;
  size_t n = 1;
  while (n < s.size() && IsNameChar(s[n])) n++;
  return n;
}

inline bool IsLabelName(std::string_view name) {
  bool valid = !name.empty() && (Class(name[0]) & kNameStart);
  for (size_t i = 1; valid && i < name.size(); i++) valid = Class(name[i]) & kNameChar;
  return valid;
}

// RFC 3629 UTF-8: no overlong forms, no surrogates, at most U+10FFFF.
bool ValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* e = p + s.size();
  while (p < e) {
    // ASCII, the common case, eight bytes at a time.
    while (e - p >= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      if (w & 0x8080808080808080ull) break;
      p += 8;
    }
    if (p == e) break;
    unsigned char c = *p;
    if (c < 0x80) {
      p++;
      continue;
    }
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (static_cast<size_t>(e - p) <= n) return false;
    if (p[1] < lo || p[1] > hi) return false;
    for (size_t i = 2; i <= n; i++) {
      if ((p[i] & 0xC0) != 0x80) return false;
    }
    p += n + 1;
  }
  return true;
}

// Code points in valid UTF-8.
inline size_t Runes(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool ParseFloatImpl(std::string_view s, double* out, bool allow_hex);

// Offset of the first "_created" in s, or npos. With SSE2, 16 positions at
// a time that have '_' and, 7 bytes on, 'd' (then compared in full): about
// twice memmem's speed, and a scrape body without _created pays one pass.
size_t FindCreated(std::string_view s) {
  static constexpr std::string_view kCreated = "_created";
  size_t i = 0;
#ifdef __SSE2__
  const __m128i first = _mm_set1_epi8('_'), last = _mm_set1_epi8('d');
  for (; i + 16 + 7 <= s.size(); i += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i + 7));
    auto m = static_cast<unsigned>(_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, last))));
    for (; m != 0; m &= m - 1) {
      const size_t at = i + static_cast<size_t>(__builtin_ctz(m));
      if (s.compare(at, kCreated.size(), kCreated) == 0) return at;
    }
  }
#endif
  const size_t at = s.substr(i).find(kCreated);
  return at == std::string_view::npos ? at : i + at;
}

}  // namespace

TextFormat FormatFromContentType(std::string_view content_type) {
  // Media type only: parameters (version, charset) follow a ';'.
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && IsSpace(media.front())) media.remove_prefix(1);
  while (!media.empty() && IsSpace(media.back())) media.remove_suffix(1);
  return EqualsIgnoreCase(media, "application/openmetrics-text") ? TextFormat::kOpenMetrics : TextFormat::kPrometheus;
}

bool ParseGoFloat(std::string_view s, double* out) { return ParseFloatImpl(s, out, true); }

bool ParseExpositionFloat(std::string_view s, double* out) { return ParseFloatImpl(s, out, false); }

namespace {

bool ParseFloatImpl(std::string_view s, double* out, bool allow_hex) {
  if (s.empty()) return false;
  std::string_view body = s;
  bool neg = false;
  if (body[0] == '+' || body[0] == '-') {
    neg = body[0] == '-';
    body.remove_prefix(1);
    if (body.empty()) return false;
  }
  char c0 = body[0];
  if (c0 == 'n' || c0 == 'N') {
    // Go accepts "NaN" only without a sign.
    if (s.size() != body.size() || !EqualsIgnoreCase(body, "nan")) return false;
    std::memcpy(out, &kNormalNaNBits, sizeof *out);
    return true;
  }
  if (c0 == 'i' || c0 == 'I') {
    if (!EqualsIgnoreCase(body, "inf") && !EqualsIgnoreCase(body, "infinity")) return false;
    *out = neg ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  std::chars_format fmt = std::chars_format::general;
  if (allow_hex && body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
    body.remove_prefix(2);
    fmt = std::chars_format::hex;
  }
  // from_chars accepts neither a '+' nor a second sign; the sign was taken above.
  if (body[0] == '+' || body[0] == '-') return false;
  double v = 0;
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), v, fmt);
  if (end != body.data() + body.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    // Go rejects overflow but rounds underflow to zero (or a denormal).
    std::string tmp(s);
    errno = 0;
    v = std::strtod(tmp.c_str(), nullptr);
    if (std::isinf(v)) return false;
    *out = v;
    return true;
  }
  if (ec != std::errc()) return false;
  *out = neg ? -v : v;
  return true;
}

}  // namespace

TextParser::TextParser(std::string_view body, ParseOptions opts)
    : body_(body), opts_(std::move(opts)), om_(opts_.format == TextFormat::kOpenMetrics) {
  labels_.reserve(16);
  if (opts_.expfmt_rules && !om_) opts_.known_series = nullptr;
}

// Finds the end (one past '}') of the label block starting at line[open]
// == '{', skipping quoted values with escapes. False when unterminated.
static bool LabelBlockEnd(std::string_view line, size_t open, size_t* end) {
  const char* p = line.data() + open + 1;
  const char* e = line.data() + line.size();
  while (p < e) {
    // Outside quotes only '}' and '"' matter; memchr finds the next quote.
    const char* q = static_cast<const char*>(std::memchr(p, '"', static_cast<size_t>(e - p)));
    const char* b = static_cast<const char*>(std::memchr(p, '}', static_cast<size_t>((q ? q : e) - p)));
    if (b != nullptr) {
      *end = static_cast<size_t>(b - line.data()) + 1;
      return true;
    }
    if (q == nullptr) return false;
    // Inside a quoted value: find the closing quote not escaped by '\\'.
    for (p = q + 1;; p++) {
      p = static_cast<const char*>(std::memchr(p, '"', static_cast<size_t>(e - p)));
      if (p == nullptr) return false;
      size_t backslashes = 0;
      while (p - backslashes - 1 > q && p[-static_cast<std::ptrdiff_t>(backslashes) - 1] == '\\') backslashes++;
      if (backslashes % 2 == 0) break;
    }
    p++;
  }
  return false;
}

bool TextParser::Fail(std::string msg) {
  status_ = Status::InvalidArgument("line " + std::to_string(line_no_) + ": " + msg);
  pos_ = body_.size();
  return false;
}

bool TextParser::Next() {
  if (om_) return NextOpenMetrics();
  while (pos_ < body_.size()) {
    size_t start = pos_;
    const void* nl = std::memchr(body_.data() + start, '\n', body_.size() - start);
    size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - body_.data()) : body_.size();
    pos_ = end + 1;
    ++line_no_;
    std::string_view line = body_.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t i = 0;
    SkipSpaces(line, &i);
    if (i == line.size()) continue;  // blank
    if (opts_.expfmt_rules && nl == nullptr) return Fail("unexpected end of input: the last line has no newline");
    if (line[i] == '#') {
      if (!ParseComment(line.substr(i))) return false;
      continue;
    }
    if (!ParseLine(line.substr(i))) return false;
    if (opts_.expfmt_rules && !CheckExpfmtSample()) return false;
    return true;
  }
  pos_ = body_.size();
  return false;
}

bool TextParser::NextOpenMetrics() {
  if (!status_.ok()) return false;
  while (pos_ < body_.size()) {
    ++line_no_;
    if (eof_) return Fail("unexpected data after # EOF");
    size_t start = pos_;
    const void* nl = std::memchr(body_.data() + start, '\n', body_.size() - start);
    size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - body_.data()) : body_.size();
    pos_ = end + 1;
    std::string_view line = body_.substr(start, end - start);
    if (line.empty()) return Fail("empty line (OpenMetrics allows no blank lines)");
    if (line[0] == '#') {
      if (!ParseComment(line)) return false;
      continue;
    }
    if (!ParseLineOpenMetrics(line) || !CheckFamilySample()) return false;
    if (opts_.start_timestamps) SetStartTimestamp(start);
    return true;
  }
  pos_ = body_.size();
  if (!eof_) {
    // The missing "# EOF" would be the next line.
    if (body_.empty() || body_.back() == '\n') ++line_no_;
    return Fail("data does not end with # EOF");
  }
  return false;
}

namespace {

// HELP text unescaped into *out: \\ and \n, and in OpenMetrics also \".
// Other escapes stay as written (as Prometheus does) unless `strict`.
bool UnescapeHelp(std::string_view text, bool om, bool strict, std::string* out, char* bad) {
  out->clear();
  for (size_t i = 0; i < text.size(); i++) {
    char c = text[i];
    if (c != '\\' || i + 1 == text.size()) {
      if (c == '\\' && strict) {
        *bad = '\0';
        return false;
      }
      *out += c;
      continue;
    }
    char e = text[++i];
    if (e == '\\') {
      *out += '\\';
    } else if (e == 'n') {
      *out += '\n';
    } else if (e == '"' && om) {
      *out += '"';
    } else if (strict) {
      *bad = e;
      return false;
    } else {
      *out += '\\';
      *out += e;
    }
  }
  return true;
}

}  // namespace

TextParser::Family TextParser::FamilyFromType(std::string_view t, bool om) {
  if (t == "counter") return Family::kCounter;
  if (t == "gauge") return Family::kGauge;
  if (t == "histogram") return Family::kHistogram;
  if (t == "summary") return Family::kSummary;
  if (om) {
    if (t == "gaugehistogram") return Family::kGaugeHistogram;
    if (t == "info") return Family::kInfo;
    if (t == "stateset") return Family::kStateset;
    if (t == "unknown") return Family::kUnknown;
  } else if (t == "untyped") {
    return Family::kUntyped;
  }
  return Family::kInvalid;
}

// A '#' line: HELP, TYPE, UNIT (reported), EOF (OpenMetrics), or a comment
// (text format only).
bool TextParser::ParseComment(std::string_view line) {
  using Kind = MetadataLine::Kind;
  Kind kind;
  std::string_view family, text;
  if (om_) {
    if (line == "# EOF") {
      eof_ = true;
      return true;
    }
    std::string_view kw = line.size() >= 7 && line[1] == ' ' && line[6] == ' ' ? line.substr(2, 4) : "";
    if (kw == "HELP") {
      kind = Kind::kHelp;
    } else if (kw == "TYPE") {
      kind = Kind::kType;
    } else if (kw == "UNIT") {
      kind = Kind::kUnit;
    } else {
      return Fail("invalid comment " + Quote(line) + ": OpenMetrics allows only # HELP, # TYPE, # UNIT and # EOF");
    }
    std::string_view rest = line.substr(7);
    size_t n = NameLength(rest);
    if (n == 0 || (n < rest.size() && rest[n] != ' ')) {
      return Fail("invalid metric name " + Quote(rest.substr(0, rest.find(' '))) + " in # " + std::string(kw));
    }
    if (n == rest.size()) {
      return Fail("expected a space and text after metric name " + Quote(rest) + " in # " + std::string(kw));
    }
    family = rest.substr(0, n);
    text = rest.substr(n + 1);
  } else {
    // "#" then blanks, a keyword, blanks, a name, blanks, the text.
    size_t pos = 1;
    if (pos == line.size() || !IsSpace(line[pos])) return true;  // "#comment"
    SkipSpaces(line, &pos);
    std::string_view kw = Token(line, &pos);
    if (kw == "HELP") {
      kind = Kind::kHelp;
    } else if (kw == "TYPE") {
      kind = Kind::kType;
    } else if (kw == "UNIT") {
      kind = Kind::kUnit;
    } else {
      return true;  // a comment
    }
    // A keyword alone is a comment. expfmt ignores a HELP or TYPE without a
    // name or text; Prometheus refuses them, except "# HELP name".
    if (pos == line.size()) return true;
    SkipSpaces(line, &pos);
    std::string_view rest = line.substr(pos);
    size_t n = NameLength(rest);
    if (n == 0 || (n < rest.size() && !IsSpace(rest[n]))) {
      if (kind == Kind::kUnit) return true;  // not metadata in this format
      if (rest.empty()) {
        if (opts_.expfmt_rules) return true;
        return Fail("missing metric name in # " + std::string(kw));
      }
      size_t t = 0;
      return Fail("invalid metric name " + Quote(Token(rest, &t)) + " in # " + std::string(kw));
    }
    family = rest.substr(0, n);
    pos = n;
    SkipSpaces(rest, &pos);
    text = rest.substr(pos);
    if (kind != Kind::kHelp) {
      while (!text.empty() && IsSpace(text.back())) text.remove_suffix(1);
    }
    if (opts_.expfmt_rules && text.empty()) return true;
  }

  Family type = Family::kUnknown;
  switch (kind) {
    case Kind::kHelp:
      if (!ValidUtf8(text)) return Fail("help text of " + Quote(family) + " is not valid UTF-8");
      if (text.find('\\') != std::string_view::npos) {
        char bad = 0;
        if (!UnescapeHelp(text, om_, opts_.expfmt_rules, &meta_text_, &bad)) {
          return Fail("invalid escape sequence " + Quote(std::string("\\") + (bad ? std::string(1, bad) : "")) +
                      " in help text of " + Quote(family));
        }
        text = meta_text_;
      }
      break;
    case Kind::kType:
      if (text.empty()) return Fail("missing type for metric " + Quote(family) + " in # TYPE");
      type = FamilyFromType(text, om_);
      if (type == Family::kInvalid) return Fail("invalid metric type " + Quote(text) + " for " + Quote(family));
      break;
    case Kind::kUnit:
      if (om_ && !text.empty() &&
          !(family.size() > text.size() && EndsWith(family, text) && family[family.size() - text.size() - 1] == '_')) {
        return Fail("unit " + Quote(text) + " is not a suffix of metric family " + Quote(family));
      }
      if (om_ && !ValidUtf8(text)) return Fail("unit of " + Quote(family) + " is not valid UTF-8");
      break;
  }
  if (om_) {
    if (!CheckFamilyMetadata(kind, family, type)) return false;
  } else if (opts_.expfmt_rules && kind != Kind::kUnit) {
    // As expfmt.TextParser: one HELP and one TYPE per name, TYPE before samples.
    uint8_t& m = expfmt_meta_[family];
    if (kind == Kind::kHelp) {
      if (m & 1) return Fail("second HELP line for metric name " + Quote(family));
      m |= 1;
    } else {
      if ((m & 2) || expfmt_sample_names_.contains(family)) {
        return Fail("second TYPE line for metric name " + Quote(family) + ", or TYPE reported after samples");
      }
      m = static_cast<uint8_t>(m | 2 | (static_cast<uint8_t>(type) << 4));
      last_name_ = {};  // the next sample re-derives its checks
    }
  }
  if (opts_.on_metadata) opts_.on_metadata(MetadataLine{kind, line_no_, family, text});
  return true;
}

// The sample suffixes a family of `type` has in OpenMetrics (besides the bare
// name, which Prometheus accepts for every type).
static bool HasFamilySuffix(uint8_t type, std::string_view suffix) {
  switch (type) {
    case 1:  // counter
      return suffix == "_total" || suffix == "_created";
    case 3:  // histogram
      return suffix == "_bucket" || suffix == "_count" || suffix == "_sum" || suffix == "_created";
    case 4:  // gaugehistogram
      return suffix == "_bucket" || suffix == "_gcount" || suffix == "_gsum";
    case 5:  // summary
      return suffix == "_count" || suffix == "_sum" || suffix == "_created";
    case 6:  // info
      return suffix == "_info";
    default:
      return false;
  }
}

bool TextParser::CheckFamilyMetadata(MetadataLine::Kind kind, std::string_view family, Family type) {
  last_name_ = {};
  uint8_t bit = static_cast<uint8_t>(1u << static_cast<unsigned>(kind));
  if (family != family_.name) {
    if (!family_.name.empty()) closed_families_.emplace(family_.name, static_cast<uint8_t>(family_.type));
    if (closed_families_.contains(family)) {
      return Fail("metadata for metric family " + Quote(family) +
                  " after other families: families must not be interleaved");
    }
    family_ = FamilyState{family, Family::kUnknown, false, 0};
  } else {
    static constexpr const char* kNames[] = {"HELP", "TYPE", "UNIT"};
    const char* kw = kNames[static_cast<unsigned>(kind)];
    if (family_.has_samples) return Fail(std::string("# ") + kw + " for metric family " + Quote(family) + " after its samples");
    if (family_.seen & bit) return Fail(std::string("second # ") + kw + " for metric family " + Quote(family));
  }
  family_.seen |= bit;
  if (kind == MetadataLine::Kind::kType) family_.type = type;
  return true;
}

bool TextParser::CheckFamilySample() {
  std::string_view name = sample_.name;
  if (name == last_name_) return true;
  last_name_ = name;
  auto in_family = [&](std::string_view fam, uint8_t type) {
    if (name.size() < fam.size() || name.substr(0, fam.size()) != fam) return false;
    return name.size() == fam.size() || HasFamilySuffix(type, name.substr(fam.size()));
  };
  if (!family_.name.empty() && in_family(family_.name, static_cast<uint8_t>(family_.type))) {
    family_.has_samples = true;
    return true;
  }
  // A new family without metadata; it must not continue a closed one.
  if (!family_.name.empty()) closed_families_.emplace(family_.name, static_cast<uint8_t>(family_.type));
  auto closed = closed_families_.find(name);
  if (closed == closed_families_.end()) {
    size_t us = name.rfind('_');
    if (us != std::string_view::npos && us > 0) {
      auto it = closed_families_.find(name.substr(0, us));
      if (it != closed_families_.end() && HasFamilySuffix(it->second, name.substr(us))) closed = it;
    }
  }
  if (closed != closed_families_.end()) {
    return Fail("sample " + Quote(name) + " of metric family " + Quote(closed->first) +
                " after other families: families must not be interleaved");
  }
  family_ = FamilyState{name, Family::kUnknown, true, 0};
  return true;
}

// The sample at body_[line_start] has passed CheckFamilySample: on the first
// sample of a counter, histogram or summary family, reads the family's
// `_created` lines; then gives the sample the start timestamp of its labels.
void TextParser::SetStartTimestamp(size_t line_start) {
  const std::string_view family = family_.name;
  if (family.data() != st_family_.data() || family.size() != st_family_.size()) {
    st_family_ = family;
    created_count_ = created_next_ = 0;
    if (!created_index_.empty()) created_index_.clear();
    const bool typed = family_.type == Family::kCounter || family_.type == Family::kHistogram ||
                       family_.type == Family::kSummary;
    if (!typed || !ReadCreatedLines(line_start)) return;
  }
  if (created_count_ == 0) return;
  const std::string_view name = sample_.name;
  if (name.size() == family.size() + 8 && EndsWith(name, "_created")) {
    // The _created sample itself has none; the next group is the next entry's.
    created_next_++;
    return;
  }
  const std::string_view key = StartTimestampKey(sample_.series.substr(name.size()));
  if (created_next_ < created_count_ && created_[created_next_].key == key) {
    sample_.start_timestamp_ms = created_[created_next_].st;
    return;
  }
  if (created_index_.empty()) {
    for (size_t i = 0; i < created_count_; i++) created_index_.try_emplace(created_[i].key, created_[i].st);  // the first wins
  }
  if (auto it = created_index_.find(key); it != created_index_.end()) sample_.start_timestamp_ms = it->second;
}

// Reads the `_created` lines of the current family, whose first sample line
// starts at line_start, into created_; false when it has none. It visits
// only the lines that hold "_created": every line of the family starts with
// its name, so the first such line that is not the family's ends it.
bool TextParser::ReadCreatedLines(size_t line_start) {
  static constexpr std::string_view kCreated = "_created";
  const std::string_view family = family_.name;
  const auto type = static_cast<uint8_t>(family_.type);
  for (size_t from = line_start;;) {
    // The next "_created" in the body: one search resumed family after
    // family, so a body without any costs one pass.
    if (created_searched_ && created_at_ == std::string_view::npos) break;
    if (!created_searched_ || created_at_ < from) {
      created_searched_ = true;
      const size_t at = from >= body_.size() ? std::string_view::npos : FindCreated(body_.substr(from));
      created_at_ = at == std::string_view::npos ? at : from + at;
      if (at == std::string_view::npos) break;
    }
    size_t ls = created_at_;
    while (ls > line_start && body_[ls - 1] != '\n') ls--;
    const size_t nl = std::min(body_.find('\n', created_at_), body_.size());
    const std::string_view line = body_.substr(ls, nl - ls);
    if (line.compare(0, family.size(), family) != 0) break;  // a later family's line (or '#')
    size_t n = family.size();
    while (n < line.size() && IsNameChar(line[n])) n++;
    const std::string_view suffix = line.substr(family.size(), n - family.size());
    if (!suffix.empty() && !HasFamilySuffix(type, suffix)) break;  // family "<name>_x" begins
    from = nl + 1;
    if (suffix != kCreated) continue;  // "_created" in a label value or an exemplar
    // Malformed lines are skipped here: the parse proper reports them.
    size_t p = n;
    std::string_view block;
    if (p < line.size() && line[p] == '{') {
      size_t block_end = 0;
      if (!LabelBlockEnd(line, p, &block_end)) continue;
      block = line.substr(p, block_end - p);
      p = block_end;
    }
    if (p >= line.size() || line[p] != ' ') continue;
    const size_t value_end = std::min(line.find(' ', p + 1), line.size());
    double seconds = 0;
    if (!ParseExpositionFloat(line.substr(p + 1, value_end - p - 1), &seconds) || !std::isfinite(seconds)) continue;
    const double ms = seconds * 1000;  // Prometheus: int64(v * 1000.0)
    if (!(ms > -9.2e18 && ms < 9.2e18) || static_cast<int64_t>(ms) == 0) continue;
    if (created_count_ == created_.size()) created_.emplace_back();
    Created& c = created_[created_count_++];
    c.key.assign(StartTimestampKey(block));
    c.st = static_cast<int64_t>(ms);
  }
  return created_count_ > 0;
}

// A label block as written ("{a=\"1\",le=\"0.5\"}", or "") without the le
// label of a histogram or the quantile of a summary; "" for no labels.
std::string_view TextParser::StartTimestampKey(std::string_view block) {
  if (block.size() <= 2) return {};
  const std::string_view drop = family_.type == Family::kHistogram ? "le"
                                : family_.type == Family::kSummary ? "quantile"
                                                                   : "";
  if (drop.empty()) return block;
  size_t i = 1;  // at a label name
  while (i < block.size() && block[i] != '}') {
    const size_t name_start = i;
    while (i < block.size() && block[i] != '=') i++;
    const std::string_view name = block.substr(name_start, i - name_start);
    i += 2;  // '=' and the opening quote
    while (i < block.size() && block[i] != '"') i += block[i] == '\\' ? 2 : 1;
    if (++i > block.size()) return block;  // past the closing quote: at ',' or '}'
    if (name == drop) {
      st_key_.assign(block.substr(0, name_start));
      if (i < block.size() && block[i] == ',') {
        st_key_.append(block.substr(i + 1));
      } else {
        if (st_key_.back() == ',') st_key_.pop_back();
        st_key_.append(block.substr(i));
      }
      return st_key_ == "{}" ? std::string_view() : std::string_view(st_key_);
    }
    if (i < block.size() && block[i] == ',') i++;
  }
  return block;
}

bool TextParser::CheckExpfmtSample() {
  if (sample_.name != last_name_) {
    last_name_ = sample_.name;
    expfmt_sample_names_.insert(sample_.name);
    expfmt_float_label_ = {};
    auto type_of = [&](std::string_view n) {
      auto it = expfmt_meta_.find(n);
      return it == expfmt_meta_.end() ? Family::kUnknown : static_cast<Family>(it->second >> 4);
    };
    if (EndsWith(sample_.name, "_bucket") &&
        type_of(sample_.name.substr(0, sample_.name.size() - 7)) == Family::kHistogram) {
      expfmt_float_label_ = "le";
    } else if (type_of(sample_.name) == Family::kSummary) {
      expfmt_float_label_ = "quantile";
    }
  }
  if (expfmt_float_label_.empty()) return true;
  for (size_t i = 0; i < sample_.num_labels; i++) {
    const LabelRef& l = sample_.labels[i];
    double d;
    if (l.name == expfmt_float_label_ && !ParseExpositionFloat(l.value, &d)) {
      return Fail("expected float as value for " + Quote(l.name) + " label, got " + Quote(l.value));
    }
  }
  return true;
}

bool TextParser::ParseLine(std::string_view line) {
  labels_.clear();
  unescaped_used_ = 0;
  sample_.line = line_no_;
  sample_.start_timestamp_ms = 0;
  sample_.name = {};
  size_t pos = 0;
  if (Class(line[0]) & (kNameStart | kColon)) {
    while (pos < line.size() && (Class(line[pos]) & (kNameChar | kColon))) pos++;
    sample_.name = line.substr(0, pos);
    if (pos < line.size() && !IsSpace(line[pos]) && line[pos] != '{') {
      size_t p = 0;
      while (p < line.size() && !IsSpace(line[p]) && line[p] != '{') p++;
      return Fail("invalid metric name " + Quote(line.substr(0, p)));
    }
  } else if (line[0] != '{') {
    size_t p = 0;
    while (p < line.size() && !IsSpace(line[p]) && line[p] != '{') p++;
    return Fail("invalid metric name " + Quote(line.substr(0, p)));
  }
  size_t name_end = pos;
  SkipSpaces(line, &pos);
  sample_.labels_skipped = false;
  if (pos < line.size() && line[pos] == '{') {
    size_t end;
    if (opts_.known_series && !sample_.name.empty() && LabelBlockEnd(line, pos, &end) &&
        opts_.known_series(line.substr(0, end))) {
      pos = end;
      sample_.labels_skipped = true;
    } else if (!ParseLabels(line, &pos)) {
      return false;
    }
    name_end = pos;
  }
  if (sample_.name.empty()) return Fail("missing metric name");
  sample_.series = line.substr(0, name_end);
  sample_.labels = labels_.data();
  sample_.num_labels = labels_.size();

  // Like prometheus/common's parser, no space is needed between '}' and the value.
  SkipSpaces(line, &pos);
  if (pos == line.size()) return Fail("missing value for metric " + Quote(sample_.name));
  std::string_view value = Token(line, &pos);
  if (!ParseExpositionFloat(value, &sample_.value)) {
    return Fail("invalid value " + Quote(value) + " for metric " + Quote(sample_.name));
  }
  SkipSpaces(line, &pos);
  sample_.has_timestamp = false;
  sample_.timestamp_ms = opts_.default_timestamp_ms;
  if (pos == line.size() || line[pos] == '#') return true;  // '#': an OpenMetrics exemplar
  std::string_view ts = Token(line, &pos);
  int64_t t = 0;
  // Go's strconv.ParseInt, as Prometheus uses, accepts a leading '+'.
  std::string_view digits = ts.size() > 1 && ts[0] == '+' && ts[1] != '-' ? ts.substr(1) : ts;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), t);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return Fail("invalid timestamp " + Quote(ts) + " for metric " + Quote(sample_.name));
  }
  sample_.timestamp_ms = t;
  sample_.has_timestamp = true;
  SkipSpaces(line, &pos);
  if (pos < line.size() && line[pos] != '#') {
    return Fail("unexpected " + Quote(Token(line, &pos)) + " after timestamp of metric " + Quote(sample_.name));
  }
  return true;
}

// Scans the quoted label value at line[*pos] == '"': checks escapes (\\, \"
// and \n only) and UTF-8, and unescapes into unescaped_ when needed. On
// success *pos is past the closing quote, *value the raw text between the
// quotes and *slot the unescaped_ index (or -1 when nothing was escaped).
bool TextParser::ScanLabelValue(std::string_view line, size_t* pos, std::string_view name, std::string_view* value,
                                ptrdiff_t* slot) {
  size_t p = *pos + 1;
  size_t vstart = p;
  bool escaped = false;
  unsigned char high = 0;
  while (p < line.size() && line[p] != '"') {
    high |= static_cast<unsigned char>(line[p]);
    if (line[p] == '\\') {
      escaped = true;
      p++;
    }
    p++;
  }
  if (p >= line.size()) return Fail("unterminated label value");
  *value = line.substr(vstart, p - vstart);
  *pos = p + 1;
  if ((high & 0x80) && !ValidUtf8(*value)) return Fail("invalid UTF-8 in value of label " + Quote(name));
  *slot = -1;
  if (!escaped) return true;
  if (unescaped_used_ == unescaped_.size()) unescaped_.emplace_back();
  std::string& buf = unescaped_[unescaped_used_];
  buf.clear();
  for (size_t i = 0; i < value->size(); i++) {
    char c = (*value)[i];
    if (c != '\\') {
      buf += c;
      continue;
    }
    char e = (*value)[++i];
    if (e == '\\' || e == '"') {
      buf += e;
    } else if (e == 'n') {
      buf += '\n';
    } else if (om_ || opts_.expfmt_rules) {
      return Fail("invalid escape sequence " + Quote(std::string("\\") + e) + " in value of label " + Quote(name));
    } else {
      buf += '\\';  // Prometheus keeps an unknown escape as written
      buf += e;
    }
  }
  *slot = static_cast<ptrdiff_t>(unescaped_used_++);
  return true;
}

bool TextParser::ParseLabels(std::string_view line, size_t* pos) {
  ++*pos;  // '{'
  // Unescaped values live in unescaped_[k]; their views are fixed up at the
  // end because the strings may still grow while the line is parsed.
  pending_.clear();
  while (true) {
    SkipSpaces(line, pos);
    if (*pos == line.size()) return Fail("unterminated label set");
    if (line[*pos] == '}') {
      ++*pos;
      break;
    }
    size_t start = *pos;
    while (*pos < line.size()) {
      char c = line[*pos];
      if (IsSpace(c) || c == '=' || c == ',' || c == '}' || c == '"') break;
      ++*pos;
    }
    std::string_view name = line.substr(start, *pos - start);
    if (!IsLabelName(name)) return Fail("invalid label name " + Quote(name));
    SkipSpaces(line, pos);
    if (*pos == line.size() || line[*pos] != '=') {
      return Fail("expected \"=\" after label name " + Quote(name));
    }
    ++*pos;
    SkipSpaces(line, pos);
    if (*pos == line.size() || line[*pos] != '"') {
      return Fail("expected quoted value for label " + Quote(name));
    }
    std::string_view value;
    ptrdiff_t slot;
    if (!ScanLabelValue(line, pos, name, &value, &slot)) return false;
    if (slot >= 0) pending_.emplace_back(labels_.size(), static_cast<size_t>(slot));
    if (name == "__name__") {
      if (!sample_.name.empty()) return Fail("duplicate label name \"__name__\"");
      if (slot >= 0) return Fail("invalid metric name " + Quote(unescaped_[static_cast<size_t>(slot)]));
      if (value.empty()) return Fail("empty metric name");
      sample_.name = value;
    } else {
      if (!NewLabelName(name)) return false;
      labels_.push_back({name, value});
    }
    SkipSpaces(line, pos);
    if (*pos == line.size()) return Fail("unterminated label set");
    if (line[*pos] == ',') {
      ++*pos;
      continue;
    }
    if (line[*pos] == '}') {
      ++*pos;
      break;
    }
    return Fail("expected \",\" or \"}\" after value of label " + Quote(name));
  }
  if (!CheckManyLabelNames()) return false;
  for (auto [label, slot] : pending_) labels_[label].value = unescaped_[slot];
  return true;
}

// OpenMetrics: {name="value",...} with nothing else between the tokens, no
// trailing comma. Sample labels go to labels_; exemplar labels are only
// checked, and *runes gets the code points of their names and values.
bool TextParser::ParseLabelsOpenMetrics(std::string_view line, size_t* pos, bool exemplar, size_t* runes) {
  ++*pos;  // '{'
  pending_.clear();
  if (exemplar) exemplar_names_.clear();
  if (*pos < line.size() && line[*pos] == '}') {
    ++*pos;
    return true;
  }
  while (true) {
    size_t start = *pos;
    while (*pos < line.size() && Class(line[*pos]) & kNameChar) ++*pos;
    std::string_view name = line.substr(start, *pos - start);
    if (*pos == line.size()) return Fail("unterminated label set");
    if (name.empty() && line[*pos] == '}') return Fail("unexpected \"}\" after \",\": no trailing comma in OpenMetrics");
    if (!IsLabelName(name) || line[*pos] != '=') {
      if (IsLabelName(name)) return Fail("expected \"=\" after label name " + Quote(name));
      size_t end = *pos;
      while (end < line.size() && line[end] != '=' && line[end] != ',' && line[end] != '}') end++;
      return Fail("invalid label name " + Quote(line.substr(start, end - start)));
    }
    ++*pos;
    if (*pos == line.size() || line[*pos] != '"') return Fail("expected quoted value for label " + Quote(name));
    std::string_view value;
    ptrdiff_t slot;
    if (!ScanLabelValue(line, pos, name, &value, &slot)) return false;
    if (exemplar) {
      // Exemplar labels are bounded by 128 runes, so a linear check stays cheap.
      for (std::string_view n : exemplar_names_) {
        if (n == name) return Fail("duplicate label name " + Quote(name) + " in exemplar");
      }
      exemplar_names_.push_back(name);
      *runes += Runes(name) + Runes(slot >= 0 ? std::string_view(unescaped_[static_cast<size_t>(slot)]) : value);
    } else {
      if (name == "__name__") return Fail("duplicate label name \"__name__\"");
      if (!NewLabelName(name)) return false;
      if (slot >= 0) pending_.emplace_back(labels_.size(), static_cast<size_t>(slot));
      labels_.push_back({name, value});
    }
    if (*pos == line.size()) return Fail("unterminated label set");
    if (line[*pos] == ',') {
      ++*pos;
      continue;
    }
    if (line[*pos] == '}') {
      ++*pos;
      break;
    }
    return Fail("expected \",\" or \"}\" after value of label " + Quote(name));
  }
  if (!exemplar) {
    if (!CheckManyLabelNames()) return false;
    for (auto [label, slot] : pending_) labels_[label].value = unescaped_[slot];
  }
  return true;
}

// Label sets are small: the first kLinearNames names are compared with each
// other as they come; a longer (hostile) set is checked once, sorted, at its
// end, so a line of n labels costs O(n log n), not O(n^2).
bool TextParser::NewLabelName(std::string_view name) {
  if (labels_.size() >= kLinearNames) return true;
  for (const LabelRef& l : labels_) {
    if (l.name == name) return Fail("duplicate label name " + Quote(name) + " for metric " + Quote(sample_.name));
  }
  return true;
}

bool TextParser::CheckManyLabelNames() {
  if (labels_.size() <= kLinearNames) return true;
  sorted_names_.clear();
  for (const LabelRef& l : labels_) sorted_names_.push_back(l.name);
  std::sort(sorted_names_.begin(), sorted_names_.end());
  auto dup = std::adjacent_find(sorted_names_.begin(), sorted_names_.end());
  if (dup == sorted_names_.end()) return true;
  return Fail("duplicate label name " + Quote(*dup) + " for metric " + Quote(sample_.name));
}

// Float seconds to ms as Prometheus: int64(ts * 1000), truncating.
static bool SecondsToMs(std::string_view s, int64_t* ms) {
  double ts;
  if (!ParseExpositionFloat(s, &ts) || !std::isfinite(ts)) return false;
  double v = ts * 1000;
  if (!(v > -9.2e18 && v < 9.2e18)) return false;
  *ms = static_cast<int64_t>(v);
  return true;
}

bool TextParser::ParseLineOpenMetrics(std::string_view line) {
  labels_.clear();
  unescaped_used_ = 0;
  sample_.line = line_no_;
  sample_.start_timestamp_ms = 0;
  sample_.labels_skipped = false;
  size_t pos = NameLength(line);
  if (pos == 0 || (pos < line.size() && line[pos] != ' ' && line[pos] != '{')) {
    size_t p = 0;
    while (p < line.size() && line[p] != ' ' && line[p] != '{') p++;
    if (p == 0) return Fail("missing metric name");
    return Fail("invalid metric name " + Quote(line.substr(0, p)));
  }
  sample_.name = line.substr(0, pos);
  if (pos < line.size() && line[pos] == '{') {
    size_t end;
    if (opts_.known_series && LabelBlockEnd(line, pos, &end) && opts_.known_series(line.substr(0, end))) {
      pos = end;
      sample_.labels_skipped = true;
    } else if (!ParseLabelsOpenMetrics(line, &pos, false, nullptr)) {
      return false;
    }
  }
  sample_.series = line.substr(0, pos);
  sample_.labels = labels_.data();
  sample_.num_labels = labels_.size();

  if (pos == line.size()) return Fail("missing value for metric " + Quote(sample_.name));
  if (line[pos] != ' ') {
    return Fail("expected a space after the labels of metric " + Quote(sample_.name) + ", got " +
                Quote(line.substr(pos, 1)));
  }
  auto token = [&]() {
    size_t start = ++pos;  // past the single space
    while (pos < line.size() && line[pos] != ' ') pos++;
    return line.substr(start, pos - start);
  };
  std::string_view value = token();
  if (value.empty()) return Fail("expected a single space before the value of metric " + Quote(sample_.name));
  if (!ParseExpositionFloat(value, &sample_.value)) {
    return Fail("invalid value " + Quote(value) + " for metric " + Quote(sample_.name));
  }
  sample_.has_timestamp = false;
  sample_.timestamp_ms = opts_.default_timestamp_ms;
  if (pos == line.size()) return true;
  if (line.compare(pos, 3, " # ") == 0) return ParseExemplar(line, pos + 3);
  std::string_view ts = token();
  if (ts.empty()) return Fail("unexpected space after the value of metric " + Quote(sample_.name));
  if (!SecondsToMs(ts, &sample_.timestamp_ms)) {
    return Fail("invalid timestamp " + Quote(ts) + " for metric " + Quote(sample_.name));
  }
  sample_.has_timestamp = true;
  if (pos == line.size()) return true;
  if (line.compare(pos, 3, " # ") == 0) return ParseExemplar(line, pos + 3);
  return Fail("unexpected " + Quote(line.substr(pos)) + " after timestamp of metric " + Quote(sample_.name));
}

// " # {labels} value [timestamp]" after a sample, at line[pos]: checked and
// skipped, as Prometheus 2.42 without exemplar storage.
bool TextParser::ParseExemplar(std::string_view line, size_t pos) {
  std::string_view name = sample_.name;
  if (!EndsWith(name, "_total") && !EndsWith(name, "_bucket")) {
    return Fail("metric name " + Quote(name) + " does not support exemplars");
  }
  if (pos == line.size() || line[pos] != '{') return Fail("expected \"{\" to start the exemplar of " + Quote(name));
  // Label sets over 128 runes are kept out of exemplar storage by Prometheus,
  // not refused with the scrape; exemplars are skipped here, so no check.
  size_t runes = 0;
  if (!ParseLabelsOpenMetrics(line, &pos, true, &runes)) return false;
  auto token = [&]() {
    size_t start = ++pos;
    while (pos < line.size() && line[pos] != ' ') pos++;
    return line.substr(start, pos - start);
  };
  if (pos == line.size() || line[pos] != ' ') return Fail("expected a space and a value after the exemplar labels of " + Quote(name));
  std::string_view value = token();
  double v;
  if (!ParseExpositionFloat(value, &v)) return Fail("invalid exemplar value " + Quote(value) + " for " + Quote(name));
  if (pos == line.size()) return true;
  std::string_view ts = token();
  int64_t ms;
  if (!SecondsToMs(ts, &ms)) return Fail("invalid exemplar timestamp " + Quote(ts) + " for " + Quote(name));
  if (pos != line.size()) {
    return Fail("unexpected " + Quote(line.substr(pos)) + " after exemplar timestamp of " + Quote(name));
  }
  return true;
}

Status ParseText(std::string_view body, int64_t default_ts_ms, const SampleFn& fn) {
  TextParser p(body, ParseOptions{.default_timestamp_ms = default_ts_ms});
  while (p.Next()) RETURN_IF_ERROR(fn(p.sample()));
  return p.status();
}

}  // namespace trainwatch::ingest
