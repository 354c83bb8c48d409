#include "logs/query.h"

#include <re2/re2.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

namespace trainwatch::logs {

namespace {

bool IsTokenChar(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

bool ParseNumber(std::string_view s, double* out) {
  if (s.empty() || s.size() > 64) return false;
  std::string tmp(s);
  char* end = nullptr;
  double v = std::strtod(tmp.c_str(), &end);
  if (end != tmp.c_str() + tmp.size()) return false;
  *out = v;
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<Query> Run() {
    Query q;
    SkipSpace();
    if (Peek() == '{') RETURN_IF_ERROR(Selector(&q));
    Query* cur = &q;
    for (;;) {
      SkipSpace();
      if (pos_ >= s_.size()) break;
      bool alt = false;
      RETURN_IF_ERROR(Filter(cur, &alt));
      if (alt) {
        if (Empty(*cur)) return Error("expected a filter before \"or\"");
        q.alternatives.emplace_back();
        cur = &q.alternatives.back();
      }
    }
    if (cur != &q && Empty(*cur)) return Error("expected a filter after \"or\"");
    return q;
  }

 private:
  static bool Empty(const Query& q) {
    return q.levels.empty() && q.fields.empty() && q.texts.empty() && q.lines.empty();
  }
  char Peek(size_t off = 0) const { return pos_ + off < s_.size() ? s_[pos_ + off] : '\0'; }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  Status Error(std::string msg) const {
    return Status::InvalidArgument("parse error at position " + std::to_string(pos_ + 1) + ": " + msg);
  }

  static bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '@'; }
  static bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; }

  std::string_view Ident() {
    size_t b = pos_;
    if (!IsIdentStart(Peek())) return {};
    while (pos_ < s_.size() && IsIdentChar(s_[pos_])) ++pos_;
    return s_.substr(b, pos_ - b);
  }

  Result<std::string> Quoted() {
    char q = Peek();
    if (q != '"' && q != '\'' && q != '`') return Error("expected a quoted string");
    ++pos_;
    std::string out;
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == q) return out;
      if (c == '\\' && q != '`') {
        if (pos_ >= s_.size()) break;
        char e = s_[pos_++];
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case '\\': out += '\\'; break;
          case '"': out += '"'; break;
          case '\'': out += '\''; break;
          default:
            // Unknown escapes stay as written so regexes like "\d" work unescaped.
            out += '\\';
            out += e;
        }
        continue;
      }
      out += c;
    }
    return Error("unterminated string");
  }

  Status Selector(Query* q) {
    ++pos_;  // '{'
    for (;;) {
      SkipSpace();
      if (Peek() == '}') {
        ++pos_;
        break;
      }
      std::string_view name = Ident();
      if (name.empty()) return Error("expected a label name in the selector");
      SkipSpace();
      model::MatchType t;
      if (Peek() == '=' && Peek(1) == '~') t = model::MatchType::kRegex, pos_ += 2;
      else if (Peek() == '!' && Peek(1) == '~') t = model::MatchType::kNotRegex, pos_ += 2;
      else if (Peek() == '!' && Peek(1) == '=') t = model::MatchType::kNotEqual, pos_ += 2;
      else if (Peek() == '=') t = model::MatchType::kEqual, pos_ += 1;
      else return Error("expected one of = != =~ !~ after label \"" + std::string(name) + "\"");
      SkipSpace();
      ASSIGN_OR_RETURN(std::string value, Quoted());
      auto m = model::Matcher::Make(t, std::string(name), std::move(value));
      if (!m.ok()) return Error(m.error().message());
      q->matchers.push_back(std::move(*m));
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == '}') continue;
      return Error("expected , or } in the selector");
    }
    return Status::OK();
  }

  // Reads an operator at pos_, if any.
  bool Op(CmpOp* op) {
    char a = Peek(), b = Peek(1);
    if (a == '=' && b == '~') return *op = CmpOp::kRe, pos_ += 2, true;
    if (a == '!' && b == '~') return *op = CmpOp::kNre, pos_ += 2, true;
    if (a == '!' && b == '=') return *op = CmpOp::kNe, pos_ += 2, true;
    if (a == '>' && b == '=') return *op = CmpOp::kGe, pos_ += 2, true;
    if (a == '<' && b == '=') return *op = CmpOp::kLe, pos_ += 2, true;
    if (a == '=' && b == '=') return *op = CmpOp::kEq, pos_ += 2, true;
    if (a == '=') return *op = CmpOp::kEq, pos_ += 1, true;
    if (a == '>') return *op = CmpOp::kGt, pos_ += 1, true;
    if (a == '<') return *op = CmpOp::kLt, pos_ += 1, true;
    return false;
  }

  Status LineFilterAt(Query* q, bool regex, bool negate) {
    pos_ += 2;
    SkipSpace();
    LineFilter f;
    f.regex = regex;
    f.negate = negate;
    ASSIGN_OR_RETURN(f.text, Quoted());
    if (regex) {
      RE2::Options o;
      o.set_log_errors(false);
      o.set_dot_nl(true);
      auto re = std::make_shared<const RE2>(f.text, o);
      if (!re->ok()) return Error("invalid regex \"" + f.text + "\": " + re->error());
      f.re = std::move(re);
    }
    q->lines.push_back(std::move(f));
    return Status::OK();
  }

  Status Text(Query* q, std::string_view raw, bool phrase, bool negate) {
    TextFilter t;
    t.negate = negate;
    if (!phrase && raw.size() > 1 && raw.back() == '*') {
      t.prefix = true;
      raw.remove_suffix(1);
    }
    Tokenize(raw, &t.tokens);
    if (t.tokens.empty()) return Error("search term \"" + std::string(raw) + "\" has no letters or digits");
    q->texts.push_back(std::move(t));
    return Status::OK();
  }

  // A filter into *q, or *alt = true for `or`.
  Status Filter(Query* q, bool* alt) {
    if (Peek() == '|' && Peek(1) == '~') return LineFilterAt(q, true, false);
    if (Peek() == '|' && Peek(1) == '=') return LineFilterAt(q, false, false);
    if (Peek() == '!' && Peek(1) == '~') return LineFilterAt(q, true, true);
    if (Peek() == '!' && Peek(1) == '=') return LineFilterAt(q, false, true);
    if (Peek() == '(' || Peek() == ')') return Error("parentheses are not supported");
    if (Peek() == '{') return Error("the stream selector must come first");
    bool negate = false;
    if (Peek() == '-' && Peek(1) != ' ' && Peek(1) != '\0') {
      negate = true;
      ++pos_;
    }
    if (Peek() == '"' || Peek() == '\'' || Peek() == '`') {
      ASSIGN_OR_RETURN(std::string phrase, Quoted());
      return Text(q, phrase, true, negate);
    }
    size_t start = pos_;
    std::string_view ident = negate ? std::string_view() : Ident();
    if (!ident.empty()) {
      size_t after_ident = pos_;
      SkipSpace();
      CmpOp op;
      if (Op(&op)) return Comparison(q, ident, op);
      pos_ = after_ident;
      if (pos_ >= s_.size() || s_[pos_] == ' ' || s_[pos_] == '\t') {
        if (ident == "and" || ident == "AND") return Status::OK();
        if (ident == "or" || ident == "OR") {
          *alt = true;
          return Status::OK();
        }
        if (ident == "not" || ident == "NOT") {
          SkipSpace();
          if (Peek() == '"' || Peek() == '\'' || Peek() == '`') {
            ASSIGN_OR_RETURN(std::string phrase, Quoted());
            return Text(q, phrase, true, true);
          }
          size_t b = pos_;
          while (pos_ < s_.size() && s_[pos_] != ' ' && s_[pos_] != '\t') ++pos_;
          if (b == pos_) return Error("expected a term after NOT");
          return Text(q, s_.substr(b, pos_ - b), false, true);
        }
      }
      pos_ = start;
    }
    while (pos_ < s_.size() && s_[pos_] != ' ' && s_[pos_] != '\t' && s_[pos_] != '\n') ++pos_;
    return Text(q, s_.substr(start, pos_ - start), false, negate);
  }

  Status Comparison(Query* q, std::string_view name, CmpOp op) {
    SkipSpace();
    FieldFilter f;
    f.name = std::string(name);
    f.op = op;
    if (Peek() == '"' || Peek() == '\'' || Peek() == '`') {
      ASSIGN_OR_RETURN(f.value, Quoted());
    } else {
      size_t b = pos_;
      while (pos_ < s_.size() && s_[pos_] != ' ' && s_[pos_] != '\t' && s_[pos_] != '\n') ++pos_;
      if (b == pos_) return Error("expected a value after \"" + f.name + "\"");
      f.value = std::string(s_.substr(b, pos_ - b));
    }
    bool is_level = f.name == "level";
    if (is_level && op != CmpOp::kRe && op != CmpOp::kNre) f.value = NormalizeLevel(f.value);
    f.numeric = !is_level && ParseNumber(f.value, &f.number);
    bool ordering = op == CmpOp::kGt || op == CmpOp::kGe || op == CmpOp::kLt || op == CmpOp::kLe;
    if (ordering && is_level && LevelRank(f.value) == 0) {
      return Error("level \"" + f.value + "\" has no order; use one of TRACE DEBUG INFO WARNING ERROR CRITICAL");
    }
    if (ordering && !is_level && !f.numeric) {
      return Error("\"" + f.name + "\": ordering comparisons need a number, got \"" + f.value + "\"");
    }
    if (op == CmpOp::kRe || op == CmpOp::kNre) {
      RE2::Options o;
      o.set_log_errors(false);
      o.set_dot_nl(true);
      auto re = std::make_shared<const RE2>("^(?:" + f.value + ")$", o);
      if (!re->ok()) return Error("invalid regex \"" + f.value + "\": " + re->error());
      f.re = std::move(re);
    }
    (is_level ? q->levels : q->fields).push_back(std::move(f));
    return Status::OK();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

bool HasPhrase(const std::vector<std::string>& toks, const TextFilter& t) {
  size_t n = t.tokens.size();
  if (toks.size() < n) return false;
  for (size_t i = 0; i + n <= toks.size(); ++i) {
    bool ok = true;
    for (size_t j = 0; j < n && ok; ++j) {
      if (t.prefix && j == n - 1) ok = toks[i + j].starts_with(t.tokens[j]);
      else ok = toks[i + j] == t.tokens[j];
    }
    if (ok) return true;
  }
  return false;
}

// Whether `tok` (lower-case) occurs in `s`, ASCII case folded: a cheap
// test before tokenizing a message.
bool ContainsFolded(std::string_view s, std::string_view tok) {
  if (tok.empty()) return true;
  if (s.size() < tok.size()) return false;
  char first = tok[0];
  char upper = (first >= 'a' && first <= 'z') ? static_cast<char>(first - 32) : first;
  for (size_t i = 0; i + tok.size() <= s.size(); ++i) {
    if (s[i] != first && s[i] != upper) continue;
    size_t j = 1;
    for (; j < tok.size(); ++j) {
      char c = s[i + j];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      if (c != tok[j]) break;
    }
    if (j == tok.size()) return true;
  }
  return false;
}

}  // namespace

void Tokenize(std::string_view text, std::vector<std::string>* out) {
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && !IsTokenChar(static_cast<unsigned char>(text[i]))) ++i;
    if (i >= text.size()) break;
    std::string tok;
    while (i < text.size() && IsTokenChar(static_cast<unsigned char>(text[i]))) {
      char c = text[i++];
      tok += (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
    }
    out->push_back(std::move(tok));
  }
}

bool FieldFilter::Test(std::string_view v, bool is_number) const {
  switch (op) {
    case CmpOp::kRe: return RE2::FullMatch(v, *re);
    case CmpOp::kNre: return !RE2::FullMatch(v, *re);
    default: break;
  }
  if (numeric) {
    double x;
    bool num = ParseNumber(v, &x);
    (void)is_number;
    if (num) {
      switch (op) {
        case CmpOp::kEq: return x == number;
        case CmpOp::kNe: return x != number;
        case CmpOp::kGt: return x > number;
        case CmpOp::kGe: return x >= number;
        case CmpOp::kLt: return x < number;
        case CmpOp::kLe: return x <= number;
        default: return false;
      }
    }
    if (op != CmpOp::kEq && op != CmpOp::kNe) return false;
  }
  if (op == CmpOp::kEq) return v == value;
  if (op == CmpOp::kNe) return v != value;
  return false;
}

Result<Query> Query::Parse(std::string_view q) { return Parser(q).Run(); }

bool Query::MatchesStream(const model::Labels& labels) const {
  for (const model::Matcher& m : matchers) {
    if (!m.Matches(labels.Get(m.name()))) return false;
  }
  return true;
}

bool Query::MatchesLevel(std::string_view level) const {
  for (const FieldFilter& f : levels) {
    switch (f.op) {
      case CmpOp::kEq: if (level != f.value) return false; break;
      case CmpOp::kNe: if (level == f.value) return false; break;
      case CmpOp::kRe: case CmpOp::kNre: if (!f.Test(level, false)) return false; break;
      default: {
        int r = LevelRank(level), want = LevelRank(f.value);
        if (r == 0) return false;
        bool ok = f.op == CmpOp::kGt ? r > want : f.op == CmpOp::kGe ? r >= want : f.op == CmpOp::kLt ? r < want : r <= want;
        if (!ok) return false;
      }
    }
  }
  return true;
}

bool Query::Matches(const Record& r) const {
  return Matches(LineView{&r.labels, r.level, r.message, r.fields});
}

bool Query::Matches(const LineView& l) const {
  if (!MatchesStream(*l.labels)) return false;
  if (MatchesFilters(l)) return true;
  for (const Query& a : alternatives) {
    if (a.MatchesFilters(l)) return true;
  }
  return false;
}

std::vector<const Query*> Query::Alternatives() const {
  std::vector<const Query*> out{this};
  for (const Query& a : alternatives) out.push_back(&a);
  return out;
}

bool Query::MatchesFilters(const LineView& r) const {
  if (!MatchesLevel(r.level)) return false;
  for (const TextFilter& t : texts) {
    if (t.negate) continue;
    for (const std::string& tok : t.tokens) {
      if (!ContainsFolded(r.message, tok)) return false;
    }
  }
  if (!fields.empty()) {
    nlohmann::json obj;
    bool parsed = false;
    for (const FieldFilter& f : fields) {
      if (f.name == "message" || f.name == "msg") {
        if (!f.Test(r.message, false)) return false;
        continue;
      }
      if (!parsed) {
        parsed = true;
        if (!r.fields.empty()) obj = nlohmann::json::parse(r.fields, nullptr, false);
      }
      const nlohmann::json* v = nullptr;
      if (obj.is_object()) {
        auto it = obj.find(f.name);
        if (it != obj.end() && !it->is_null()) v = &*it;
      }
      bool ok;
      if (v != nullptr) {
        ok = v->is_string() ? f.Test(v->get_ref<const std::string&>(), false) : f.Test(v->dump(), v->is_number());
      } else if (r.labels->Has(f.name)) {
        ok = f.Test(r.labels->Get(f.name), false);
      } else {
        // Absent: only the negative comparisons hold, as for PromQL labels.
        ok = f.op == CmpOp::kNe || f.op == CmpOp::kNre;
      }
      if (!ok) return false;
    }
  }
  for (const LineFilter& l : lines) {
    bool hit = l.regex ? RE2::PartialMatch(r.message, *l.re) : r.message.find(l.text) != std::string::npos;
    if (hit == l.negate) return false;
  }
  if (!texts.empty()) {
    std::vector<std::string> toks;
    Tokenize(r.message, &toks);
    for (const TextFilter& t : texts) {
      if (HasPhrase(toks, t) == t.negate) return false;
    }
  }
  return true;
}

std::string Query::FtsTokens() const {
  std::string out;
  for (const TextFilter& t : texts) {
    if (t.negate) continue;
    for (size_t i = 0; i < t.tokens.size(); ++i) {
      if (!out.empty()) out += " AND ";
      // Tokens hold no quotes (letters, digits, bytes >= 0x80).
      out += '"' + t.tokens[i] + '"';
      if (t.prefix && i + 1 == t.tokens.size()) out += '*';
    }
  }
  return out;
}

}  // namespace trainwatch::logs
