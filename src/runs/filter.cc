#include "runs/filter.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

namespace trainwatch::runs {

enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kRe, kContains };

// Deepest filter tree and parenthesis/`not` nesting: parsing, evaluation and
// destruction recurse, so a hostile filter (200,000 parentheses, a chain of
// a million `and`s) is an error, never a stack overflow. As PromQL's bound.
constexpr int kMaxFilterDepth = 256;

struct Filter::Node {
  enum class Kind { kAnd, kOr, kNot, kCmp } kind;
  std::shared_ptr<const Node> a, b;  // kAnd/kOr: both; kNot: a
  int depth = 1;                     // of the tree below and including this node
  std::string field;                 // kCmp
  Op op = Op::kEq;
  Json literal;
  std::shared_ptr<const re2::RE2> re;  // kRe
};

namespace {

using Node = Filter::Node;
using NodePtr = std::shared_ptr<const Node>;

struct Token {
  enum class Type { kEnd, kIdent, kString, kNumber, kOp, kLParen, kRParen } type = Type::kEnd;
  std::string text;  // identifier, decoded string, operator
  double number = 0;
  size_t pos = 0;    // 0-based byte offset
};

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<NodePtr> ParseAll() {
    RETURN_IF_ERROR(Advance());
    auto n = ParseOr();
    if (!n.ok()) return n;
    if (tok_.type != Token::Type::kEnd) return Error(tok_.pos, "unexpected " + Describe(tok_) + " after a complete expression");
    return n;
  }

 private:
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case Token::Type::kEnd: return "end of filter";
      case Token::Type::kString: return "string \"" + t.text + "\"";
      case Token::Type::kLParen: return "\"(\"";
      case Token::Type::kRParen: return "\")\"";
      default: return "\"" + t.text + "\"";
    }
  }
  static Status Error(size_t pos, const std::string& msg) {
    return Status::InvalidArgument("filter: position " + std::to_string(pos + 1) + ": " + msg);
  }
  bool IsKeyword(const Token& t, std::string_view kw) const {
    if (t.type != Token::Type::kIdent || t.text.size() != kw.size()) return false;
    for (size_t i = 0; i < kw.size(); i++) {
      if (std::tolower(static_cast<unsigned char>(t.text[i])) != kw[i]) return false;
    }
    return true;
  }

  Status Advance() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) i_++;
    tok_ = Token{};
    tok_.pos = i_;
    if (i_ >= s_.size()) return Status::OK();
    char c = s_[i_];
    if (c == '(' || c == ')') {
      tok_.type = c == '(' ? Token::Type::kLParen : Token::Type::kRParen;
      tok_.text = std::string(1, c);
      i_++;
      return Status::OK();
    }
    if (c == '"' || c == '\'') {
      tok_.type = Token::Type::kString;
      size_t j = i_ + 1;
      for (;; j++) {
        if (j >= s_.size()) return Error(i_, "unterminated string");
        if (s_[j] == c) break;
        if (s_[j] == '\\') {
          if (++j >= s_.size()) return Error(i_, "unterminated string");
          char e = s_[j];
          tok_.text += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          continue;
        }
        tok_.text += s_[j];
      }
      i_ = j + 1;
      return Status::OK();
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || ((c == '-' || c == '+' || c == '.') && i_ + 1 < s_.size() &&
                                                         (std::isdigit(static_cast<unsigned char>(s_[i_ + 1])) ||
                                                          s_[i_ + 1] == '.'))) {
      size_t j = i_;
      if (s_[j] == '+') j++;
      const char* begin = s_.data() + j;
      auto [end, ec] = std::from_chars(begin, s_.data() + s_.size(), tok_.number);
      if (ec != std::errc() && ec != std::errc::result_out_of_range) return Error(i_, "invalid number");
      size_t stop = end - s_.data();
      if (stop < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[stop])) || s_[stop] == '_' || s_[stop] == '.')) {
        return Error(i_, "invalid number \"" + std::string(s_.substr(i_, stop + 1 - i_)) + "\"");
      }
      tok_.type = Token::Type::kNumber;
      tok_.text = std::string(s_.substr(i_, stop - i_));
      i_ = stop;
      return Status::OK();
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i_;
      while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_' || s_[j] == '.' ||
                               s_[j] == '-' || s_[j] == '/')) {
        j++;
      }
      tok_.type = Token::Type::kIdent;
      tok_.text = std::string(s_.substr(i_, j - i_));
      i_ = j;
      return Status::OK();
    }
    static constexpr std::string_view kOps[] = {"=~", "!=", "<=", ">=", "==", "=", "<", ">"};
    for (std::string_view op : kOps) {
      if (s_.substr(i_).starts_with(op)) {
        tok_.type = Token::Type::kOp;
        tok_.text = op == "==" ? "=" : std::string(op);
        i_ += op.size();
        return Status::OK();
      }
    }
    return Error(i_, "unexpected character '" + std::string(1, c) + "'");
  }

  // A kAnd, kOr or kNot node over a (and b), or an error at `pos` when the
  // tree would be deeper than kMaxFilterDepth.
  static Result<NodePtr> Combine(Node::Kind kind, NodePtr a, NodePtr b, size_t pos) {
    int depth = 1 + std::max(a->depth, b != nullptr ? b->depth : 0);
    if (depth > kMaxFilterDepth) return TooDeep(pos);
    auto n = std::make_shared<Node>(Node{kind, std::move(a), std::move(b)});
    n->depth = depth;
    return NodePtr(std::move(n));
  }
  static Status TooDeep(size_t pos) {
    return Error(pos, "filter nested deeper than " + std::to_string(kMaxFilterDepth) + " levels");
  }

  Result<NodePtr> ParseOr() {
    ASSIGN_OR_RETURN(NodePtr left, ParseAnd());
    while (IsKeyword(tok_, "or")) {
      size_t pos = tok_.pos;
      RETURN_IF_ERROR(Advance());
      ASSIGN_OR_RETURN(NodePtr right, ParseAnd());
      ASSIGN_OR_RETURN(left, Combine(Node::Kind::kOr, std::move(left), std::move(right), pos));
    }
    return left;
  }

  Result<NodePtr> ParseAnd() {
    ASSIGN_OR_RETURN(NodePtr left, ParseUnary());
    while (IsKeyword(tok_, "and")) {
      size_t pos = tok_.pos;
      RETURN_IF_ERROR(Advance());
      ASSIGN_OR_RETURN(NodePtr right, ParseUnary());
      ASSIGN_OR_RETURN(left, Combine(Node::Kind::kAnd, std::move(left), std::move(right), pos));
    }
    return left;
  }

  Result<NodePtr> ParseUnary() {
    // `not` and `(` recurse before any node exists: bounded here.
    if (IsKeyword(tok_, "not") || tok_.type == Token::Type::kLParen) {
      if (nesting_ >= kMaxFilterDepth) return TooDeep(tok_.pos);
      nesting_++;
      auto n = ParseNested();
      nesting_--;
      return n;
    }
    return ParseComparison();
  }

  Result<NodePtr> ParseNested() {
    if (IsKeyword(tok_, "not")) {
      size_t pos = tok_.pos;
      RETURN_IF_ERROR(Advance());
      ASSIGN_OR_RETURN(NodePtr inner, ParseUnary());
      return Combine(Node::Kind::kNot, std::move(inner), nullptr, pos);
    }
    size_t open = tok_.pos;  // a "("
    RETURN_IF_ERROR(Advance());
    ASSIGN_OR_RETURN(NodePtr inner, ParseOr());
    if (tok_.type != Token::Type::kRParen) {
      return Error(tok_.pos, "expected \")\" to close \"(\" at position " + std::to_string(open + 1) + ", found " +
                                 Describe(tok_));
    }
    RETURN_IF_ERROR(Advance());
    return inner;
  }

  Result<NodePtr> ParseComparison() {
    if (tok_.type != Token::Type::kIdent || IsKeyword(tok_, "and") || IsKeyword(tok_, "or")) {
      return Error(tok_.pos, "expected a field (config.<path>, summary.<key>, status, tags, ...), found " +
                                 Describe(tok_));
    }
    if (!IsKnownField(tok_.text)) return Error(tok_.pos, "unknown field \"" + tok_.text + "\"");
    auto n = std::make_shared<Node>();
    n->kind = Node::Kind::kCmp;
    n->field = tok_.text;
    RETURN_IF_ERROR(Advance());
    if (IsKeyword(tok_, "contains")) {
      n->op = Op::kContains;
    } else if (tok_.type == Token::Type::kOp) {
      static const std::pair<std::string_view, Op> kMap[] = {{"=", Op::kEq}, {"!=", Op::kNe}, {"<", Op::kLt},
                                                             {"<=", Op::kLe}, {">", Op::kGt}, {">=", Op::kGe},
                                                             {"=~", Op::kRe}};
      for (const auto& [text, op] : kMap) if (tok_.text == text) n->op = op;
    } else {
      return Error(tok_.pos, "expected an operator (=, !=, <, <=, >, >=, =~, contains) after \"" + n->field +
                                 "\", found " + Describe(tok_));
    }
    RETURN_IF_ERROR(Advance());
    size_t lit_pos = tok_.pos;
    switch (tok_.type) {
      case Token::Type::kString: n->literal = tok_.text; break;
      case Token::Type::kNumber: n->literal = tok_.number; break;
      case Token::Type::kIdent:
        if (IsKeyword(tok_, "true")) n->literal = true;
        else if (IsKeyword(tok_, "false")) n->literal = false;
        else if (IsKeyword(tok_, "null")) n->literal = nullptr;
        else return Error(tok_.pos, "expected a value (a number, a quoted string, true, false or null), found " +
                                        Describe(tok_) + " (quote strings)");
        break;
      default:
        return Error(tok_.pos, "expected a value after the operator, found " + Describe(tok_));
    }
    if (n->op == Op::kRe) {
      if (!n->literal.is_string()) return Error(lit_pos, "=~ needs a quoted regular expression");
      RE2::Options o;
      o.set_log_errors(false);
      o.set_dot_nl(true);
      auto re = std::make_shared<const re2::RE2>("^(?:" + n->literal.get<std::string>() + ")$", o);
      if (!re->ok()) return Error(lit_pos, "invalid regular expression: " + re->error());
      n->re = std::move(re);
    }
    if (n->op == Op::kContains && !n->literal.is_string() && !n->literal.is_number()) {
      return Error(lit_pos, "contains needs a string or a number");
    }
    RETURN_IF_ERROR(Advance());
    return NodePtr(std::move(n));
  }

  std::string_view s_;
  size_t i_ = 0;
  Token tok_;
  int nesting_ = 0;  // `not`s and `(`s being parsed
};

bool Equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  if (a.is_string() && b.is_string()) return a.get_ref<const std::string&>() == b.get_ref<const std::string&>();
  if (a.is_boolean() && b.is_boolean()) return a.get<bool>() == b.get<bool>();
  if (a.is_null() && b.is_null()) return true;
  return false;
}

// -1, 0, 1, or 2 when the two are not ordered (types differ, NaN).
int Compare(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) {
    double x = a.get<double>(), y = b.get<double>();
    if (std::isnan(x) || std::isnan(y)) return 2;
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    int c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  return 2;
}

// Summary values that are not finite are stored as "NaN"/"Inf"/"-Inf".
Json Numeric(const Json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "NaN") return std::nan("");
    if (s == "Inf" || s == "+Inf") return HUGE_VAL;
    if (s == "-Inf") return -HUGE_VAL;
  }
  return v;
}

bool EvalCmp(const Node& n, const Json& raw) {
  Json v = n.literal.is_number() ? Numeric(raw) : raw;
  switch (n.op) {
    case Op::kEq:
      if (v.is_array()) {
        for (const Json& e : v) if (Equal(e, n.literal)) return true;
        return false;
      }
      return Equal(v, n.literal);
    case Op::kNe: {
      Node eq = n;
      eq.op = Op::kEq;
      return !EvalCmp(eq, raw);
    }
    case Op::kLt: { int c = Compare(v, n.literal); return c == -1; }
    case Op::kLe: { int c = Compare(v, n.literal); return c == -1 || c == 0; }
    case Op::kGt: { int c = Compare(v, n.literal); return c == 1; }
    case Op::kGe: { int c = Compare(v, n.literal); return c == 1 || c == 0; }
    case Op::kRe:
      if (v.is_string()) return RE2::FullMatch(v.get_ref<const std::string&>(), *n.re);
      if (v.is_array()) {
        for (const Json& e : v) {
          if (e.is_string() && RE2::FullMatch(e.get_ref<const std::string&>(), *n.re)) return true;
        }
      }
      return false;
    case Op::kContains:
      if (v.is_array()) {
        for (const Json& e : v) if (Equal(Numeric(e), n.literal)) return true;
        return false;
      }
      if (v.is_string() && n.literal.is_string()) {
        return v.get_ref<const std::string&>().find(n.literal.get_ref<const std::string&>()) != std::string::npos;
      }
      return false;
  }
  return false;
}

bool Eval(const Node& n, const Run& r) {
  switch (n.kind) {
    case Node::Kind::kAnd: return Eval(*n.a, r) && Eval(*n.b, r);
    case Node::Kind::kOr: return Eval(*n.a, r) || Eval(*n.b, r);
    case Node::Kind::kNot: return !Eval(*n.a, r);
    case Node::Kind::kCmp: return EvalCmp(n, FieldValue(r, n.field));
  }
  return false;
}

}  // namespace

Result<Filter> Filter::Parse(std::string_view expr) {
  Filter f;
  bool blank = true;
  for (char c : expr) if (!std::isspace(static_cast<unsigned char>(c))) blank = false;
  if (blank) return f;
  Parser p(expr);
  ASSIGN_OR_RETURN(f.root_, p.ParseAll());
  return f;
}

bool Filter::Matches(const Run& run) const { return root_ == nullptr || Eval(*root_, run); }

}  // namespace trainwatch::runs
