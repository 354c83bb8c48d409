#pragma once
// PromQL lexer: turns a query into tokens with byte positions.

#include <string>
#include <string_view>
#include <vector>

namespace trainwatch::promql::parser {

enum class Tok {
  kEOF, kError,
  kIdentifier,        // foo (also keywords are separate kinds below)
  kMetricIdentifier,  // foo:bar
  kNumber, kDuration, kString,
  kLeftParen, kRightParen, kLeftBrace, kRightBrace, kLeftBracket, kRightBracket,
  kComma, kColon, kAt, kAssign,  // '=' in matchers
  // operators
  kAdd, kSub, kMul, kDiv, kMod, kPow, kEql, kNeq, kLss, kLte, kGtr, kGte, kTrimUpper, kTrimLower, kEqlRegex, kNeqRegex,
  kLand, kLor, kLunless, kAtan2,
  // keywords
  kBy, kWithout, kOn, kIgnoring, kGroupLeft, kGroupRight, kBool, kOffset, kStart, kEnd,
  kAggregator,  // sum, avg, ... (value holds the name)
};

struct Token {
  Tok kind;
  int pos;  // byte offset
  std::string_view text;
};

const char* TokDesc(Tok t);

// Lexes the whole input. On a lexing error the last token is kError with the
// message in `error`.
std::vector<Token> Lex(std::string_view input, std::string* error);

}  // namespace trainwatch::promql::parser
