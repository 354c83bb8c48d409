#pragma once
// UTF-8 validation (RFC 3629), shared by every parser and store that must
// keep invalid bytes out of what it serializes later (JSON, the TSDB index).

#include <cstddef>
#include <string_view>

namespace trainwatch {

// True when `s` is well-formed UTF-8: no overlong forms, no surrogates,
// nothing past U+10FFFF.
bool IsValidUtf8(std::string_view s);

// The length (1-4) of the well-formed UTF-8 sequence starting at s[i], or 0
// when the bytes there are not one. REQUIRES: i < s.size().
size_t Utf8SequenceLength(std::string_view s, size_t i);

}  // namespace trainwatch
