#include "base/json.h"

#include "base/utf8.h"

namespace trainwatch {

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the pending run of plain bytes
  for (size_t i = 0; i < s.size(); i++) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // Bytes that are not UTF-8 (a label value quoted in an error, say)
      // become U+FFFD, so the document stays valid JSON.
      size_t n = Utf8SequenceLength(s, i);
      if (n > 0) {
        i += n - 1;
        continue;
      }
      out->append(s.data() + run, i - run);
      run = i + 1;
      out->append("\\ufffd");
      continue;
    }
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

Status CheckJsonDepth(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); i++) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') i++;  // the escaped byte can't end the string
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > max_depth) {
          return Status::InvalidArgument("json: nesting deeper than " + std::to_string(max_depth) +
                                         " levels at byte offset " + std::to_string(i));
        }
        break;
      case ']':
      case '}':
        // Unbalanced closers are the parser's error to report.
        if (depth > 0) depth--;
        break;
      default: break;
    }
  }
  return Status::OK();
}

}  // namespace trainwatch
