#include "base/strconv.h"

#include <cctype>
#include <cstdint>

namespace trainwatch {

Result<std::string> GoUnquote(std::string_view q) {
  if (q.size() < 2 || q.front() != q.back()) return Status::InvalidArgument("invalid syntax");
  char quote = q.front();
  std::string_view body = q.substr(1, q.size() - 2);
  if (quote == '`') return std::string(body);
  std::string out;
  out.reserve(body.size());
  auto append_utf8 = [&out](uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  };
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == quote) return Status::InvalidArgument("invalid syntax");
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i >= body.size()) return Status::InvalidArgument("invalid syntax");
    char e = body[i];
    auto hex = [&](size_t n) -> Result<uint32_t> {
      if (i + n >= body.size() + 0 && i + n > body.size() - 1 + 1) return Status::InvalidArgument("invalid syntax");
      uint32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        if (i + k >= body.size()) return Status::InvalidArgument("invalid syntax");
        char h = body[i + k];
        int d = std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) return Status::InvalidArgument("invalid syntax");
        v = v * 16 + static_cast<uint32_t>(d);
      }
      i += n;
      return v;
    };
    switch (e) {
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case '\\': out += '\\'; break;
      case '\'': case '"':
        if (e != quote) return Status::InvalidArgument("invalid syntax");
        out += e;
        break;
      case 'x': {
        ASSIGN_OR_RETURN(uint32_t v, hex(2));
        out += static_cast<char>(v);
        break;
      }
      case 'u': {
        ASSIGN_OR_RETURN(uint32_t v, hex(4));
        append_utf8(v);
        break;
      }
      case 'U': {
        ASSIGN_OR_RETURN(uint32_t v, hex(8));
        if (v > 0x10FFFF) return Status::InvalidArgument("invalid syntax");
        append_utf8(v);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          if (i + 2 >= body.size()) return Status::InvalidArgument("invalid syntax");
          int v = 0;
          for (int k = 0; k < 3; ++k) {
            char o = body[i + k];
            if (o < '0' || o > '7') return Status::InvalidArgument("invalid syntax");
            v = v * 8 + (o - '0');
          }
          if (v > 255) return Status::InvalidArgument("invalid syntax");
          out += static_cast<char>(v);
          i += 2;
          break;
        }
        return Status::InvalidArgument("invalid syntax");
    }
  }
  return out;
}

std::string GoQueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else if (c == ' ') {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace trainwatch
