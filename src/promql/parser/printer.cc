// AST helpers and the canonical printer (Prometheus's Expr.String()).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "model/labels.h"
#include "promql/parser/ast.h"
#include "promql/parser/functions.h"
#include "promql/parser/lex.h"
#include "base/utf8.h"
#include "promql/parser/parse.h"

namespace trainwatch::promql::parser {

const char* TypeName(Type t) {
  switch (t) {
    case Type::kNone: return "none";
    case Type::kScalar: return "scalar";
    case Type::kVector: return "instant vector";
    case Type::kMatrix: return "range vector";
    case Type::kString: return "string";
  }
  return "?";
}

const char* BinOpString(BinOp op) {
  switch (op) {
    case BinOp::kAdd: return "+";
    case BinOp::kSub: return "-";
    case BinOp::kMul: return "*";
    case BinOp::kDiv: return "/";
    case BinOp::kMod: return "%";
    case BinOp::kPow: return "^";
    case BinOp::kAtan2: return "atan2";
    case BinOp::kEql: return "==";
    case BinOp::kNeq: return "!=";
    case BinOp::kGtr: return ">";
    case BinOp::kLss: return "<";
    case BinOp::kGte: return ">=";
    case BinOp::kLte: return "<=";
    case BinOp::kAnd: return "and";
    case BinOp::kOr: return "or";
    case BinOp::kUnless: return "unless";
    case BinOp::kTrimUpper: return "</";
    case BinOp::kTrimLower: return ">/";
  }
  return "?";
}

bool IsComparison(BinOp op) {
  return op == BinOp::kEql || op == BinOp::kNeq || op == BinOp::kGtr || op == BinOp::kLss || op == BinOp::kGte ||
         op == BinOp::kLte;
}
bool IsSetOp(BinOp op) { return op == BinOp::kAnd || op == BinOp::kOr || op == BinOp::kUnless; }

const char* AggOpString(AggOp op) {
  switch (op) {
    case AggOp::kSum: return "sum";
    case AggOp::kAvg: return "avg";
    case AggOp::kCount: return "count";
    case AggOp::kMin: return "min";
    case AggOp::kMax: return "max";
    case AggOp::kGroup: return "group";
    case AggOp::kStddev: return "stddev";
    case AggOp::kStdvar: return "stdvar";
    case AggOp::kTopk: return "topk";
    case AggOp::kBottomk: return "bottomk";
    case AggOp::kCountValues: return "count_values";
    case AggOp::kQuantile: return "quantile";
    case AggOp::kLimitk: return "limitk";
    case AggOp::kLimitRatio: return "limit_ratio";
  }
  return "?";
}

Type Expr::type() const {
  switch (kind) {
    case NodeKind::kNumber: return Type::kScalar;
    case NodeKind::kString: return Type::kString;
    case NodeKind::kVectorSelector: return Type::kVector;
    case NodeKind::kMatrixSelector: return Type::kMatrix;
    case NodeKind::kSubquery: return Type::kMatrix;
    case NodeKind::kCall: return func->return_type;
    case NodeKind::kAggregate: return Type::kVector;
    case NodeKind::kBinary: {
      Type l = args[0]->type(), r = args[1]->type();
      return (l == Type::kScalar && r == Type::kScalar) ? Type::kScalar : Type::kVector;
    }
    case NodeKind::kUnary:
    case NodeKind::kParen:
    case NodeKind::kStepInvariant:
      return args[0]->type();
  }
  return Type::kNone;
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      // A well-formed sequence is kept; a stray byte is escaped, as Go's
      // strconv.Quote does.
      size_t n = Utf8SequenceLength(s, i);
      if (n == 0) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\x%02x", c);
        out += buf;
      } else {
        out.append(s, i, n);
        i += n - 1;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {

std::string FormatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Inf" : "-Inf";
  // Go's fmt.Sprint(float64): the shortest round-trip digits, in exponent
  // form only when the exponent is < -4 or >= 21 (80 prints as "80").
  char buf[64];
  int prec = 1;
  for (; prec < 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
  int exp = std::atoi(std::strchr(buf, 'e') + 1);
  if (exp < -4 || exp >= 21) return buf;
  std::snprintf(buf, sizeof(buf), "%.*f", std::max(0, prec - 1 - exp), v);
  return buf;
}

// Label names in by/without, on/ignoring and group_*: quoted where they are
// not identifiers (Prometheus 3's UTF-8 names), as in selectors.
std::string JoinLabels(const std::vector<std::string>& ls) {
  std::string out;
  for (size_t i = 0; i < ls.size(); ++i) {
    if (i > 0) out += ", ";
    out += model::IsValidLabelName(ls[i]) ? ls[i] : Quote(ls[i]);
  }
  return out;
}

std::string AtOffset(const Expr& e) {
  std::string out;
  switch (e.at) {
    case AtKind::kNone: break;
    case AtKind::kStart: out += " @ start()"; break;
    case AtKind::kEnd: out += " @ end()"; break;
    case AtKind::kValue: {
      char buf[64];
      std::snprintf(buf, sizeof(buf), " @ %.3f", static_cast<double>(e.at_ms) / 1000.0);
      out += buf;
      break;
    }
  }
  if (e.offset_expr != nullptr) {
    const Expr& d = *e.offset_expr;
    bool primary = d.kind == NodeKind::kNumber || d.kind == NodeKind::kCall || d.kind == NodeKind::kParen ||
                   (d.kind == NodeKind::kUnary && d.args[0]->kind != NodeKind::kBinary);
    out += " offset " + (primary ? d.String() : "(" + d.String() + ")");
  } else if (e.offset_ms != 0) {
    out += " offset " + FormatDuration(e.offset_ms);
  }
  if (e.range_mod == RangeMod::kAnchored) out += " anchored";
  if (e.range_mod == RangeMod::kSmoothed) out += " smoothed";
  return out;
}

// Whether `name` reads back as a metric name outside braces: one identifier
// token, not a keyword, aggregator, inf or nan. A name taken from
// {__name__="..."} may be anything (UTF-8, "sum", "a.b"); found by
// fuzz/promql_fuzz.cc, which checks that printed queries parse again.
bool IsBareName(std::string_view name) {
  std::string err;
  std::vector<Token> toks = Lex(name, &err);
  return err.empty() && toks.size() == 2 && toks[0].text.size() == name.size() &&
         (toks[0].kind == Tok::kIdentifier || toks[0].kind == Tok::kMetricIdentifier);
}

std::string SelectorString(const Expr& e) {
  const bool bare = !e.name.empty() && IsBareName(e.name);
  std::string out = bare ? e.name : "";
  std::string ms;
  bool skipped_name = false;
  for (const auto& m : e.matchers) {
    if (!skipped_name && bare && m.name() == "__name__" && m.type() == model::MatchType::kEqual &&
        m.value() == e.name) {
      skipped_name = true;
      continue;
    }
    if (!ms.empty()) ms += ", ";
    const char* op = m.type() == model::MatchType::kEqual      ? "="
                     : m.type() == model::MatchType::kNotEqual ? "!="
                     : m.type() == model::MatchType::kRegex    ? "=~"
                                                               : "!~";
    // A label name outside [a-zA-Z_][a-zA-Z0-9_]* is quoted, as Prometheus 3
    // prints it (found by the fuzz campaign: {"\r"="1"} printed bare).
    ms += (model::IsValidLabelName(m.name()) ? m.name() : Quote(m.name())) + op + Quote(m.value());
  }
  if (!ms.empty() || out.empty()) out += "{" + ms + "}";
  return out;
}

}  // namespace

std::string Expr::String() const {
  switch (kind) {
    case NodeKind::kNumber: return FormatNumber(number);
    case NodeKind::kString: return Quote(str);
    case NodeKind::kVectorSelector: return SelectorString(*this) + AtOffset(*this);
    case NodeKind::kMatrixSelector:
      return SelectorString(*args[0]) + "[" + (range_expr ? range_expr->String() : FormatDuration(range_ms)) + "]" +
             AtOffset(*args[0]);
    case NodeKind::kSubquery:
      return args[0]->String() + "[" + (range_expr ? range_expr->String() : FormatDuration(range_ms)) + ":" +
             (step_expr ? step_expr->String() : step_ms ? FormatDuration(step_ms) : "") + "]" + AtOffset(*this);
    case NodeKind::kCall: {
      std::string out = std::string(func->name) + "(";
      for (size_t i = 0; i < args.size(); ++i) {
        if (i > 0) out += ", ";
        out += args[i]->String();
      }
      return out + ")";
    }
    case NodeKind::kAggregate: {
      std::string out = AggOpString(agg);
      if (has_grouping) out += std::string(without ? " without (" : " by (") + JoinLabels(grouping) + ") ";
      out += "(";
      if (args.size() > 1) out += args[1]->String() + ", ";
      return out + args[0]->String() + ")";
    }
    case NodeKind::kBinary: {
      std::string out = args[0]->String() + " " + BinOpString(op);
      if (return_bool) out += " bool";
      if (matching.explicit_matching) {
        out += std::string(matching.on ? " on (" : " ignoring (") + JoinLabels(matching.matching_labels) + ")";
      }
      if (matching.card == Cardinality::kManyToOne) out += " group_left (" + JoinLabels(matching.include) + ")";
      if (matching.card == Cardinality::kOneToMany) out += " group_right (" + JoinLabels(matching.include) + ")";
      if (matching.fill_left && matching.fill_right &&
          (matching.fill_left_value == matching.fill_right_value ||
           (std::isnan(matching.fill_left_value) && std::isnan(matching.fill_right_value)))) {
        out += " fill(" + FormatNumber(matching.fill_left_value) + ")";
      } else {
        if (matching.fill_left) out += " fill_left(" + FormatNumber(matching.fill_left_value) + ")";
        if (matching.fill_right) out += " fill_right(" + FormatNumber(matching.fill_right_value) + ")";
      }
      return out + " " + args[1]->String();
    }
    case NodeKind::kUnary: return "-" + args[0]->String();
    case NodeKind::kParen: return "(" + args[0]->String() + ")";
    case NodeKind::kStepInvariant: return args[0]->String();
  }
  return "";
}

std::unique_ptr<Expr> Expr::Clone() const {
  auto e = std::make_unique<Expr>(kind);
  e->pos_start = pos_start;
  e->pos_end = pos_end;
  e->number = number;
  e->str = str;
  e->name = name;
  e->matchers = matchers;
  e->offset_ms = offset_ms;
  e->at = at;
  e->at_ms = at_ms;
  e->range_mod = range_mod;
  e->range_ms = range_ms;
  e->step_ms = step_ms;
  e->func = func;
  e->agg = agg;
  e->grouping = grouping;
  e->without = without;
  e->has_grouping = has_grouping;
  e->op = op;
  e->return_bool = return_bool;
  e->matching = matching;
  e->negative = negative;
  if (range_expr) e->range_expr = range_expr->Clone();
  if (step_expr) e->step_expr = step_expr->Clone();
  if (offset_expr) e->offset_expr = offset_expr->Clone();
  for (const auto& a : args) e->args.push_back(a->Clone());
  return e;
}

}  // namespace trainwatch::promql::parser
