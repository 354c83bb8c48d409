#pragma once
// JSON text helpers shared by every module that writes JSON by hand (the
// HTTP API, the Alertmanager sender) or parses JSON from outside: no JSON
// library, no allocation beyond the output string.

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch {

// The deepest nesting of arrays and objects accepted in JSON from outside
// (request bodies, state files). Real payloads stay far below; a deeper text
// would make recursive copies, comparisons and dumps overflow the stack.
inline constexpr size_t kMaxJsonDepth = 128;

// Scans `text` once, skipping strings and their escapes, and fails with
// InvalidArgument ("json: nesting deeper than 128 levels at byte offset 128")
// at the first '[' or '{' that opens level max_depth + 1. Checks nothing
// else: run it before handing the text to a JSON parser.
Status CheckJsonDepth(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Appends `s` as a JSON string literal with quotes: " and \ escaped,
// \n \r \t as such, other control characters as \u00XX; other bytes
// (UTF-8 included) as they are.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace trainwatch
