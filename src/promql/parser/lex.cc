#include "promql/parser/lex.h"

#include <cctype>
#include <string>

namespace trainwatch::promql::parser {

namespace {

bool IsAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsAlpha(c) || IsDigit(c); }

std::string Lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

struct Keyword {
  const char* word;
  Tok tok;
};
constexpr Keyword kKeywords[] = {
    {"and", Tok::kLand},          {"or", Tok::kLor},           {"unless", Tok::kLunless},
    {"atan2", Tok::kAtan2},       {"by", Tok::kBy},            {"without", Tok::kWithout},
    {"on", Tok::kOn},             {"ignoring", Tok::kIgnoring}, {"group_left", Tok::kGroupLeft},
    {"group_right", Tok::kGroupRight}, {"bool", Tok::kBool},   {"offset", Tok::kOffset},
    {"start", Tok::kStart},       {"end", Tok::kEnd},
    {"sum", Tok::kAggregator},    {"avg", Tok::kAggregator},   {"count", Tok::kAggregator},
    {"min", Tok::kAggregator},    {"max", Tok::kAggregator},   {"group", Tok::kAggregator},
    {"stddev", Tok::kAggregator}, {"stdvar", Tok::kAggregator}, {"topk", Tok::kAggregator},
    {"bottomk", Tok::kAggregator}, {"count_values", Tok::kAggregator}, {"quantile", Tok::kAggregator},
    {"limitk", Tok::kAggregator}, {"limit_ratio", Tok::kAggregator},
};

// Length of a duration like 1h30m at s, or 0.
size_t ScanDuration(std::string_view s) {
  size_t i = 0;
  bool any = false;
  while (i < s.size() && IsDigit(s[i])) {
    size_t j = i;
    while (j < s.size() && IsDigit(s[j])) ++j;
    if (j >= s.size()) return 0;
    size_t unit = 0;
    if (s.compare(j, 2, "ms") == 0) {
      unit = 2;
    } else if (std::string_view("smhdwy").find(s[j]) != std::string_view::npos) {
      unit = 1;
    } else {
      return any ? i : 0;
    }
    i = j + unit;
    any = true;
  }
  return any ? i : 0;
}

}  // namespace

const char* TokDesc(Tok t) {
  switch (t) {
    case Tok::kEOF: return "end of input";
    case Tok::kError: return "error";
    case Tok::kIdentifier: return "identifier";
    case Tok::kMetricIdentifier: return "metric identifier";
    case Tok::kNumber: return "number";
    case Tok::kDuration: return "duration";
    case Tok::kString: return "string";
    case Tok::kLeftParen: return "(";
    case Tok::kRightParen: return "right parenthesis";
    case Tok::kLeftBrace: return "left brace";
    case Tok::kRightBrace: return "right brace";
    case Tok::kLeftBracket: return "left bracket";
    case Tok::kRightBracket: return "right bracket";
    case Tok::kComma: return "comma";
    case Tok::kColon: return "colon";
    case Tok::kAt: return "@";
    case Tok::kAssign: return "=";
    case Tok::kAdd: return "+";
    case Tok::kSub: return "-";
    case Tok::kMul: return "*";
    case Tok::kDiv: return "/";
    case Tok::kMod: return "%";
    case Tok::kPow: return "^";
    case Tok::kEql: return "==";
    case Tok::kNeq: return "!=";
    case Tok::kLss: return "<";
    case Tok::kTrimUpper: return "</";
    case Tok::kTrimLower: return ">/";
    case Tok::kLte: return "<=";
    case Tok::kGtr: return ">";
    case Tok::kGte: return ">=";
    case Tok::kEqlRegex: return "=~";
    case Tok::kNeqRegex: return "!~";
    case Tok::kLand: return "and";
    case Tok::kLor: return "or";
    case Tok::kLunless: return "unless";
    case Tok::kAtan2: return "atan2";
    case Tok::kBy: return "by";
    case Tok::kWithout: return "without";
    case Tok::kOn: return "on";
    case Tok::kIgnoring: return "ignoring";
    case Tok::kGroupLeft: return "group_left";
    case Tok::kGroupRight: return "group_right";
    case Tok::kBool: return "bool";
    case Tok::kOffset: return "offset";
    case Tok::kStart: return "start";
    case Tok::kEnd: return "end";
    case Tok::kAggregator: return "aggregation";
  }
  return "?";
}

std::vector<Token> Lex(std::string_view in, std::string* error) {
  std::vector<Token> out;
  size_t i = 0;
  int brace_depth = 0;
  auto emit = [&](Tok k, size_t start, size_t end) {
    out.push_back({k, static_cast<int>(start), in.substr(start, end - start)});
  };
  auto fail = [&](size_t pos, std::string msg) {
    *error = std::move(msg);
    out.push_back({Tok::kError, static_cast<int>(pos), in.substr(pos, 0)});
    return out;
  };
  while (i < in.size()) {
    char c = in[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < in.size() && in[i] != '\n') ++i;
      continue;
    }
    size_t start = i;
    if (IsDigit(c) || (c == '.' && i + 1 < in.size() && IsDigit(in[i + 1]))) {
      size_t d = ScanDuration(in.substr(i));
      if (d > 0 && (i + d >= in.size() || !IsAlnum(in[i + d]))) {
        emit(Tok::kDuration, i, i + d);
        i += d;
        continue;
      }
      if (c == '0' && i + 1 < in.size() && (in[i + 1] == 'x' || in[i + 1] == 'X')) {
        i += 2;
        while (i < in.size() && std::isxdigit(static_cast<unsigned char>(in[i]))) ++i;
      } else {
        while (i < in.size() && IsDigit(in[i])) ++i;
        if (i < in.size() && in[i] == '.') {
          ++i;
          while (i < in.size() && IsDigit(in[i])) ++i;
        }
        if (i < in.size() && (in[i] == 'e' || in[i] == 'E')) {
          size_t j = i + 1;
          if (j < in.size() && (in[j] == '+' || in[j] == '-')) ++j;
          if (j < in.size() && IsDigit(in[j])) {
            i = j;
            while (i < in.size() && IsDigit(in[i])) ++i;
          }
        }
      }
      if (i < in.size() && (IsAlnum(in[i]) || in[i] == '.')) {
        return fail(start, "bad number or duration syntax: \"" + std::string(in.substr(start, i + 1 - start)) + "\"");
      }
      emit(Tok::kNumber, start, i);
      continue;
    }
    // Inside braces ':' starts nothing (label names have none): it falls
    // through to the error below instead of an empty identifier that would
    // never advance (found by fuzz/promql_fuzz.cc: `up{:a="1"}` looped forever).
    if (IsAlpha(c) || (c == ':' && brace_depth == 0)) {
      if (c == ':') {
        // A colon is part of metric names only when followed by identifier
        // characters in a name position; at top level treat ':' alone as kColon
        // when it comes inside brackets (subquery). Decide: identifier chars
        // before it mean a metric name, handled below.
        emit(Tok::kColon, i, i + 1);
        ++i;
        continue;
      }
      bool has_colon = false;
      while (i < in.size() && (IsAlnum(in[i]) || (in[i] == ':' && brace_depth == 0))) {
        if (in[i] == ':') {
          // "foo[5m:1m]" never reaches here (digits first); but "rate(x[5m:])" fine.
          has_colon = true;
        }
        ++i;
      }
      std::string_view word = in.substr(start, i - start);
      if (has_colon) {
        emit(Tok::kMetricIdentifier, start, i);
        continue;
      }
      std::string lw = Lower(word);
      if (lw == "inf" || lw == "nan") {
        emit(Tok::kNumber, start, i);
        continue;
      }
      Tok kind = Tok::kIdentifier;
      if (brace_depth == 0) {
        for (const auto& kw : kKeywords) {
          if (lw == kw.word) {
            kind = kw.tok;
            break;
          }
        }
      }
      emit(kind, start, i);
      continue;
    }
    if (c == '"' || c == '\'' || c == '`') {
      ++i;
      while (i < in.size() && in[i] != c) {
        if (in[i] == '\\' && c != '`') {
          ++i;
        }
        if (i < in.size() && in[i] == '\n' && c != '`') return fail(start, "unterminated quoted string");
        ++i;
      }
      if (i >= in.size()) return fail(start, c == '`' ? "unterminated raw string" : "unterminated quoted string");
      ++i;
      emit(Tok::kString, start, i);
      continue;
    }
    auto next = [&](char n) { return i + 1 < in.size() && in[i + 1] == n; };
    switch (c) {
      case '(': emit(Tok::kLeftParen, i, i + 1); ++i; break;
      case ')': emit(Tok::kRightParen, i, i + 1); ++i; break;
      case '{': emit(Tok::kLeftBrace, i, i + 1); ++i; ++brace_depth; break;
      case '}': emit(Tok::kRightBrace, i, i + 1); ++i; if (brace_depth > 0) --brace_depth; break;
      case '[': emit(Tok::kLeftBracket, i, i + 1); ++i; break;
      case ']': emit(Tok::kRightBracket, i, i + 1); ++i; break;
      case ',': emit(Tok::kComma, i, i + 1); ++i; break;
      case '@': emit(Tok::kAt, i, i + 1); ++i; break;
      case '+': emit(Tok::kAdd, i, i + 1); ++i; break;
      case '-': emit(Tok::kSub, i, i + 1); ++i; break;
      case '*': emit(Tok::kMul, i, i + 1); ++i; break;
      case '/': emit(Tok::kDiv, i, i + 1); ++i; break;
      case '%': emit(Tok::kMod, i, i + 1); ++i; break;
      case '^': emit(Tok::kPow, i, i + 1); ++i; break;
      case '=':
        if (next('=')) { emit(Tok::kEql, i, i + 2); i += 2; }
        else if (next('~')) { emit(Tok::kEqlRegex, i, i + 2); i += 2; }
        else { emit(Tok::kAssign, i, i + 1); ++i; }
        break;
      case '!':
        if (next('=')) { emit(Tok::kNeq, i, i + 2); i += 2; }
        else if (next('~')) { emit(Tok::kNeqRegex, i, i + 2); i += 2; }
        else return fail(i, "unexpected character after '!': '" + std::string(1, i + 1 < in.size() ? in[i + 1] : ' ') + "'");
        break;
      case '<':
        if (next('=')) { emit(Tok::kLte, i, i + 2); i += 2; }
        else if (next('/')) { emit(Tok::kTrimUpper, i, i + 2); i += 2; }
        else { emit(Tok::kLss, i, i + 1); ++i; }
        break;
      case '>':
        if (next('=')) { emit(Tok::kGte, i, i + 2); i += 2; }
        else if (next('/')) { emit(Tok::kTrimLower, i, i + 2); i += 2; }
        else { emit(Tok::kGtr, i, i + 1); ++i; }
        break;
      default:
        return fail(i, "unexpected character: '" + std::string(1, c) + "'");
    }
  }
  emit(Tok::kEOF, in.size(), in.size());
  return out;
}

}  // namespace trainwatch::promql::parser
