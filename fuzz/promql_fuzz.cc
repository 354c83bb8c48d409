// PromQL parser (promql/parser/parse.h) and printer (Expr::String()):
//   - a query that parses prints to canonical text that parses again and
//     prints the same (parse -> print -> parse -> print is a fixed point),
//     with the same type;
//   - a query that fails has errors, each with a message and a position
//     inside the query (or at its end);
//   - the series-selector parser of the HTTP API never crashes either.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "promql/parser/parse.h"

namespace {
constexpr const char* kTarget = "promql_fuzz";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace parser = trainwatch::promql::parser;
  std::string_view q(reinterpret_cast<const char*>(data), size);
  std::vector<parser::ParseError> errors;
  parser::ExprPtr e = parser::ParseExprWithErrors(q, &errors);
  if (e == nullptr || !errors.empty()) {
    FUZZ_CHECK(!errors.empty(), "no expression and no error");
    for (const parser::ParseError& err : errors) {
      FUZZ_CHECK(!err.msg.empty(), "parse error without a message");
      FUZZ_CHECK(err.pos >= 0 && static_cast<size_t>(err.pos) <= size,
                 "parse error position " + std::to_string(err.pos) + " outside the query: " + err.msg);
      (void)parser::FormatParseError(q, err);
    }
  } else {
    std::string printed = e->String();
    auto again = parser::ParseExpr(printed);
    FUZZ_CHECK(again.ok(), "printed query does not parse: " + printed + " -> " + again.error().ToString());
    std::string reprinted = (*again)->String();
    FUZZ_CHECK(reprinted == printed, "printing is not a fixed point: " + printed + " -> " + reprinted);
    FUZZ_CHECK((*again)->type() == e->type(), "printed query changes type: " + printed);
    auto clone = e->Clone();
    FUZZ_CHECK(clone->String() == printed, "Clone() prints differently: " + printed);
  }
  auto sel = parser::ParseMetricSelector(q);
  if (!sel.ok()) FUZZ_CHECK_ERROR(sel.error());
  return 0;
}
