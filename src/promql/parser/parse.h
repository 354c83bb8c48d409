#pragma once
// PromQL parser: query text to a type-checked AST.

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/matcher.h"
#include "promql/parser/ast.h"

namespace trainwatch::promql::parser {

struct ParseError {
  int pos = 0;  // byte offset
  std::string msg;
};

// Formats like Prometheus: "1:7: parse error: unclosed left parenthesis".
std::string FormatParseError(std::string_view input, const ParseError& err);

// Parses and type-checks one expression. InvalidArgument on errors; the
// message lists every error found, first one first.
Result<ExprPtr> ParseExpr(std::string_view input);
// Same, also returning the structured errors (empty on success).
ExprPtr ParseExprWithErrors(std::string_view input, std::vector<ParseError>* errors);

// Value in seconds of a duration expression (range_expr, step_expr,
// offset_expr) given the query's step and range in ms.
double EvalDurationExpr(const Expr& e, int64_t step_ms, int64_t range_ms);

// Parses a series selector `name{a="b"}` into matchers (for the HTTP API).
Result<model::Matchers> ParseMetricSelector(std::string_view input);

// A string literal as PromQL prints it: double-quoted, with escapes
// (invalid UTF-8 bytes as \xNN).
std::string Quote(const std::string& s);
// Parses a duration like 1h30m into milliseconds.
Result<int64_t> ParseDuration(std::string_view s);
// Formats milliseconds like Prometheus (1h30m, 5m, 1s500ms).
std::string FormatDuration(int64_t ms);

}  // namespace trainwatch::promql::parser
