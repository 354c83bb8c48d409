#pragma once
// PromQL abstract syntax tree. One node struct with a kind tag keeps the
// evaluator's dispatch a plain switch; only the fields of the node's kind are
// meaningful.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/matcher.h"

namespace trainwatch::promql {

enum class ValueType;  // engine.h

namespace parser {

enum class Type { kNone, kScalar, kVector, kMatrix, kString };
const char* TypeName(Type t);  // "scalar", "instant vector", "range vector", "string"

enum class NodeKind {
  kNumber,
  kString,
  kVectorSelector,
  kMatrixSelector,  // child: the vector selector
  kSubquery,        // child: any instant-vector expression
  kCall,
  kAggregate,
  kBinary,
  kUnary,
  kParen,
  kStepInvariant,  // wrapper added by the engine, never by the parser
};

enum class BinOp {
  kAdd, kSub, kMul, kDiv, kMod, kPow, kAtan2,
  kEql, kNeq, kGtr, kLss, kGte, kLte,
  kAnd, kOr, kUnless,
  // Native-histogram trims: `h </ x` drops observations above x, `h >/ x`
  // those below it.
  kTrimUpper, kTrimLower,
};
const char* BinOpString(BinOp op);
bool IsComparison(BinOp op);
bool IsSetOp(BinOp op);

enum class AggOp {
  kSum, kAvg, kCount, kMin, kMax, kGroup, kStddev, kStdvar, kTopk, kBottomk, kCountValues, kQuantile,
  kLimitk, kLimitRatio,
};
const char* AggOpString(AggOp op);

enum class Cardinality { kOneToOne, kManyToOne, kOneToMany, kManyToMany };

struct VectorMatching {
  Cardinality card = Cardinality::kOneToOne;
  std::vector<std::string> matching_labels;
  bool on = false;  // true: on(...), false: ignoring(...)
  std::vector<std::string> include;  // group_left/right(...) extra labels
  bool explicit_matching = false;    // on/ignoring was written
  // fill()/fill_left()/fill_right(): value used for a missing sample of the
  // left (many) or right (one) side instead of dropping the match.
  bool fill_left = false;
  bool fill_right = false;
  double fill_left_value = 0;
  double fill_right_value = 0;
};

enum class AtKind { kNone, kValue, kStart, kEnd };

// Extended range selectors (Prometheus 3.x, experimental): `x[5m] anchored`
// and `x[5m] smoothed` / `x smoothed`.
enum class RangeMod { kNone, kAnchored, kSmoothed };

struct FunctionDef;

// Deepest expression tree the parser accepts; keeps every recursive pass
// (evaluation, printing, destruction) far from the stack limit.
inline constexpr int kMaxExprDepth = 256;

struct Expr {
  NodeKind kind;
  int pos_start = 0;  // byte offsets into the query
  int pos_end = 0;

  // kNumber
  double number = 0;
  // kString
  std::string str;

  // kVectorSelector
  std::string name;  // metric name if given outside braces, else ""
  model::Matchers matchers;
  // kVectorSelector / kSubquery
  int64_t offset_ms = 0;
  AtKind at = AtKind::kNone;
  int64_t at_ms = 0;  // kValue
  RangeMod range_mod = RangeMod::kNone;  // kVectorSelector (also of a matrix selector)
  // kVectorSelector: only the count and sum of its histograms are needed
  // (under histogram_count/_sum/_avg, not under a subquery or a function
  // that reads buckets); set by the engine before evaluation.
  bool skip_histogram_buckets = false;
  // kMatrixSelector / kSubquery
  int64_t range_ms = 0;
  int64_t step_ms = 0;  // kSubquery, 0 = default
  // Duration expressions that depend on the query (step(), range()); the
  // engine evaluates them into range_ms / step_ms / offset_ms before running.
  // Constant duration expressions are folded by the parser and leave these null.
  std::unique_ptr<Expr> range_expr;   // kMatrixSelector / kSubquery
  std::unique_ptr<Expr> step_expr;    // kSubquery
  std::unique_ptr<Expr> offset_expr;  // kVectorSelector / kSubquery

  // kCall
  const FunctionDef* func = nullptr;
  // kAggregate
  AggOp agg = AggOp::kSum;
  std::vector<std::string> grouping;
  bool without = false;
  bool has_grouping = false;  // by()/without() was written
  // kBinary
  BinOp op = BinOp::kAdd;
  bool return_bool = false;
  VectorMatching matching;
  // kUnary: negative when true, else '+'
  bool negative = false;

  // children: kMatrixSelector/kSubquery/kUnary/kParen/kStepInvariant: [0];
  // kBinary: [0]=lhs, [1]=rhs; kCall: args; kAggregate: [0]=expr, [1]=param (optional)
  std::vector<std::unique_ptr<Expr>> args;
  int depth = 1;  // height of this subtree, set by the parser (bounded by kMaxExprDepth)

  explicit Expr(NodeKind k) : kind(k) {}
  Type type() const;
  std::string String() const;  // canonical PromQL text (printer.cc)
  std::unique_ptr<Expr> Clone() const;
};

using ExprPtr = std::unique_ptr<Expr>;

}  // namespace parser
}  // namespace trainwatch::promql
