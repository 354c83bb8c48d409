#pragma once
// Signatures of the PromQL functions, used by the parser for type checking.

#include <string_view>
#include <vector>

#include "promql/parser/ast.h"

namespace trainwatch::promql::parser {

struct FunctionDef {
  std::string_view name;
  std::vector<Type> arg_types;
  // 0: exactly arg_types; n>0: the last n are optional; -1: the last repeats
  // (at least len-1 args), as Prometheus's Function.Variadic.
  int variadic = 0;
  Type return_type = Type::kVector;
  bool experimental = false;
};

// nullptr when unknown.
const FunctionDef* LookupFunction(std::string_view name);

}  // namespace trainwatch::promql::parser
