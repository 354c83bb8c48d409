#pragma once
// JSON text helpers shared by every module that writes JSON by hand (the
// HTTP API, the Alertmanager sender): no JSON library, no allocation beyond
// the output string.

#include <string>
#include <string_view>

namespace trainwatch {

// Appends `s` as a JSON string literal with quotes: " and \ escaped,
// \n \r \t as such, other control characters as \u00XX; other bytes
// (UTF-8 included) as they are.
void AppendJsonString(std::string* out, std::string_view s);

}  // namespace trainwatch
