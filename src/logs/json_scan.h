#pragma once
// Internal: a strict one-pass JSON (RFC 8259) scanner for the ingest paths.
// It validates a value in place and hands back its text, without building a
// tree: strings are checked for escapes, surrogate pairs and well-formed
// UTF-8 (RFC 3629), numbers for the grammar and for overflow to infinity
// (what nlohmann::json rejected too), containers iteratively, so depth costs
// no stack. Not thread-safe per object; objects are cheap.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace trainwatch::logs {

enum class JsonType : uint8_t { kString, kNumber, kObject, kArray, kTrue, kFalse, kNull };

// One scanned value. `text` points into the scanned input.
struct JsonValue {
  JsonType type = JsonType::kNull;
  std::string_view text;  // as sent: a string with its quotes, a number, a container with inner whitespace
  bool escaped = false;   // string: holds a backslash escape (its content is not `text` minus the quotes)
  bool spaced = false;    // object/array: holds whitespace outside strings (its compact form is shorter)
  bool integer = false;   // number: no fraction and no exponent
};

class JsonScanner {
 public:
  explicit JsonScanner(std::string_view s) : s_(s) {}

  void SkipSpace() {
    while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
  }
  // Skips a UTF-8 byte order mark at the current position (nlohmann::json did).
  void SkipBom() {
    if (s_.substr(pos_, 3) == "\xEF\xBB\xBF") pos_ += 3;
  }
  bool AtEnd() const { return pos_ >= s_.size(); }
  bool Peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  bool Consume(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  size_t pos() const { return pos_; }

  // Scans one value at the current position (no leading whitespace); false
  // when the text there is not a valid JSON value.
  bool Value(JsonValue* v);
  // Scans a string at the current position (REQUIRES: Peek('"')).
  bool String(JsonValue* v);

  static bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

 private:
  bool Number(JsonValue* v);
  bool Container(JsonValue* v);
  bool Literal(std::string_view word, JsonType type, JsonValue* v);
  bool Escape();
  bool Utf8();

  std::string_view s_;
  size_t pos_ = 0;
};

// The content of a string scanned by JsonScanner (`quoted` with its quotes),
// escapes decoded, appended to *out as UTF-8.
void AppendJsonStringContent(std::string* out, std::string_view quoted);
// The value's text without whitespace outside strings (its text when !spaced).
void AppendCompactJson(std::string* out, const JsonValue& v);
// `s` as a quoted JSON string, escaped as nlohmann::json's dump() does
// (\" \\ \b \f \n \r \t, other control bytes \u00xx). REQUIRES: valid UTF-8.
void AppendJsonQuoted(std::string* out, std::string_view s);

}  // namespace trainwatch::logs
