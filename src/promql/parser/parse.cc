#include "promql/parser/parse.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "base/strconv.h"
#include "base/units.h"
#include "promql/parser/functions.h"
#include "model/labels.h"
#include "promql/parser/lex.h"

namespace trainwatch::promql::parser {

namespace {

// Unwinds the recursive descent on the first error (internal only).
struct ParseAbort {};

int Precedence(Tok t) {
  switch (t) {
    case Tok::kLor: return 1;
    case Tok::kLand: case Tok::kLunless: return 2;
    case Tok::kEql: case Tok::kNeq: case Tok::kLte: case Tok::kLss: case Tok::kGte: case Tok::kGtr:
    case Tok::kTrimUpper: case Tok::kTrimLower: return 3;
    case Tok::kAdd: case Tok::kSub: return 4;
    case Tok::kMul: case Tok::kDiv: case Tok::kMod: case Tok::kAtan2: return 5;
    case Tok::kPow: return 6;
    default: return -1;
  }
}

BinOp ToBinOp(Tok t) {
  switch (t) {
    case Tok::kLor: return BinOp::kOr;
    case Tok::kLand: return BinOp::kAnd;
    case Tok::kLunless: return BinOp::kUnless;
    case Tok::kEql: return BinOp::kEql;
    case Tok::kNeq: return BinOp::kNeq;
    case Tok::kLte: return BinOp::kLte;
    case Tok::kLss: return BinOp::kLss;
    case Tok::kGte: return BinOp::kGte;
    case Tok::kGtr: return BinOp::kGtr;
    case Tok::kTrimUpper: return BinOp::kTrimUpper;
    case Tok::kTrimLower: return BinOp::kTrimLower;
    case Tok::kAdd: return BinOp::kAdd;
    case Tok::kSub: return BinOp::kSub;
    case Tok::kMul: return BinOp::kMul;
    case Tok::kDiv: return BinOp::kDiv;
    case Tok::kMod: return BinOp::kMod;
    case Tok::kAtan2: return BinOp::kAtan2;
    default: return BinOp::kPow;
  }
}

bool IsIdentLike(const Token& t) {
  if (t.text.empty()) return false;
  char c = t.text[0];
  if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '_')) return false;
  switch (t.kind) {
    case Tok::kIdentifier: case Tok::kMetricIdentifier: case Tok::kLand: case Tok::kLor: case Tok::kLunless:
    case Tok::kAtan2: case Tok::kBy: case Tok::kWithout: case Tok::kOn: case Tok::kIgnoring: case Tok::kGroupLeft:
    case Tok::kGroupRight: case Tok::kBool: case Tok::kOffset: case Tok::kStart: case Tok::kEnd: case Tok::kAggregator:
    case Tok::kNumber:  // inf / nan
      return true;
    default:
      return false;
  }
}

std::string TokString(const Token& t) {
  switch (t.kind) {
    case Tok::kEOF: return "end of input";
    case Tok::kIdentifier: return "identifier \"" + std::string(t.text) + "\"";
    case Tok::kMetricIdentifier: return "metric identifier \"" + std::string(t.text) + "\"";
    case Tok::kNumber: return "number \"" + std::string(t.text) + "\"";
    case Tok::kDuration: return "duration \"" + std::string(t.text) + "\"";
    case Tok::kString: return "string " + std::string(t.text);
    case Tok::kRightParen: return "right parenthesis \")\"";
    case Tok::kLeftParen: return "left parenthesis \"(\"";
    case Tok::kRightBrace: return "\"}\"";
    case Tok::kLeftBrace: return "\"{\"";
    case Tok::kRightBracket: return "right bracket \"]\"";
    case Tok::kLeftBracket: return "left bracket \"[\"";
    case Tok::kComma: return "\",\"";
    case Tok::kAggregator: return "<aggr-op:" + std::string(t.text) + ">";
    case Tok::kBy: case Tok::kWithout: case Tok::kOn: case Tok::kIgnoring: case Tok::kGroupLeft:
    case Tok::kGroupRight: case Tok::kBool: case Tok::kOffset: {
      std::string l(t.text);
      for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return "<" + l + ">";
    }
    default: {
      int p = Precedence(t.kind);
      if (p >= 0) return "<op:" + std::string(t.text) + ">";
      return "\"" + std::string(t.text) + "\"";
    }
  }
}

AggOp ToAggOp(std::string_view s, bool* ok) {
  static const std::pair<const char*, AggOp> kOps[] = {
      {"sum", AggOp::kSum},       {"avg", AggOp::kAvg},         {"count", AggOp::kCount},
      {"min", AggOp::kMin},       {"max", AggOp::kMax},         {"group", AggOp::kGroup},
      {"stddev", AggOp::kStddev}, {"stdvar", AggOp::kStdvar},   {"topk", AggOp::kTopk},
      {"bottomk", AggOp::kBottomk}, {"count_values", AggOp::kCountValues}, {"quantile", AggOp::kQuantile},
      {"limitk", AggOp::kLimitk}, {"limit_ratio", AggOp::kLimitRatio},
  };
  std::string l(s);
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& [n, op] : kOps) {
    if (l == n) {
      *ok = true;
      return op;
    }
  }
  *ok = false;
  return AggOp::kSum;
}

bool AggHasParam(AggOp op) {
  return op == AggOp::kTopk || op == AggOp::kBottomk || op == AggOp::kCountValues || op == AggOp::kQuantile ||
         op == AggOp::kLimitk || op == AggOp::kLimitRatio;
}

class Parser {
 public:
  explicit Parser(std::string_view in) : in_(in) {}

  ExprPtr Run(std::vector<ParseError>* errors) {
    std::string lex_err;
    toks_ = Lex(in_, &lex_err);
    if (!toks_.empty() && toks_.back().kind == Tok::kError) {
      errors->push_back({toks_.back().pos, lex_err});
      return nullptr;
    }
    try {
      if (Peek().kind == Tok::kEOF) Fail(0, "no expression found in input");
      ExprPtr e = ParseBinary(0);
      if (Peek().kind != Tok::kEOF) {
        const Token& t = Peek();
        // Lexer-level errors in Prometheus: positioned after the paren.
        if (t.kind == Tok::kRightParen) Fail(t.pos + 1, "unexpected right parenthesis ')'");
        if (t.kind == Tok::kRightBrace) Fail(t.pos, "unexpected character: '}'");
        Fail(t.pos, "unexpected " + TokString(t));
      }
      return e;
    } catch (const ParseAbort&) {
      errors->push_back(err_);
      return nullptr;
    }
  }

  [[noreturn]] void Fail(int pos, std::string msg) {
    err_ = {pos, std::move(msg)};
    throw ParseAbort{};
  }

 private:
  // Bounds the parser's own recursion (e.g. "((((((...").
  struct DepthGuard {
    DepthGuard(Parser* p, int pos) : p_(p) {
      if (++p_->depth_ > kMaxExprDepth) {
        p_->Fail(pos, "expression nesting depth exceeds the maximum of " + std::to_string(kMaxExprDepth));
      }
    }
    ~DepthGuard() { --p_->depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;
    Parser* p_;
  };

  // Sets e's tree height from its (already finished) children and rejects
  // trees deeper than kMaxExprDepth (long chains like 1+1+1+... too).
  void Finish(Expr* e) {
    int d = 0;
    for (const auto& a : e->args) d = std::max(d, a->depth);
    for (const auto* x : {e->range_expr.get(), e->step_expr.get(), e->offset_expr.get()}) {
      if (x != nullptr) d = std::max(d, x->depth);
    }
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) {
      Fail(e->pos_start, "expression nesting depth exceeds the maximum of " + std::to_string(kMaxExprDepth));
    }
  }

  const Token& Peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& Next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  const Token& Expect(Tok k, const char* context) {
    const Token& t = Peek();
    if (t.kind != k) {
      if (t.kind == Tok::kEOF && k == Tok::kRightParen) Fail(t.pos, "unclosed left parenthesis");
      if (t.kind == Tok::kEOF && k == Tok::kRightBracket) Fail(t.pos, "unclosed left bracket");
      Fail(t.pos, std::string("unexpected ") + TokString(t) + " in " + context + ", expected " + TokDesc(k));
    }
    return Next();
  }

  ExprPtr ParseBinary(int min_prec) {
    ExprPtr lhs = ParseUnary();
    for (;;) {
      const Token& t = Peek();
      int prec = Precedence(t.kind);
      if (prec < 0 || prec < min_prec) break;
      Next();
      auto bin = std::make_unique<Expr>(NodeKind::kBinary);
      bin->op = ToBinOp(t.kind);
      ParseBinModifiers(bin.get());
      // ^ is right-associative. The right operand nests one level deeper (a
      // chain x^x^x^... recurses once per operator), so it is bounded like
      // ParseUnary; Finish alone would check only after the whole chain had
      // recursed (a stack overflow for long chains; found by clang ASan).
      DepthGuard guard(this, t.pos);
      ExprPtr rhs = ParseBinary(t.kind == Tok::kPow ? prec : prec + 1);
      bin->pos_start = lhs->pos_start;
      bin->pos_end = rhs->pos_end;
      bin->args.push_back(std::move(lhs));
      bin->args.push_back(std::move(rhs));
      CheckBinary(bin.get(), t.pos);
      Finish(bin.get());
      lhs = std::move(bin);
    }
    return lhs;
  }

  std::vector<std::string> ParseLabelList(const char* context) {
    std::vector<std::string> out;
    Expect(Tok::kLeftParen, context);
    while (Peek().kind != Tok::kRightParen) {
      const Token& t = Peek();
      if (t.kind == Tok::kString) {
        Next();
        out.push_back(UnquoteOrFail(t));
      } else if (IsIdentLike(t) && t.kind != Tok::kMetricIdentifier) {
        Next();
        out.emplace_back(t.text);
      } else {
        if (t.kind == Tok::kEOF) Fail(t.pos, "unclosed left parenthesis");
        Fail(t.pos, "unexpected " + TokString(t) + " in grouping opts, expected label");
      }
      if (Peek().kind == Tok::kComma) {
        Next();
      } else if (Peek().kind != Tok::kRightParen) {
        if (Peek().kind == Tok::kEOF) Fail(Peek().pos, "unclosed left parenthesis");
        Fail(Peek().pos, "unexpected " + TokString(Peek()) + " in grouping opts, expected \")\" or \",\"");
      }
    }
    Next();
    return out;
  }

  void ParseBinModifiers(Expr* bin) {
    if (Peek().kind == Tok::kBool) {
      Next();
      bin->return_bool = true;
    }
    if (Peek().kind == Tok::kOn || Peek().kind == Tok::kIgnoring) {
      bin->matching.on = Next().kind == Tok::kOn;
      bin->matching.explicit_matching = true;
      bin->matching.matching_labels = ParseLabelList("grouping opts");
      if (Peek().kind == Tok::kGroupLeft || Peek().kind == Tok::kGroupRight) {
        bin->matching.card = Next().kind == Tok::kGroupLeft ? Cardinality::kManyToOne : Cardinality::kOneToMany;
        if (Peek().kind == Tok::kLeftParen) bin->matching.include = ParseLabelList("grouping opts");
      }
    } else if (Peek().kind == Tok::kGroupLeft || Peek().kind == Tok::kGroupRight) {
      Fail(Peek().pos, "unexpected " + TokString(Peek()));
    }
    // fill(v), fill_left(v), fill_right(v): an identifier followed by "(" here
    // is a modifier; without "(" it is a metric named fill.
    for (;;) {
      const Token& f = Peek();
      if (f.kind != Tok::kIdentifier || Peek(1).kind != Tok::kLeftParen) break;
      bool left = f.text == "fill" || f.text == "fill_left";
      bool right = f.text == "fill" || f.text == "fill_right";
      if (!left && !right) break;
      if ((left && bin->matching.fill_left) || (right && bin->matching.fill_right)) {
        Fail(f.pos, "duplicate " + std::string(f.text) + " modifier");
      }
      Next();
      Next();
      bool neg = false;
      if (Peek().kind == Tok::kSub || Peek().kind == Tok::kAdd) neg = Next().kind == Tok::kSub;
      const Token& n = Peek();
      if (n.kind != Tok::kNumber) {
        Fail(n.pos, "unexpected " + TokString(n) + " in " + std::string(f.text) + " modifier, expected number");
      }
      Next();
      double v = ParseNumber(n);
      if (neg) v = -v;
      Expect(Tok::kRightParen, "fill modifier");
      if (left) {
        bin->matching.fill_left = true;
        bin->matching.fill_left_value = v;
      }
      if (right) {
        bin->matching.fill_right = true;
        bin->matching.fill_right_value = v;
      }
    }
  }

  void CheckBinary(Expr* bin, int op_pos) {
    Type lt = bin->args[0]->type(), rt = bin->args[1]->type();
    auto ok_type = [](Type t) { return t == Type::kScalar || t == Type::kVector; };
    if (!ok_type(lt) || !ok_type(rt)) {
      Fail(bin->pos_start, "binary expression must contain only scalar and instant vector types");
    }
    if (bin->return_bool && !IsComparison(bin->op)) {
      Fail(op_pos, "bool modifier can only be used on comparison operators");
    }
    if (IsComparison(bin->op) && !bin->return_bool && lt == Type::kScalar && rt == Type::kScalar) {
      Fail(op_pos, "comparisons between scalars must use BOOL modifier");
    }
    if ((bin->matching.fill_left || bin->matching.fill_right) &&
        (IsSetOp(bin->op) || lt != Type::kVector || rt != Type::kVector)) {
      Fail(op_pos, IsSetOp(bin->op) ? std::string("fill modifiers are not allowed for set operator \"") +
                                          BinOpString(bin->op) + "\""
                                    : std::string("fill modifiers are only allowed between instant vectors"));
    }
    if (IsSetOp(bin->op)) {
      if (lt == Type::kScalar || rt == Type::kScalar) {
        Fail(bin->pos_start, std::string("set operator \"") + BinOpString(bin->op) +
                                 "\" not allowed in binary scalar expression");
      }
      if (bin->matching.card == Cardinality::kOneToMany || bin->matching.card == Cardinality::kManyToOne) {
        Fail(op_pos, std::string("no grouping allowed for \"") + BinOpString(bin->op) + "\" operation");
      }
      bin->matching.card = Cardinality::kManyToMany;
    }
    if ((lt != Type::kVector || rt != Type::kVector) && bin->matching.explicit_matching) {
      if (!bin->matching.matching_labels.empty() || bin->matching.on || true) {
        Fail(bin->pos_start, "vector matching only allowed between instant vectors");
      }
    }
    if (bin->matching.on) {
      for (const auto& l : bin->matching.include) {
        for (const auto& m : bin->matching.matching_labels) {
          if (l == m) Fail(op_pos, "label \"" + l + "\" must not occur in ON and GROUP clause at once");
        }
      }
    }
  }

  ExprPtr ParseUnary() {
    DepthGuard guard(this, Peek().pos);
    const Token& t = Peek();
    if (t.kind == Tok::kSub || t.kind == Tok::kAdd) {
      Next();
      ExprPtr operand = ParseBinary(Precedence(Tok::kPow));
      Type ot = operand->type();
      if (ot != Type::kScalar && ot != Type::kVector) {
        Fail(t.pos, std::string("unary expression only allowed on expressions of type scalar or instant vector, got \"") +
                        TypeName(ot) + "\"");
      }
      if (operand->kind == NodeKind::kNumber) {
        if (t.kind == Tok::kSub) operand->number = -operand->number;
        operand->pos_start = t.pos;
        return operand;
      }
      if (t.kind == Tok::kAdd) {
        operand->pos_start = t.pos;
        return operand;
      }
      auto u = std::make_unique<Expr>(NodeKind::kUnary);
      u->negative = true;
      u->pos_start = t.pos;
      u->pos_end = operand->pos_end;
      u->args.push_back(std::move(operand));
      Finish(u.get());
      return u;
    }
    return ParsePostfix(ParsePrimary());
  }

  int64_t ParseDurationTok(const Token& t, bool allow_number) {
    if (t.kind == Tok::kDuration) {
      auto d = ParseDuration(t.text);
      if (!d.ok()) Fail(t.pos, d.error().message());
      return *d;
    }
    if (allow_number && t.kind == Tok::kNumber) {
      return SecondsToMs(ParseNumber(t), t.pos);
    }
    Fail(t.pos, "unexpected " + TokString(t) + ", expected duration");
  }

  ExprPtr ParsePostfix(ExprPtr e) {
    for (;;) {
      const Token& t = Peek();
      if (t.kind == Tok::kLeftBracket) {
        Next();
        const Token& d = Peek();
        if (d.kind == Tok::kEOF) Fail(d.pos, "unclosed left bracket");
        ExprPtr range_expr;
        int64_t range = ParseDurationArg(&range_expr);
        if (Peek().kind == Tok::kColon) {
          Next();
          int64_t step = 0;
          ExprPtr step_expr;
          if (Peek().kind != Tok::kRightBracket) step = ParseDurationArg(&step_expr);
          if (Peek().kind == Tok::kColon) Fail(Peek().pos, "unexpected colon ':'");
          const Token& close = Expect(Tok::kRightBracket, "subquery selector");
          if (e->type() != Type::kVector) {
            Fail(e->pos_start, std::string("subquery is only allowed on instant vector, got ") + TypeName(e->type()) +
                                   " instead");
          }
          if (range <= 0 && range_expr == nullptr) Fail(d.pos, "duration must be greater than 0");
          auto sq = std::make_unique<Expr>(NodeKind::kSubquery);
          sq->range_ms = range;
          sq->step_ms = step;
          sq->range_expr = std::move(range_expr);
          sq->step_expr = std::move(step_expr);
          sq->pos_start = e->pos_start;
          sq->pos_end = close.pos + 1;
          sq->args.push_back(std::move(e));
          Finish(sq.get());
          e = std::move(sq);
        } else {
          const Token& close = Expect(Tok::kRightBracket, "matrix selector");
          if (e->kind != NodeKind::kVectorSelector) {
            Fail(t.pos, "ranges only allowed for vector selectors");
          }
          if (e->offset_ms != 0 || e->offset_expr != nullptr || e->at != AtKind::kNone ||
              e->range_mod != RangeMod::kNone) {
            Fail(t.pos, "no offset or @ modifiers allowed before range");
          }
          if (range <= 0 && range_expr == nullptr) Fail(d.pos, "duration must be greater than 0");
          auto ms = std::make_unique<Expr>(NodeKind::kMatrixSelector);
          ms->range_ms = range;
          ms->range_expr = std::move(range_expr);
          ms->pos_start = e->pos_start;
          ms->pos_end = close.pos + 1;
          ms->args.push_back(std::move(e));
          Finish(ms.get());
          e = std::move(ms);
        }
        continue;
      }
      if (t.kind == Tok::kIdentifier && (t.text == "anchored" || t.text == "smoothed") &&
          (e->kind == NodeKind::kVectorSelector || e->kind == NodeKind::kMatrixSelector)) {
        Next();
        Expr* target = e->kind == NodeKind::kMatrixSelector ? e->args[0].get() : e.get();
        if (target->range_mod != RangeMod::kNone) Fail(t.pos, "anchored or smoothed may not be set multiple times");
        target->range_mod = t.text == "anchored" ? RangeMod::kAnchored : RangeMod::kSmoothed;
        e->pos_end = t.pos + static_cast<int>(t.text.size());
        continue;
      }
      if (t.kind == Tok::kOffset) {
        Next();
        ExprPtr off_expr;
        int64_t off = ParseOffsetArg(&off_expr);
        Expr* target = ModTarget(e.get(), t.pos, "offset");
        if (target->offset_ms != 0 || target->offset_expr != nullptr || target_offset_set_(target)) {
          Fail(e->pos_start, "offset may not be set multiple times");
        }
        target->offset_ms = off;
        target->offset_expr = std::move(off_expr);
        Finish(target);
        if (target != e.get()) Finish(e.get());
        offset_set_.push_back(target);
        e->pos_end = toks_[pos_ > 0 ? pos_ - 1 : 0].pos + static_cast<int>(toks_[pos_ > 0 ? pos_ - 1 : 0].text.size());
        continue;
      }
      if (t.kind == Tok::kAt) {
        Next();
        Expr* target = ModTarget(e.get(), t.pos, "@");
        if (target->at != AtKind::kNone) Fail(e->pos_start, "@ <timestamp> may not be set multiple times");
        const Token& a = Peek();
        if (a.kind == Tok::kStart || a.kind == Tok::kEnd) {
          Next();
          Expect(Tok::kLeftParen, "@ modifier");
          const Token& close = Expect(Tok::kRightParen, "@ modifier");
          target->at = a.kind == Tok::kStart ? AtKind::kStart : AtKind::kEnd;
          e->pos_end = close.pos + 1;
        } else {
          bool neg = false;
          if (Peek().kind == Tok::kSub || Peek().kind == Tok::kAdd) neg = Next().kind == Tok::kSub;
          const Token& n = Next();
          if (n.kind != Tok::kNumber && n.kind != Tok::kDuration) {
            Fail(n.pos, "unexpected " + TokString(n) + " in @, expected timestamp");
          }
          double v = n.kind == Tok::kNumber ? ParseNumber(n) : static_cast<double>(ParseDurationTok(n, false)) / 1000;
          if (neg) v = -v;
          if (!std::isfinite(v) || std::fabs(v) > 9.2e15) Fail(n.pos, "timestamp out of bounds for @ modifier: " + std::string(n.text));
          target->at = AtKind::kValue;
          target->at_ms = static_cast<int64_t>(std::llround(v * 1000));
          e->pos_end = n.pos + static_cast<int>(n.text.size());
        }
        continue;
      }
      return e;
    }
  }

  // Duration expressions (Prometheus 3.x): number and duration literals (in
  // seconds), + - * / % ^, parentheses, unary signs, step(), range(),
  // min_of() and max_of(). Returns the value in ms when the expression is
  // constant (and leaves *expr null), else keeps the tree in *expr.
  int64_t ParseDurationArg(ExprPtr* expr) {
    const Token& t = Peek();
    if ((t.kind == Tok::kDuration || t.kind == Tok::kNumber) &&
        (Peek(1).kind == Tok::kRightBracket || Peek(1).kind == Tok::kColon)) {
      Next();
      return ParseDurationTok(t, true);
    }
    ExprPtr d = ParseDurExpr(0);
    return FoldDuration(std::move(d), t.pos, expr);
  }

  int64_t ParseOffsetArg(ExprPtr* expr) {
    const Token& t = Peek();
    bool neg = false;
    if (t.kind == Tok::kSub || t.kind == Tok::kAdd) {
      neg = t.kind == Tok::kSub;
      Next();
    }
    const Token& d = Peek();
    if ((d.kind == Tok::kDuration || d.kind == Tok::kNumber)) {
      Next();
      int64_t off = ParseDurationTok(d, true);
      return neg ? -off : off;
    }
    if (d.kind == Tok::kEOF) Fail(d.pos, "unexpected end of input in offset, expected duration");
    if (d.kind != Tok::kLeftParen && !IsDurCall(d)) {
      Fail(d.pos, "unexpected " + TokString(d) + " in offset, expected duration");
    }
    ExprPtr p = ParseDurPrimary();
    if (neg) {
      auto u = std::make_unique<Expr>(NodeKind::kUnary);
      u->negative = true;
      u->pos_start = t.pos;
      u->pos_end = p->pos_end;
      u->args.push_back(std::move(p));
      p = std::move(u);
    }
    return FoldDuration(std::move(p), t.pos, expr);
  }

  bool IsDurCall(const Token& t) const {
    if (t.kind != Tok::kIdentifier || Peek(1).kind != Tok::kLeftParen) return false;
    std::string l(t.text);
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return l == "step" || l == "range" || l == "min_of" || l == "max_of";
  }

  static bool DurDependsOnQuery(const Expr& e) {
    if (e.kind == NodeKind::kCall && (e.func->name == "step" || e.func->name == "range")) return true;
    for (const auto& a : e.args) {
      if (DurDependsOnQuery(*a)) return true;
    }
    return false;
  }

  int64_t FoldDuration(ExprPtr d, int pos, ExprPtr* expr) {
    if (DurDependsOnQuery(*d)) {
      *expr = std::move(d);
      return 0;
    }
    return SecondsToMs(EvalDurationExpr(*d, 0, 0), pos);
  }

  // A duration given in seconds (a number or a duration expression) as int64
  // milliseconds; beyond ±9.2e12 s (about 290,000 years) it is an error, not an
  // out-of-range conversion.
  int64_t SecondsToMs(double v, int pos) {
    if (!std::isfinite(v) || std::fabs(v) > 9.2e12) Fail(pos, "duration out of range");
    return static_cast<int64_t>(std::llround(v * 1000));
  }

  ExprPtr ParseDurExpr(int min_prec) {
    ExprPtr lhs = ParseDurUnary();
    for (;;) {
      const Token& t = Peek();
      if (t.kind != Tok::kAdd && t.kind != Tok::kSub && t.kind != Tok::kMul && t.kind != Tok::kDiv &&
          t.kind != Tok::kMod && t.kind != Tok::kPow) {
        break;
      }
      int prec = Precedence(t.kind);
      if (prec < min_prec) break;
      Next();
      DepthGuard guard(this, t.pos);  // as in ParseBinary
      ExprPtr rhs = ParseDurExpr(t.kind == Tok::kPow ? prec : prec + 1);
      auto bin = std::make_unique<Expr>(NodeKind::kBinary);
      bin->op = ToBinOp(t.kind);
      bin->pos_start = lhs->pos_start;
      bin->pos_end = rhs->pos_end;
      bin->args.push_back(std::move(lhs));
      bin->args.push_back(std::move(rhs));
      Finish(bin.get());
      lhs = std::move(bin);
    }
    return lhs;
  }

  ExprPtr ParseDurUnary() {
    DepthGuard guard(this, Peek().pos);
    const Token& t = Peek();
    if (t.kind == Tok::kSub || t.kind == Tok::kAdd) {
      Next();
      ExprPtr operand = ParseDurExpr(Precedence(Tok::kPow));
      if (t.kind == Tok::kAdd) return operand;
      auto u = std::make_unique<Expr>(NodeKind::kUnary);
      u->negative = true;
      u->pos_start = t.pos;
      u->pos_end = operand->pos_end;
      u->args.push_back(std::move(operand));
      Finish(u.get());
      return u;
    }
    return ParseDurPrimary();
  }

  ExprPtr ParseDurPrimary() {
    const Token& t = Peek();
    if (t.kind == Tok::kNumber || t.kind == Tok::kDuration) {
      Next();
      auto e = std::make_unique<Expr>(NodeKind::kNumber);
      e->number = t.kind == Tok::kNumber ? ParseNumber(t) : static_cast<double>(ParseDurationTok(t, false)) / 1000.0;
      e->pos_start = t.pos;
      e->pos_end = t.pos + static_cast<int>(t.text.size());
      return e;
    }
    if (t.kind == Tok::kLeftParen) {
      Next();
      ExprPtr inner = ParseDurExpr(0);
      const Token& close = Expect(Tok::kRightParen, "duration expression");
      auto e = std::make_unique<Expr>(NodeKind::kParen);
      e->pos_start = t.pos;
      e->pos_end = close.pos + 1;
      e->args.push_back(std::move(inner));
      Finish(e.get());
      return e;
    }
    if (IsDurCall(t)) {
      Next();
      std::string l(t.text);
      for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto e = std::make_unique<Expr>(NodeKind::kCall);
      e->func = LookupFunction(l);
      e->pos_start = t.pos;
      Expect(Tok::kLeftParen, "duration expression");
      while (Peek().kind != Tok::kRightParen) {
        e->args.push_back(ParseDurExpr(0));
        if (Peek().kind == Tok::kComma) {
          Next();
        } else if (Peek().kind != Tok::kRightParen) {
          if (Peek().kind == Tok::kEOF) Fail(Peek().pos, "unclosed left parenthesis");
          Fail(Peek().pos, "unexpected " + TokString(Peek()) + " in duration expression, expected \")\" or \",\"");
        }
      }
      e->pos_end = Next().pos + 1;
      size_t want = (l == "min_of" || l == "max_of") ? 2 : 0;
      if (e->args.size() != want) {
        Fail(e->pos_start, "expected " + std::to_string(want) + " argument(s) in call to \"" + l + "\", got " +
                               std::to_string(e->args.size()));
      }
      Finish(e.get());
      return e;
    }
    if (t.kind == Tok::kEOF) Fail(t.pos, "unexpected end of input in duration expression");
    Fail(t.pos, "unexpected " + TokString(t) + " in duration expression, expected duration");
  }

  bool target_offset_set_(Expr* t) const {
    for (Expr* x : offset_set_) {
      if (x == t) return true;
    }
    return false;
  }

  Expr* ModTarget(Expr* e, int pos, const char* what) {
    switch (e->kind) {
      case NodeKind::kVectorSelector:
      case NodeKind::kSubquery:
        return e;
      case NodeKind::kMatrixSelector:
        return e->args[0].get();
      default:
        Fail(pos, std::string(what) +
                      " modifier must be preceded by an instant vector selector or range vector selector or a subquery");
    }
  }

  double ParseNumber(const Token& t) {
    std::string s(t.text);
    std::string l = s;
    for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == "inf") return INFINITY;
    if (l == "nan") return NAN;
    if (l.size() > 2 && l[0] == '0' && l[1] == 'x') return static_cast<double>(std::strtoull(s.c_str() + 2, nullptr, 16));
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) Fail(t.pos, "bad number or duration syntax: \"" + s + "\"");
    return v;
  }

  std::string UnquoteOrFail(const Token& t) {
    auto r = GoUnquote(t.text);
    if (!r.ok()) Fail(t.pos, r.error().message());
    return *r;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Peek();
    switch (t.kind) {
      case Tok::kNumber: {
        Next();
        auto e = std::make_unique<Expr>(NodeKind::kNumber);
        e->number = ParseNumber(t);
        e->pos_start = t.pos;
        e->pos_end = t.pos + static_cast<int>(t.text.size());
        return e;
      }
      case Tok::kDuration: {
        Next();
        auto e = std::make_unique<Expr>(NodeKind::kNumber);
        e->number = static_cast<double>(ParseDurationTok(t, false)) / 1000.0;
        e->pos_start = t.pos;
        e->pos_end = t.pos + static_cast<int>(t.text.size());
        return e;
      }
      case Tok::kString: {
        Next();
        auto e = std::make_unique<Expr>(NodeKind::kString);
        e->str = UnquoteOrFail(t);
        e->pos_start = t.pos;
        e->pos_end = t.pos + static_cast<int>(t.text.size());
        return e;
      }
      case Tok::kLeftParen: {
        Next();
        if (Peek().kind == Tok::kRightParen) Fail(Peek().pos, "unexpected right parenthesis ')'");
        ExprPtr inner = ParseBinary(0);
        const Token& close = Expect(Tok::kRightParen, "paren expression");
        auto e = std::make_unique<Expr>(NodeKind::kParen);
        e->pos_start = t.pos;
        e->pos_end = close.pos + 1;
        e->args.push_back(std::move(inner));
        Finish(e.get());
        return e;
      }
      case Tok::kLeftBrace:
        return ParseSelector("", t.pos);
      case Tok::kAggregator: {
        const Token& n = Peek(1);
        if (n.kind == Tok::kLeftParen || n.kind == Tok::kBy || n.kind == Tok::kWithout) return ParseAggregate();
        break;
      }
      case Tok::kEOF:
        Fail(t.pos, "unexpected end of input");
      case Tok::kRightParen:
        Fail(t.pos, "unexpected right parenthesis ')'");
      default:
        break;
    }
    if (IsIdentLike(t)) {
      Next();
      if ((t.kind == Tok::kIdentifier || t.kind == Tok::kStart || t.kind == Tok::kEnd) &&
          Peek().kind == Tok::kLeftParen) {
        return ParseCall(t);
      }
      return ParseSelector(std::string(t.text), t.pos);
    }
    Fail(t.pos, "unexpected " + TokString(t));
  }

  ExprPtr ParseCall(const Token& name) {
    const FunctionDef* def = LookupFunction(name.text);
    if (def == nullptr) Fail(name.pos, "unknown function with name \"" + std::string(name.text) + "\"");
    Expect(Tok::kLeftParen, "function call");
    auto e = std::make_unique<Expr>(NodeKind::kCall);
    e->func = def;
    e->pos_start = name.pos;
    while (Peek().kind != Tok::kRightParen) {
      // info()'s second argument is a label selector whose matchers may all
      // match the empty string.
      bool label_selector = def->name == "info" && e->args.size() == 1;
      allow_empty_selector_ = label_selector;
      e->args.push_back(ParseBinary(0));
      allow_empty_selector_ = false;
      if (label_selector && e->args.back()->kind != NodeKind::kVectorSelector) {
        Fail(e->args.back()->pos_start, "expected label selector as the second argument of \"info\"");
      }
      if (Peek().kind == Tok::kComma) {
        Next();
        if (Peek().kind == Tok::kRightParen) Fail(Peek().pos, "unexpected right parenthesis ')' in function call args");
      } else if (Peek().kind != Tok::kRightParen) {
        if (Peek().kind == Tok::kEOF) Fail(Peek().pos, "unclosed left parenthesis");
        Fail(Peek().pos, "unexpected " + TokString(Peek()) + " in function call args, expected \")\" or \",\"");
      }
    }
    e->pos_end = Next().pos + 1;
    // Arity.
    int n = static_cast<int>(e->args.size());
    int want = static_cast<int>(def->arg_types.size());
    std::string fname(def->name);
    if (def->variadic == 0) {
      if (n != want) {
        Fail(e->pos_start, "expected " + std::to_string(want) + " argument(s) in call to \"" + fname + "\", got " +
                               std::to_string(n));
      }
    } else if (def->variadic > 0) {
      int min = want - def->variadic;
      if (n < min || n > want) {
        if (n > want) {
          Fail(e->pos_start, "expected at most " + std::to_string(want) + " argument(s) in call to \"" + fname +
                                 "\", got " + std::to_string(n));
        }
        Fail(e->pos_start, "expected at least " + std::to_string(min) + " argument(s) in call to \"" + fname +
                               "\", got " + std::to_string(n));
      }
    } else if (n < want - 1) {
      Fail(e->pos_start, "expected at least " + std::to_string(want - 1) + " argument(s) in call to \"" + fname +
                             "\", got " + std::to_string(n));
    }
    for (int i = 0; i < n; ++i) {
      Type wt = i < want ? def->arg_types[i] : def->arg_types.back();
      Type got = e->args[i]->type();
      if (got != wt) {
        Fail(e->args[i]->pos_start, std::string("expected type ") + TypeName(wt) + " in call to function \"" + fname +
                                        "\", got " + TypeName(got));
      }
    }
    Finish(e.get());
    return e;
  }

  ExprPtr ParseAggregate() {
    const Token& op_tok = Next();
    bool ok;
    auto e = std::make_unique<Expr>(NodeKind::kAggregate);
    e->agg = ToAggOp(op_tok.text, &ok);
    e->pos_start = op_tok.pos;
    auto parse_grouping = [&] {
      e->without = Next().kind == Tok::kWithout;
      e->has_grouping = true;
      e->grouping = ParseLabelList("grouping opts");
    };
    if (Peek().kind == Tok::kBy || Peek().kind == Tok::kWithout) parse_grouping();
    Expect(Tok::kLeftParen, "aggregation");
    std::vector<ExprPtr> args;
    while (Peek().kind != Tok::kRightParen) {
      args.push_back(ParseBinary(0));
      if (Peek().kind == Tok::kComma) {
        Next();
      } else if (Peek().kind != Tok::kRightParen) {
        if (Peek().kind == Tok::kEOF) Fail(Peek().pos, "unclosed left parenthesis");
        Fail(Peek().pos, "unexpected " + TokString(Peek()) + " in aggregation, expected \")\" or \",\"");
      }
    }
    e->pos_end = Next().pos + 1;
    if (Peek().kind == Tok::kBy || Peek().kind == Tok::kWithout) {
      if (e->has_grouping) Fail(Peek().pos, "unexpected " + TokString(Peek()));
      parse_grouping();
      e->pos_end = toks_[pos_ - 1].pos + 1;
    }
    size_t want = AggHasParam(e->agg) ? 2 : 1;
    if (args.size() != want) {
      Fail(e->pos_start, "wrong number of arguments for aggregate expression provided, expected " +
                             std::to_string(want) + ", got " + std::to_string(args.size()));
    }
    ExprPtr body = std::move(args.back());
    if (body->type() != Type::kVector) {
      Fail(body->pos_start, std::string("expected type instant vector in aggregation expression, got ") +
                                TypeName(body->type()));
    }
    e->args.push_back(std::move(body));
    if (want == 2) {
      Type pt = args[0]->type();
      Type need = e->agg == AggOp::kCountValues ? Type::kString : Type::kScalar;
      if (pt != need) {
        Fail(args[0]->pos_start, std::string("expected type ") + TypeName(need) +
                                     " in aggregation parameter, got " + TypeName(pt));
      }
      e->args.push_back(std::move(args[0]));
    }
    Finish(e.get());
    return e;
  }

  ExprPtr ParseSelector(std::string name, int start) {
    auto e = std::make_unique<Expr>(NodeKind::kVectorSelector);
    e->pos_start = start;
    e->pos_end = start + static_cast<int>(name.size());
    e->name = name;
    model::Matchers ms;
    bool name_in_braces = false;
    if (Peek().kind == Tok::kLeftBrace) {
      Next();
      while (Peek().kind != Tok::kRightBrace) {
        const Token& lt = Next();
        std::string lname;
        if (lt.kind == Tok::kString) {
          lname = UnquoteOrFail(lt);
          if (Peek().kind == Tok::kComma || Peek().kind == Tok::kRightBrace) {
            // {"metric.name"}
            if (!name.empty() || name_in_braces) Fail(lt.pos, "metric name must not be set twice: \"" + name + "\" or \"" + lname + "\"");
            auto m = model::Matcher::Make(model::MatchType::kEqual, std::string(model::kMetricName), lname);
            ms.push_back(std::move(*m));
            name_in_braces = true;
            if (Peek().kind == Tok::kComma) Next();
            continue;
          }
        } else if (IsIdentLike(lt) && lt.kind != Tok::kMetricIdentifier) {
          lname = std::string(lt.text);
        } else {
          if (lt.kind == Tok::kEOF) Fail(lt.pos, "unexpected end of input inside braces");
          Fail(lt.pos, "unexpected " + TokString(lt) + " in label matching, expected label");
        }
        const Token& op = Next();
        model::MatchType mt;
        switch (op.kind) {
          case Tok::kAssign: mt = model::MatchType::kEqual; break;
          case Tok::kNeq: mt = model::MatchType::kNotEqual; break;
          case Tok::kEqlRegex: mt = model::MatchType::kRegex; break;
          case Tok::kNeqRegex: mt = model::MatchType::kNotRegex; break;
          default:
            if (op.kind == Tok::kEOF) Fail(op.pos, "unexpected end of input inside braces");
            Fail(op.pos, "unexpected " + TokString(op) + " in label matching, expected label matching operator");
        }
        const Token& vt = Next();
        if (vt.kind != Tok::kString) {
          if (vt.kind == Tok::kEOF) Fail(vt.pos, "unexpected end of input inside braces");
          Fail(vt.pos, "unexpected " + TokString(vt) + " in label matching, expected string");
        }
        std::string val = UnquoteOrFail(vt);
        auto m = model::Matcher::Make(mt, lname, val);
        if (!m.ok()) Fail(vt.pos, m.error().message());
        if (lname == model::kMetricName) name_in_braces = true;
        ms.push_back(std::move(*m));
        if (Peek().kind == Tok::kComma) {
          Next();
        } else if (Peek().kind != Tok::kRightBrace) {
          if (Peek().kind == Tok::kEOF) Fail(Peek().pos, "unexpected end of input inside braces");
          Fail(Peek().pos, "unexpected " + TokString(Peek()) + " in label matching, expected \",\" or \"}\"");
        }
      }
      e->pos_end = Next().pos + 1;
    }
    if (!name.empty()) {
      for (const auto& m : ms) {
        if (m.name() == model::kMetricName && m.type() == model::MatchType::kEqual) {
          Fail(start, "metric name must not be set twice: \"" + name + "\" or \"" + m.value() + "\"");
        }
      }
      auto m = model::Matcher::Make(model::MatchType::kEqual, std::string(model::kMetricName), name);
      ms.insert(ms.begin(), std::move(*m));
    } else {
      for (const auto& m : ms) {
        if (m.name() == model::kMetricName && m.type() == model::MatchType::kEqual) e->name = m.value();
      }
    }
    bool non_empty = false;
    for (const auto& m : ms) {
      if (!m.MatchesEmpty()) non_empty = true;
    }
    if (!non_empty && !allow_empty_selector_) Fail(start, "vector selector must contain at least one non-empty matcher");
    e->matchers = std::move(ms);
    return e;
  }

  std::string_view in_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  ParseError err_;
  std::vector<Expr*> offset_set_;
  int depth_ = 0;
  bool allow_empty_selector_ = false;
};

}  // namespace

std::string FormatParseError(std::string_view input, const ParseError& err) {
  int line = 1;
  int last_nl = -1;
  for (int i = 0; i < err.pos && i < static_cast<int>(input.size()); ++i) {
    if (input[i] == '\n') {
      ++line;
      last_nl = i;
    }
  }
  int col = err.pos - last_nl;
  return std::to_string(line) + ":" + std::to_string(col) + ": parse error: " + err.msg;
}

ExprPtr ParseExprWithErrors(std::string_view input, std::vector<ParseError>* errors) {
  Parser p(input);
  return p.Run(errors);
}

Result<ExprPtr> ParseExpr(std::string_view input) {
  std::vector<ParseError> errs;
  ExprPtr e = ParseExprWithErrors(input, &errs);
  if (!errs.empty()) return Status::InvalidArgument(FormatParseError(input, errs[0]));
  return e;
}

double EvalDurationExpr(const Expr& e, int64_t step_ms, int64_t range_ms) {
  switch (e.kind) {
    case NodeKind::kNumber: return e.number;
    case NodeKind::kParen: return EvalDurationExpr(*e.args[0], step_ms, range_ms);
    case NodeKind::kUnary: {
      double v = EvalDurationExpr(*e.args[0], step_ms, range_ms);
      return e.negative ? -v : v;
    }
    case NodeKind::kCall: {
      if (e.func->name == "step") return static_cast<double>(step_ms) / 1000.0;
      if (e.func->name == "range") return static_cast<double>(range_ms) / 1000.0;
      double a = EvalDurationExpr(*e.args[0], step_ms, range_ms);
      double b = EvalDurationExpr(*e.args[1], step_ms, range_ms);
      return e.func->name == "min_of" ? std::fmin(a, b) : std::fmax(a, b);
    }
    case NodeKind::kBinary: {
      double a = EvalDurationExpr(*e.args[0], step_ms, range_ms);
      double b = EvalDurationExpr(*e.args[1], step_ms, range_ms);
      switch (e.op) {
        case BinOp::kAdd: return a + b;
        case BinOp::kSub: return a - b;
        case BinOp::kMul: return a * b;
        case BinOp::kDiv: return a / b;
        case BinOp::kMod: return std::fmod(a, b);
        case BinOp::kPow: return std::pow(a, b);
        default: return NAN;
      }
    }
    default:
      return NAN;
  }
}

Result<model::Matchers> ParseMetricSelector(std::string_view input) {
  ASSIGN_OR_RETURN(ExprPtr e, ParseExpr(input));
  if (e->kind != NodeKind::kVectorSelector || e->offset_ms != 0 || e->at != AtKind::kNone) {
    return Status::InvalidArgument("1:1: parse error: expected series selector");
  }
  return std::move(e->matchers);
}

Result<int64_t> ParseDuration(std::string_view s) {
  auto ms = ParseDurationMs(s);
  if (!ms.ok()) return Status::InvalidArgument("not a valid duration string: \"" + std::string(s) + "\"");
  return *ms;
}

std::string FormatDuration(int64_t ms) {
  if (ms == 0) return "0s";
  std::string out;
  // The magnitude in uint64, so INT64_MIN has one too.
  uint64_t left = static_cast<uint64_t>(ms);
  if (ms < 0) {
    out = "-";
    left = 0 - left;
  }
  struct U {
    uint64_t n;
    const char* s;
  };
  static const U units[] = {{365 * 86'400'000ULL, "y"}, {7 * 86'400'000ULL, "w"}, {86'400'000, "d"}, {3'600'000, "h"},
                            {60'000, "m"},             {1000, "s"},               {1, "ms"}};
  for (const auto& u : units) {
    if (left >= u.n) {
      out += std::to_string(left / u.n) + u.s;
      left %= u.n;
    }
  }
  return out;
}

}  // namespace trainwatch::promql::parser
