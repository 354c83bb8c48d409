#pragma once
// Base64 (RFC 4648, standard alphabet), for binary values carried in JSON:
// the images of rich run values and the importers that produce them.

#include <optional>
#include <string>
#include <string_view>

namespace trainwatch {

// With padding.
std::string Base64Encode(std::string_view bytes);

// Accepts input with or without padding; nullopt for a character outside
// the alphabet, padding anywhere but the end, or a length no encoding has.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace trainwatch
