// Lexer and parser for Go text/template, following text/template/parse:
// the same tokens, trim markers, node kinds, parse-time checks (undefined
// functions and variables, non-executable pipeline stages) and error texts.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <string>

#include "base/strconv.h"
#include "template/template_internal.h"

namespace trainwatch::tmpl {

namespace {

enum class It {
  kError, kBool, kChar, kCharConstant, kAssign, kDeclare, kEOF, kField, kIdentifier, kLeftDelim, kLeftParen,
  kNumber, kPipe, kRawString, kRightDelim, kRightParen, kSpace, kString, kText, kVariable, kDot, kComment,
  // keywords (printed as <word>)
  kBlock, kBreak, kContinue, kDefine, kElse, kEnd, kIf, kNil, kRange, kTemplate, kWith,
};

struct Item {
  It typ;
  int pos;
  std::string val;
  int line;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsAlnum(unsigned char c) { return c == '_' || std::isalnum(c); }

// Go's isAlphaNumeric for the rune starting at s[i]: ASCII letters, digits and
// '_', and (approximately) non-ASCII letters; returns the rune's byte length
// in *len, or 0 when it is not alphanumeric.
size_t AlnumLen(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return IsAlnum(c) ? 1 : 0;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (i + n > s.size()) return 0;
  uint32_t r = c & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) r = (r << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  bool letter = r >= 0xC0 && r != 0xD7 && r != 0xF7 && !(r >= 0x2000 && r <= 0x206F) && r != 0x3000 &&
                r != 0xFEFF && !(r >= 0xFFF0);
  return letter ? n : 0;
}

// %.10q-style truncation used by Go's item.String().
std::string ItemString(const Item& i) {
  if (i.typ == It::kEOF) return "EOF";
  if (i.typ == It::kError) return i.val;
  if (i.typ >= It::kBlock) return "<" + i.val + ">";
  if (i.val.size() > 10) return GoQuote(i.val.substr(0, 10)) + "...";
  return GoQuote(i.val);
}

class Lexer {
 public:
  explicit Lexer(std::string_view in) : in_(in) {}

  std::vector<Item> Run() {
    while (true) {
      if (!LexText()) break;
      if (!LexAction()) break;
    }
    return std::move(items_);
  }

 private:
  void Emit(It t, size_t start, size_t end) {
    items_.push_back({t, static_cast<int>(start), std::string(in_.substr(start, end - start)), LineAt(start)});
  }
  int LineAt(size_t pos) {
    while (line_pos_ < pos) {
      if (in_[line_pos_] == '\n') ++line_;
      ++line_pos_;
    }
    return line_;
  }
  bool Error(std::string msg, size_t at) {
    items_.push_back({It::kError, static_cast<int>(at), std::move(msg), LineAt(at)});
    return false;
  }
  bool HasLeftTrim(size_t p) const { return p + 1 < in_.size() && in_[p] == '-' && IsSpace(in_[p + 1]); }
  bool HasRightTrim(size_t p) const { return p + 1 < in_.size() && IsSpace(in_[p]) && in_[p + 1] == '-'; }
  // At a right delimiter: returns 0 (no), 1 ("}}"), 2 (" -}}").
  int AtRightDelim(size_t p) const {
    if (HasRightTrim(p) && in_.substr(p + 2, 2) == "}}") return 2;
    if (in_.substr(p, 2) == "}}") return 1;
    return 0;
  }
  size_t SkipSpace(size_t p) const {
    while (p < in_.size() && IsSpace(in_[p])) ++p;
    return p;
  }

  // Text up to the next "{{" (or EOF). Returns false at EOF.
  bool LexText() {
    size_t x = in_.find("{{", pos_);
    if (x == std::string_view::npos) {
      if (pos_ < in_.size()) Emit(It::kText, pos_, in_.size());
      items_.push_back({It::kEOF, static_cast<int>(in_.size()), "", LineAt(in_.size())});
      return false;
    }
    size_t end = x;
    if (HasLeftTrim(x + 2)) {
      while (end > pos_ && IsSpace(in_[end - 1])) --end;
    }
    if (end > pos_) Emit(It::kText, pos_, end);
    pos_ = x;
    return true;
  }

  // From "{{" through "}}".
  bool LexAction() {
    size_t start = pos_;
    pos_ += 2;
    size_t after_marker = HasLeftTrim(pos_) ? 2 : 0;
    if (in_.substr(pos_ + after_marker, 2) == "/*") {
      pos_ += after_marker;
      size_t x = in_.find("*/", pos_ + 2);
      if (x == std::string_view::npos) return Error("unclosed comment", start);
      pos_ = x + 2;
      int delim = AtRightDelim(pos_);
      if (delim == 0) return Error("comment ends before closing delimiter", start);
      pos_ += delim == 2 ? 4 : 2;
      if (delim == 2) pos_ = SkipSpace(pos_);
      return true;
    }
    Emit(It::kLeftDelim, start, start + 2);
    pos_ += after_marker;
    int paren_depth = 0;
    while (true) {
      int delim = AtRightDelim(pos_);
      if (delim != 0) {
        if (paren_depth != 0) return Error("unclosed left paren", pos_);
        Emit(It::kRightDelim, pos_ + (delim == 2 ? 2 : 0), pos_ + (delim == 2 ? 4 : 2));
        pos_ += delim == 2 ? 4 : 2;
        if (delim == 2) pos_ = SkipSpace(pos_);
        return true;
      }
      if (pos_ >= in_.size()) return Error("unclosed action", pos_);
      char c = in_[pos_];
      size_t s = pos_;
      if (IsSpace(c)) {
        size_t e = SkipSpace(pos_);
        // " -}}" belongs to the delimiter.
        if (HasRightTrim(e - 1) && in_.substr(e + 1, 2) == "}}") {
          if (e - 1 == s) {
            pos_ = s;
            Emit(It::kRightDelim, s + 2, s + 4);
            pos_ = SkipSpace(s + 4);
            return true;
          }
          e = e - 1;
        }
        Emit(It::kSpace, s, e);
        pos_ = e;
        continue;
      }
      ++pos_;
      switch (c) {
        case '=': Emit(It::kAssign, s, pos_); continue;
        case ':':
          if (pos_ >= in_.size() || in_[pos_] != '=') return Error("expected :=", s);
          ++pos_;
          Emit(It::kDeclare, s, pos_);
          continue;
        case '|': Emit(It::kPipe, s, pos_); continue;
        case '"':
        case '\'': {
          while (true) {
            if (pos_ >= in_.size() || in_[pos_] == '\n') {
              return Error(c == '"' ? "unterminated quoted string" : "unterminated character constant", s);
            }
            char d = in_[pos_++];
            if (d == '\\' && pos_ < in_.size() && in_[pos_] != '\n') {
              ++pos_;
            } else if (d == c) {
              break;
            }
          }
          Emit(c == '"' ? It::kString : It::kCharConstant, s, pos_);
          continue;
        }
        case '`': {
          size_t x = in_.find('`', pos_);
          if (x == std::string_view::npos) return Error("unterminated raw quoted string", s);
          pos_ = x + 1;
          Emit(It::kRawString, s, pos_);
          continue;
        }
        case '$':
        case '.': {
          if (c == '.' && pos_ < in_.size() && std::isdigit(static_cast<unsigned char>(in_[pos_]))) break;
          if (AtTerminator()) {
            Emit(c == '$' ? It::kVariable : It::kDot, s, pos_);
            continue;
          }
          while (pos_ < in_.size() && AlnumLen(in_, pos_) > 0) pos_ += AlnumLen(in_, pos_);
          if (!AtTerminator()) return BadChar();
          Emit(c == '$' ? It::kVariable : It::kField, s, pos_);
          continue;
        }
        case '(': Emit(It::kLeftParen, s, pos_); ++paren_depth; continue;
        case ')':
          Emit(It::kRightParen, s, pos_);
          if (--paren_depth < 0) return Error("unexpected right paren U+0029 ')'", s);
          continue;
        default: break;
      }
      if (c == '+' || c == '-' || c == '.' || std::isdigit(static_cast<unsigned char>(c))) {
        pos_ = s;
        if (!ScanNumber()) return Error("bad number syntax: " + GoQuote(in_.substr(s, pos_ - s)), s);
        Emit(It::kNumber, s, pos_);
        continue;
      }
      if (AlnumLen(in_, s) > 0) {
        pos_ = s;
        while (pos_ < in_.size() && AlnumLen(in_, pos_) > 0) pos_ += AlnumLen(in_, pos_);
        if (!AtTerminator()) return BadChar();
        std::string_view w = in_.substr(s, pos_ - s);
        It t = It::kIdentifier;
        if (w == "true" || w == "false") t = It::kBool;
        else if (w == "block") t = It::kBlock;
        else if (w == "break") t = It::kBreak;
        else if (w == "continue") t = It::kContinue;
        else if (w == "define") t = It::kDefine;
        else if (w == "else") t = It::kElse;
        else if (w == "end") t = It::kEnd;
        else if (w == "if") t = It::kIf;
        else if (w == "nil") t = It::kNil;
        else if (w == "range") t = It::kRange;
        else if (w == "template") t = It::kTemplate;
        else if (w == "with") t = It::kWith;
        Emit(t, s, pos_);
        continue;
      }
      if (static_cast<unsigned char>(c) < 0x80 && std::isprint(static_cast<unsigned char>(c))) {
        Emit(It::kChar, s, pos_);
        continue;
      }
      return Error("unrecognized character in action: " + RuneName(s), s);
    }
  }

  bool AtTerminator() const {
    if (pos_ >= in_.size()) return true;
    char c = in_[pos_];
    if (IsSpace(c)) return true;
    switch (c) {
      case '.': case ',': case '|': case ':': case ')': case '(': return true;
      default: break;
    }
    return in_.substr(pos_, 2) == "}}";
  }
  bool BadChar() { return Error("bad character " + RuneName(pos_), pos_); }

  // Go's %#U of the rune at p: U+00A0 ' ' (quoted only when printable ASCII).
  std::string RuneName(size_t p) const {
    unsigned char c = static_cast<unsigned char>(in_[p]);
    uint32_t r = c;
    if (c >= 0xC0 && p + 1 < in_.size()) {
      int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
      r = c & (0x3F >> n);
      for (int i = 1; i <= n && p + i < in_.size(); ++i) r = (r << 6) | (static_cast<unsigned char>(in_[p + i]) & 0x3F);
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "U+%04X", r);
    std::string out = buf;
    if (r >= 0x20 && r < 0x7F) out += std::string(" '") + static_cast<char>(r) + "'";
    return out;
  }

  bool Accept(std::string_view valid) {
    if (pos_ < in_.size() && valid.find(in_[pos_]) != std::string_view::npos) {
      ++pos_;
      return true;
    }
    return false;
  }
  void AcceptRun(std::string_view valid) {
    while (Accept(valid)) {
    }
  }
  bool ScanNumber() {
    Accept("+-");
    std::string_view digits = "0123456789_";
    if (Accept("0")) {
      if (Accept("xX")) digits = "0123456789abcdefABCDEF_";
      else if (Accept("oO")) digits = "01234567_";
      else if (Accept("bB")) digits = "01_";
    }
    AcceptRun(digits);
    if (Accept(".")) AcceptRun(digits);
    if (digits.size() == 11 && Accept("eE")) {
      Accept("+-");
      AcceptRun("0123456789_");
    }
    if (digits.size() == 23 && Accept("pP")) {
      Accept("+-");
      AcceptRun("0123456789_");
    }
    Accept("i");
    if (pos_ < in_.size() && AlnumLen(in_, pos_) > 0) {
      ++pos_;
      return false;
    }
    return true;
  }

  std::string_view in_;
  size_t pos_ = 0;
  size_t line_pos_ = 0;
  int line_ = 1;
  std::vector<Item> items_;
};

// Unwinds the parser on the first error (internal only), like Go's panic/recover.
struct ParseFail {
  std::string msg;
};

// strconv.ParseInt/ParseUint with base 0 (prefixes 0x 0o 0b 0, underscores).
bool ParseGoInt(std::string_view text, bool is_signed, int64_t* i, uint64_t* u) {
  std::string s(text);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    if (!is_signed) return false;
    neg = s[0] == '-';
    s.erase(0, 1);
  }
  int base = 10;
  if (s.size() > 1 && s[0] == '0') {
    char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[1])));
    if (p == 'x') base = 16, s.erase(0, 2);
    else if (p == 'o') base = 8, s.erase(0, 2);
    else if (p == 'b') base = 2, s.erase(0, 2);
    else base = 8, s.erase(0, 1);
  }
  std::string clean;
  for (char c : s) {
    if (c != '_') clean += c;
  }
  if (clean.empty()) return false;
  for (char c : clean) {
    int d = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : std::isalpha(static_cast<unsigned char>(c)) ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                                                          : 99;
    if (d >= base) return false;
  }
  errno = 0;
  unsigned long long v = std::strtoull(clean.c_str(), nullptr, base);
  if (errno == ERANGE) return false;
  if (!is_signed) {
    *u = v;
    return true;
  }
  if (neg) {
    if (v > (1ULL << 63)) return false;
    *i = v == (1ULL << 63) ? INT64_MIN : -static_cast<int64_t>(v);
  } else {
    if (v > static_cast<unsigned long long>(INT64_MAX)) return false;
    *i = static_cast<int64_t>(v);
  }
  return true;
}

class Parser {
 public:
  Parser(std::string_view name, std::string_view text, FuncSet funcs, Tree* tree)
      : name_(name), funcs_(funcs), tree_(tree), items_(Lexer(text).Run()) {}

  void Parse() {
    vars_ = {"$"};
    auto root = NewNode(NodeType::kList, Peek());
    while (Peek().typ != It::kEOF) {
      if (Peek().typ == It::kLeftDelim) {
        size_t save = i_;
        Next();
        if (NextNonSpace().typ == It::kDefine) {
          ParseDefinition();
          continue;
        }
        i_ = save;
      }
      NodePtr n = TextOrAction();
      if (n->type == NodeType::kEnd || n->type == NodeType::kElse) {
        Fail("unexpected " + std::string(n->type == NodeType::kEnd ? "{{end}}" : "{{else}}"));
      }
      root->nodes.push_back(std::move(n));
    }
    AddTemplate(name_, std::move(root));
  }

 private:
  [[noreturn]] void Fail(const std::string& msg) {
    throw ParseFail{"template: " + name_ + ":" + std::to_string(last_line_) + ": " + msg};
  }
  [[noreturn]] void Unexpected(const Item& it, std::string_view context) {
    if (it.typ == It::kError) {
      Fail(it.val);
    }
    Fail("unexpected " + ItemString(it) + " in " + std::string(context));
  }

  // Reading past the end keeps returning the final item (EOF or an error).
  // Go's errors carry the line of the newest item taken from the lexer
  // (token[0]), peeked or read, so looking ahead moves it too.
  const Item& Peek() {
    const Item& it = items_[std::min(i_, items_.size() - 1)];
    if (i_ >= frontier_) {
      frontier_ = i_ + 1;
      last_line_ = it.line;
    }
    return it;
  }
  const Item& Next() {
    const Item& it = Peek();
    ++i_;
    if (it.typ == It::kError) Fail(it.val);
    return it;
  }
  const Item& NextNonSpace() {
    while (Peek().typ == It::kSpace) Next();
    return Next();
  }
  const Item& PeekNonSpace() {
    while (Peek().typ == It::kSpace) Next();
    return Peek();
  }
  void Backup() { --i_; }
  NodePtr NewNode(NodeType t, const Item& at) { return std::make_unique<Node>(t, at.pos, at.line); }

  void AddTemplate(const std::string& name, NodePtr list) {
    auto it = tree_->templates.find(name);
    if (it != tree_->templates.end() && !IsEmptyTree(*it->second) && !IsEmptyTree(*list)) {
      Fail("template: multiple definition of template " + GoQuote(name));
    }
    if (it != tree_->templates.end() && IsEmptyTree(*list)) return;
    tree_->templates[name] = std::move(list);
  }

  std::string TemplateName(const Item& token, std::string_view context) {
    if (token.typ != It::kString && token.typ != It::kRawString) Unexpected(token, context);
    return UnquoteOrFail(token.val);
  }

  std::string UnquoteOrFail(const std::string& quoted) {
    auto r = GoUnquote(quoted);
    if (!r.ok()) Fail("invalid syntax");
    return *r;
  }

  void ParseDefinition() {
    const Item& tok = NextNonSpace();
    std::string name = TemplateName(tok, "define clause");
    Expect(It::kRightDelim, "define clause");
    auto saved_vars = vars_;
    vars_ = {"$"};
    auto [list, end] = ItemList();
    if (end->type != NodeType::kEnd) Fail("unexpected {{else}} in define clause");
    vars_ = saved_vars;
    AddTemplate(name, std::move(list));
  }

  const Item& Expect(It t, std::string_view context) {
    const Item& it = NextNonSpace();
    if (it.typ != t) Unexpected(it, context);
    return it;
  }

  std::pair<NodePtr, NodePtr> ItemList() {
    auto list = NewNode(NodeType::kList, PeekNonSpace());
    while (PeekNonSpace().typ != It::kEOF) {
      NodePtr n = TextOrAction();
      if (n->type == NodeType::kEnd || n->type == NodeType::kElse) return {std::move(list), std::move(n)};
      list->nodes.push_back(std::move(n));
    }
    Fail("unexpected EOF");
  }

  NodePtr TextOrAction() {
    const Item& tok = NextNonSpace();
    switch (tok.typ) {
      case It::kText: {
        auto n = NewNode(NodeType::kText, tok);
        n->text = tok.val;
        return n;
      }
      case It::kLeftDelim: return Action();
      default: Unexpected(tok, "input");
    }
  }

  NodePtr Action() {
    if (++depth_ > kMaxDepth) Fail("max expression depth exceeded");
    NodePtr out;
    const Item& tok = NextNonSpace();
    switch (tok.typ) {
      case It::kBlock: out = BlockControl(); break;
      case It::kBreak:
      case It::kContinue: {
        auto n = NewNode(tok.typ == It::kBreak ? NodeType::kBreak : NodeType::kContinue, tok);
        std::string word = tok.typ == It::kBreak ? "break" : "continue";
        const Item& t2 = NextNonSpace();
        if (t2.typ != It::kRightDelim) Unexpected(t2, "{{" + word + "}}");
        if (range_depth_ == 0) Fail("{{" + word + "}} outside {{range}}");
        out = std::move(n);
        break;
      }
      case It::kElse: {
        const Item& p = PeekNonSpace();
        if (p.typ == It::kIf) {
          out = NewNode(NodeType::kElse, p);
        } else {
          out = NewNode(NodeType::kElse, Expect(It::kRightDelim, "else"));
        }
        break;
      }
      case It::kEnd: out = NewNode(NodeType::kEnd, Expect(It::kRightDelim, "end")); break;
      case It::kIf: out = Control(NodeType::kIf, "if", true); break;
      case It::kRange: out = Control(NodeType::kRange, "range", false); break;
      case It::kWith: out = Control(NodeType::kWith, "with", false); break;
      case It::kTemplate: {
        const Item& name_tok = NextNonSpace();
        auto n = NewNode(NodeType::kTemplate, name_tok);
        n->str = TemplateName(name_tok, "template clause");
        if (NextNonSpace().typ != It::kRightDelim) {
          Backup();
          n->pipe = Pipeline("template clause", It::kRightDelim);
        }
        out = std::move(n);
        break;
      }
      default: {
        Backup();
        auto n = NewNode(NodeType::kAction, Peek());
        n->pipe = Pipeline("command", It::kRightDelim);
        out = std::move(n);
      }
    }
    --depth_;
    return out;
  }

  NodePtr BlockControl() {
    const Item& name_tok = NextNonSpace();
    auto n = NewNode(NodeType::kTemplate, name_tok);
    n->str = TemplateName(name_tok, "block clause");
    n->pipe = Pipeline("block clause", It::kRightDelim);
    auto saved_vars = vars_;
    vars_ = {"$"};
    auto [list, end] = ItemList();
    if (end->type != NodeType::kEnd) Fail("unexpected {{else}} in block clause");
    vars_ = saved_vars;
    AddTemplate(n->str, std::move(list));
    return n;
  }

  NodePtr Control(NodeType type, const std::string& context, bool allow_else_if) {
    size_t nvars = vars_.size();
    auto pipe = Pipeline(context, It::kRightDelim);
    auto n = std::make_unique<Node>(type, pipe->pos, pipe->line);
    n->pipe = std::move(pipe);
    if (type == NodeType::kRange) ++range_depth_;
    auto [list, next] = ItemList();
    if (type == NodeType::kRange) --range_depth_;
    n->list = std::move(list);
    if (next->type == NodeType::kElse) {
      if (allow_else_if && Peek().typ == It::kIf) {
        Next();
        auto else_list = std::make_unique<Node>(NodeType::kList, next->pos, next->line);
        else_list->nodes.push_back(Control(NodeType::kIf, "if", true));
        n->else_list = std::move(else_list);
      } else {
        auto [else_list, end] = ItemList();
        if (end->type != NodeType::kEnd) Fail("expected end; found {{else}}");
        n->else_list = std::move(else_list);
      }
    }
    vars_.resize(nvars);
    return n;
  }

  NodePtr Pipeline(const std::string& context, It end) {
    if (++depth_ > kMaxDepth) Fail("max expression depth exceeded");
    auto pipe = NewNode(NodeType::kPipe, PeekNonSpace());
    while (PeekNonSpace().typ == It::kVariable) {
      size_t save = i_;
      const Item& v = Next();
      const Item& after = Peek();
      const Item& next = PeekNonSpace();
      if (next.typ == It::kAssign || next.typ == It::kDeclare) {
        pipe->is_assign = next.typ == It::kAssign;
        NextNonSpace();
        pipe->decl.push_back(NewVariable(v));
        vars_.push_back(v.val);
        break;
      }
      if (next.typ == It::kChar && next.val == ",") {
        NextNonSpace();
        pipe->decl.push_back(NewVariable(v));
        vars_.push_back(v.val);
        if (context == "range" && pipe->decl.size() < 2) {
          It t = PeekNonSpace().typ;
          if (t == It::kVariable || t == It::kRightDelim || t == It::kRightParen) continue;
          Fail("range can only initialize variables");
        }
        Fail("too many declarations in " + context);
      }
      (void)after;
      i_ = save;
      break;
    }
    while (true) {
      const Item& tok = NextNonSpace();
      if (tok.typ == end) {
        if (pipe->cmds.empty()) Fail("missing value for " + context);
        for (size_t k = 1; k < pipe->cmds.size(); ++k) {
          switch (pipe->cmds[k]->args[0]->type) {
            case NodeType::kBool: case NodeType::kDot: case NodeType::kNil: case NodeType::kNumber:
            case NodeType::kString:
              Fail("non executable command in pipeline stage " + std::to_string(k + 1));
            default: break;
          }
        }
        --depth_;
        return pipe;
      }
      switch (tok.typ) {
        case It::kBool: case It::kCharConstant: case It::kDot: case It::kField: case It::kIdentifier:
        case It::kNumber: case It::kNil: case It::kRawString: case It::kString: case It::kVariable:
        case It::kLeftParen:
          Backup();
          pipe->cmds.push_back(Command());
          break;
        default: Unexpected(tok, context);
      }
    }
  }

  NodePtr Command() {
    auto cmd = NewNode(NodeType::kCommand, PeekNonSpace());
    while (true) {
      PeekNonSpace();
      if (NodePtr op = Operand()) cmd->args.push_back(std::move(op));
      const Item& tok = Next();
      if (tok.typ == It::kSpace) continue;
      if (tok.typ == It::kRightDelim || tok.typ == It::kRightParen) {
        Backup();
      } else if (tok.typ != It::kPipe) {
        Unexpected(tok, "operand");
      }
      break;
    }
    if (cmd->args.empty()) Fail("empty command");
    return cmd;
  }

  NodePtr NewVariable(const Item& v) {
    auto n = NewNode(NodeType::kVariable, v);
    n->idents = {v.val};
    return n;
  }

  NodePtr Operand() {
    NodePtr node = Term();
    if (!node) return nullptr;
    if (Peek().typ == It::kField) {
      const Item& first = Peek();
      std::vector<std::string> fields;
      int pos = first.pos, line = first.line;
      while (Peek().typ == It::kField) fields.push_back(Next().val.substr(1));
      switch (node->type) {
        case NodeType::kField:
        case NodeType::kVariable: {
          auto n = std::make_unique<Node>(node->type, pos, line);
          n->idents = node->idents;
          n->idents.insert(n->idents.end(), fields.begin(), fields.end());
          return n;
        }
        case NodeType::kBool: case NodeType::kString: case NodeType::kNumber: case NodeType::kNil:
        case NodeType::kDot:
          Fail("unexpected . after term " + GoQuote(node->String()));
        default: {
          auto chain = std::make_unique<Node>(NodeType::kChain, pos, line);
          chain->idents = std::move(fields);
          chain->pipe = std::move(node);
          return chain;
        }
      }
    }
    return node;
  }

  NodePtr Term() {
    const Item& tok = NextNonSpace();
    switch (tok.typ) {
      case It::kIdentifier: {
        if (!HasFunction(tok.val, funcs_)) Fail("function " + GoQuote(tok.val) + " not defined");
        auto n = NewNode(NodeType::kIdentifier, tok);
        n->text = tok.val;
        return n;
      }
      case It::kDot: return NewNode(NodeType::kDot, tok);
      case It::kNil: return NewNode(NodeType::kNil, tok);
      case It::kVariable: {
        bool known = false;
        for (const auto& v : vars_) known = known || v == tok.val;
        if (!known) Fail("undefined variable " + GoQuote(tok.val));
        return NewVariable(tok);
      }
      case It::kField: {
        auto n = NewNode(NodeType::kField, tok);
        n->idents = {tok.val.substr(1)};
        return n;
      }
      case It::kBool: {
        auto n = NewNode(NodeType::kBool, tok);
        n->boolean = tok.val == "true";
        return n;
      }
      case It::kCharConstant:
      case It::kNumber: return Number(tok);
      case It::kLeftParen: {
        auto pipe = Pipeline("parenthesized pipeline", It::kRightParen);
        return pipe;
      }
      case It::kString:
      case It::kRawString: {
        auto n = NewNode(NodeType::kString, tok);
        n->text = tok.val;
        n->str = UnquoteOrFail(tok.val);
        return n;
      }
      default: Backup(); return nullptr;
    }
  }

  NodePtr Number(const Item& tok) {
    auto n = NewNode(NodeType::kNumber, tok);
    n->text = tok.val;
    const std::string& text = tok.val;
    if (tok.typ == It::kCharConstant) {
      auto r = GoUnquote(text);
      uint32_t rune = 0;
      size_t len = 0;
      if (r.ok() && !r->empty()) {
        unsigned char c = static_cast<unsigned char>((*r)[0]);
        int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
        rune = extra ? (c & (0x3F >> extra)) : c;
        for (int k = 1; k <= extra && k < static_cast<int>(r->size()); ++k) {
          rune = (rune << 6) | (static_cast<unsigned char>((*r)[k]) & 0x3F);
        }
        len = static_cast<size_t>(extra + 1);
      }
      if (!r.ok() || r->size() != len || len == 0) Fail("malformed character constant: " + text);
      n->is_int = n->is_uint = n->is_float = true;
      n->int64 = rune;
      n->uint64 = rune;
      n->float64 = rune;
      return n;
    }
    if (!text.empty() && text.back() == 'i') Fail("complex constants are not supported: " + GoQuote(text));
    uint64_t u = 0;
    int64_t i = 0;
    if (ParseGoInt(text, false, nullptr, &u)) n->is_uint = true, n->uint64 = u;
    if (ParseGoInt(text, true, &i, nullptr)) {
      n->is_int = true;
      n->int64 = i;
      if (i == 0) n->is_uint = true, n->uint64 = 0;
    }
    if (n->is_int) {
      n->is_float = true;
      n->float64 = static_cast<double>(n->int64);
    } else if (n->is_uint) {
      n->is_float = true;
      n->float64 = static_cast<double>(n->uint64);
    } else {
      std::string clean;
      for (char c : text) {
        if (c != '_') clean += c;
      }
      char* end = nullptr;
      errno = 0;
      double f = std::strtod(clean.c_str(), &end);
      bool ok = !clean.empty() && end == clean.c_str() + clean.size() && errno != ERANGE &&
                clean.find_first_of("nN") == std::string::npos;
      if (ok) {
        if (text.find_first_of(".eEpP") == std::string::npos) Fail("integer overflow: " + GoQuote(text));
        n->is_float = true;
        n->float64 = f;
        if (std::isfinite(f) && std::trunc(f) == f) {
          if (f >= -9.2233720368547758e18 && f < 9.2233720368547758e18) n->is_int = true, n->int64 = static_cast<int64_t>(f);
          if (f >= 0 && f < 1.8446744073709552e19) n->is_uint = true, n->uint64 = static_cast<uint64_t>(f);
        }
      }
    }
    if (!n->is_int && !n->is_uint && !n->is_float) Fail("illegal number syntax: " + GoQuote(text));
    return n;
  }

  static constexpr int kMaxDepth = 1000;
  std::string name_;
  FuncSet funcs_;
  Tree* tree_;
  std::vector<Item> items_;
  size_t i_ = 0;
  int last_line_ = 1;      // line of items_[frontier_ - 1]
  size_t frontier_ = 0;    // items looked at so far
  std::vector<std::string> vars_;
  int range_depth_ = 0;
  int depth_ = 0;
};

void WriteNode(const Node& n, std::string* out);

void WriteArg(const Node& a, std::string* out) {
  if (a.type == NodeType::kPipe) {
    *out += '(';
    WriteNode(a, out);
    *out += ')';
  } else {
    WriteNode(a, out);
  }
}

void WriteNode(const Node& n, std::string* out) {
  switch (n.type) {
    case NodeType::kText: *out += GoQuote(n.text); break;
    case NodeType::kAction: *out += "{{"; WriteNode(*n.pipe, out); *out += "}}"; break;
    case NodeType::kIf: case NodeType::kRange: case NodeType::kWith: {
      *out += n.type == NodeType::kIf ? "{{if " : n.type == NodeType::kRange ? "{{range " : "{{with ";
      WriteNode(*n.pipe, out);
      *out += "}}";
      WriteNode(*n.list, out);
      if (n.else_list) {
        *out += "{{else}}";
        WriteNode(*n.else_list, out);
      }
      *out += "{{end}}";
      break;
    }
    case NodeType::kTemplate:
      *out += "{{template " + GoQuote(n.str);
      if (n.pipe) {
        *out += ' ';
        WriteNode(*n.pipe, out);
      }
      *out += "}}";
      break;
    case NodeType::kBreak: *out += "{{break}}"; break;
    case NodeType::kContinue: *out += "{{continue}}"; break;
    case NodeType::kList:
      for (const auto& c : n.nodes) WriteNode(*c, out);
      break;
    case NodeType::kPipe:
      for (size_t i = 0; i < n.decl.size(); ++i) {
        if (i > 0) *out += ", ";
        WriteNode(*n.decl[i], out);
      }
      if (!n.decl.empty()) *out += " := ";
      for (size_t i = 0; i < n.cmds.size(); ++i) {
        if (i > 0) *out += " | ";
        WriteNode(*n.cmds[i], out);
      }
      break;
    case NodeType::kCommand:
      for (size_t i = 0; i < n.args.size(); ++i) {
        if (i > 0) *out += ' ';
        WriteArg(*n.args[i], out);
      }
      break;
    case NodeType::kIdentifier: *out += n.text; break;
    case NodeType::kField:
      for (const auto& f : n.idents) *out += "." + f;
      break;
    case NodeType::kVariable:
      for (size_t i = 0; i < n.idents.size(); ++i) *out += (i ? "." : "") + n.idents[i];
      break;
    case NodeType::kChain:
      WriteArg(*n.pipe, out);
      for (const auto& f : n.idents) *out += "." + f;
      break;
    case NodeType::kDot: *out += '.'; break;
    case NodeType::kNil: *out += "nil"; break;
    case NodeType::kBool: *out += n.boolean ? "true" : "false"; break;
    case NodeType::kNumber: case NodeType::kString: *out += n.text; break;
    case NodeType::kComment: break;
    case NodeType::kEnd: *out += "{{end}}"; break;
    case NodeType::kElse: *out += "{{else}}"; break;
  }
}

}  // namespace

std::string Node::String() const {
  std::string out;
  WriteNode(*this, &out);
  return out;
}

bool IsEmptyTree(const Node& n) {
  switch (n.type) {
    case NodeType::kList:
      for (const auto& c : n.nodes) {
        if (!IsEmptyTree(*c)) return false;
      }
      return true;
    case NodeType::kText:
      return std::all_of(n.text.begin(), n.text.end(), [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); });
    case NodeType::kComment: return true;
    default: return false;
  }
}

Status ParseTree(std::string_view name, std::string_view text, FuncSet funcs, Tree* tree) {
  tree->name = std::string(name);
  tree->text = std::string(text);
  try {
    Parser p(name, tree->text, funcs, tree);
    p.Parse();
  } catch (const ParseFail& f) {
    return Status::InvalidArgument(f.msg);
  }
  return Status::OK();
}

}  // namespace trainwatch::tmpl
