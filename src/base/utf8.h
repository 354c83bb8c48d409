#pragma once
// UTF-8 validation (RFC 3629), shared by every parser and store that must
// keep invalid bytes out of what it serializes later (JSON, the TSDB index).

#include <string_view>

namespace trainwatch {

// True when `s` is well-formed UTF-8: no overlong forms, no surrogates,
// nothing past U+10FFFF.
bool IsValidUtf8(std::string_view s);

}  // namespace trainwatch
