#include "ingest/text_parser.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>

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

inline bool EqualsIgnoreCase(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
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

}  // namespace

TextFormat FormatFromContentType(std::string_view content_type) {
  // Media type only: parameters (version, charset) follow a ';'.
  std::string_view media = content_type.substr(0, content_type.find(';'));
  while (!media.empty() && IsSpace(media.front())) media.remove_prefix(1);
  while (!media.empty() && IsSpace(media.back())) media.remove_suffix(1);
  return EqualsIgnoreCase(media, "application/openmetrics-text") ? TextFormat::kOpenMetrics : TextFormat::kPrometheus;
}

bool ParseGoFloat(std::string_view s, double* out) {
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
  if (body.size() > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')) {
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

TextParser::TextParser(std::string_view body, ParseOptions opts) : body_(body), opts_(opts) {
  labels_.reserve(16);
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
    if (i == line.size() || line[i] == '#') continue;  // blank, comment, HELP, TYPE, EOF
    if (!ParseLine(line.substr(i))) return false;
    return true;
  }
  pos_ = body_.size();
  return false;
}

bool TextParser::ParseLine(std::string_view line) {
  labels_.clear();
  unescaped_used_ = 0;
  sample_.line = line_no_;
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
  if (!ParseGoFloat(value, &sample_.value)) {
    return Fail("invalid value " + Quote(value) + " for metric " + Quote(sample_.name));
  }
  SkipSpaces(line, &pos);
  sample_.has_timestamp = false;
  sample_.timestamp_ms = opts_.default_timestamp_ms;
  if (pos == line.size() || line[pos] == '#') return true;  // '#': an OpenMetrics exemplar
  std::string_view ts = Token(line, &pos);
  int64_t t = 0;
  auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), t);
  if (ec != std::errc() || end != ts.data() + ts.size()) {
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
    bool valid = !name.empty() && (Class(name[0]) & kNameStart);
    for (size_t i = 1; valid && i < name.size(); i++) valid = Class(name[i]) & kNameChar;
    if (!valid) return Fail("invalid label name " + Quote(name));
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
    bool escaped = false;
    {
      size_t p = *pos + 1;
      size_t vstart = p;
      while (p < line.size() && line[p] != '"') {
        if (line[p] == '\\') {
          escaped = true;
          p++;
        }
        p++;
      }
      if (p >= line.size()) return Fail("unterminated label value");
      value = line.substr(vstart, p - vstart);
      *pos = p + 1;
    }
    if (escaped) {
      if (unescaped_used_ == unescaped_.size()) unescaped_.emplace_back();
      std::string& buf = unescaped_[unescaped_used_];
      buf.clear();
      for (size_t i = 0; i < value.size(); i++) {
        char c = value[i];
        if (c != '\\') {
          buf += c;
          continue;
        }
        char e = value[++i];
        if (e == '\\' || e == '"') {
          buf += e;
        } else if (e == 'n') {
          buf += '\n';
        } else {
          return Fail("invalid escape sequence " + Quote(std::string("\\") + e) + " in value of label " +
                      Quote(name));
        }
      }
      pending_.emplace_back(labels_.size(), unescaped_used_++);
    }
    if (name == "__name__") {
      if (!sample_.name.empty()) return Fail("duplicate label name \"__name__\"");
      if (escaped) return Fail("invalid metric name " + Quote(unescaped_[unescaped_used_ - 1]));
      if (value.empty()) return Fail("empty metric name");
      sample_.name = value;
    } else {
      for (const LabelRef& l : labels_) {
        if (l.name == name) return Fail("duplicate label name " + Quote(name) + " for metric " + Quote(sample_.name));
      }
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
  for (auto [label, slot] : pending_) labels_[label].value = unescaped_[slot];
  return true;
}

Status ParseText(std::string_view body, int64_t default_ts_ms, const SampleFn& fn) {
  TextParser p(body, ParseOptions{.default_timestamp_ms = default_ts_ms});
  while (p.Next()) RETURN_IF_ERROR(fn(p.sample()));
  return p.status();
}

}  // namespace trainwatch::ingest
