#pragma once
// The log query language (docs/logs.md):
//
//   {project="x", run=~"a.*"} level=ERROR status>=500 CUDA "out of memory" -oom |~ "step \\d+"
//
// An optional stream selector in PromQL syntax, then filters that must all
// hold: comparisons `name op value` (op = != > >= < <= =~ !~; `level`
// compares canonical levels and orders them, `message` the message, any
// other name the line's field or else its stream label), full-text terms and
// "phrases" (FTS5 tokens: letters and digits, case-insensitive; `term*` is a
// prefix; a leading `-` negates), and line filters |= "text", != "text"
// (substring), |~ "re", !~ "re" (RE2, unanchored). `and` between filters is
// allowed and ignored; `or` separates alternatives (binding looser than
// `and`: `a b or c` is (a and b) or c); parentheses are not supported.
// Immutable after Parse; safe to share between threads.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "logs/record.h"
#include "model/matcher.h"

namespace re2 {
class RE2;
}

namespace trainwatch::logs {

enum class CmpOp { kEq, kNe, kGt, kGe, kLt, kLe, kRe, kNre };

struct FieldFilter {
  std::string name;
  CmpOp op = CmpOp::kEq;
  std::string value;        // as written (levels: canonical)
  bool numeric = false;     // value parses as a number
  double number = 0;
  std::shared_ptr<const re2::RE2> re;  // for kRe/kNre, fully anchored
  // True when `v` (a label or field value as text; `is_number` for JSON numbers) satisfies the filter.
  bool Test(std::string_view v, bool is_number) const;
};

struct TextFilter {
  std::vector<std::string> tokens;  // lower-case FTS tokens, in order (a phrase when > 1)
  bool prefix = false;              // the last token is a prefix
  bool negate = false;
};

struct LineFilter {
  bool regex = false;
  bool negate = false;
  std::string text;
  std::shared_ptr<const re2::RE2> re;
};

// A line as the store checks it, without copying it into a Record.
struct LineView {
  const model::Labels* labels = nullptr;  // the stream
  std::string_view level, message, fields;
};

struct Query {
  model::Matchers matchers;          // stream selector
  // The first alternative's filters:
  std::vector<FieldFilter> levels;   // comparisons on `level`
  std::vector<FieldFilter> fields;   // other comparisons (incl. message)
  std::vector<TextFilter> texts;
  std::vector<LineFilter> lines;
  // Further alternatives (`or`), filters only (the selector is shared).
  std::vector<Query> alternatives;

  // InvalidArgument naming the position and the problem.
  static Result<Query> Parse(std::string_view q);

  // Whether the stream's labels satisfy the selector.
  bool MatchesStream(const model::Labels& labels) const;
  // Whether a record satisfies the selector and every filter of one alternative.
  bool Matches(const Record& r) const;
  bool Matches(const LineView& l) const;
  // This query (its first alternative) followed by the other alternatives.
  std::vector<const Query*> Alternatives() const;
  // Of one alternative (not the selector or the other alternatives):
  // whether its `level` filters hold for a level; whether all its filters hold.
  bool MatchesLevel(std::string_view level) const;
  bool MatchesFilters(const LineView& l) const;
  // Whether it looks at the message or fields (else time, stream and level decide).
  bool NeedsBody() const { return !fields.empty() || !lines.empty() || !texts.empty(); }
  // An FTS5 expression every matching message satisfies token by token: the
  // tokens of its positive text filters ANDed (phrases as their tokens); "" when none.
  std::string FtsTokens() const;
};

// Splits text into FTS-compatible tokens (ASCII letters and digits lower-cased, bytes >= 0x80 kept).
void Tokenize(std::string_view text, std::vector<std::string>* out);

}  // namespace trainwatch::logs
