#pragma once
// Go's strconv string literals, shared by the parsers that read Go-syntax
// strings: PromQL (promql/parser) and Go text/template (template/).

#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch {

// Go's strconv.Unquote of a "...", '...' or `...` literal: Go's escapes
// (\a \b \f \n \r \t \v \\ \' \" \xNN \NNN \uNNNN \UNNNNNNNN), \' only
// in '...' and \" only in "..."; '...' may hold any text, as PromQL's
// single-quoted strings. Anything else is InvalidArgument "invalid syntax".
Result<std::string> GoUnquote(std::string_view quoted);

}  // namespace trainwatch
