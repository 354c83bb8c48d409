#pragma once
// Go's string conversions: strconv's string literals, shared by the parsers
// that read Go-syntax strings (PromQL, Go text/template), and net/url's
// query escaping (scrape URLs, rule generator URLs, templates).

#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch {

// Go's strconv.Unquote of a "...", '...' or `...` literal: Go's escapes
// (\a \b \f \n \r \t \v \\ \' \" \xNN \NNN \uNNNN \UNNNNNNNN), \' only
// in '...' and \" only in "..."; '...' may hold any text, as PromQL's
// single-quoted strings. Anything else is InvalidArgument "invalid syntax".
Result<std::string> GoUnquote(std::string_view quoted);

// Go's url.QueryEscape: ASCII letters, digits and -_.~ stay, a space is
// '+', every other byte "%XX" (upper-case hex).
std::string GoQueryEscape(std::string_view s);

}  // namespace trainwatch
