#include "base/utf8.h"

#include <cstddef>
#include <cstdint>

namespace trainwatch {

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    uint8_t c = *p;
    if (c < 0x80) {
      p++;
      continue;
    }
    size_t n;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      n = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (static_cast<size_t>(end - p) < n) return false;
    for (size_t i = 1; i < n; i++) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid.
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) return false;
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    p += n;
  }
  return true;
}

}  // namespace trainwatch
