#pragma once
// Run filter expressions (docs/runs-api.md): comparisons joined by and / or
// / not and parentheses, e.g.
//   config.lr > 1e-4 and tags contains "llama" and metrics.loss < 0.5
// A comparison whose field is absent or of another type than the literal is
// false (so `!=` is true there: `a != b` is `not (a = b)`).

#include <memory>
#include <string_view>

#include "base/status.h"
#include "runs/run.h"

namespace trainwatch::runs {

// Immutable after Parse; safe to share between threads.
class Filter {
 public:
  struct Node;
  // Parses `expr`; an empty or blank expression matches every run. Errors
  // are InvalidArgument "filter: position N: ..." (N 1-based, in bytes).
  static Result<Filter> Parse(std::string_view expr);
  bool Matches(const Run& run) const;

 private:
  std::shared_ptr<const Node> root_;  // null: match all
};

}  // namespace trainwatch::runs
