#pragma once
// Label matchers `name op "value"` for =, !=, =~, !~. Regexes use RE2 and are
// fully anchored, and `.` matches newline, as Prometheus 3.x.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace re2 {
class RE2;
}

namespace trainwatch::model {

enum class MatchType { kEqual, kNotEqual, kRegex, kNotRegex };

// Immutable after construction; safe to share between threads.
class Matcher {
 public:
  // Fails with InvalidArgument when a regex does not compile.
  static Result<Matcher> Make(MatchType type, std::string name, std::string value);

  MatchType type() const { return type_; }
  const std::string& name() const { return name_; }
  const std::string& value() const { return value_; }

  bool Matches(std::string_view v) const;
  // True when the matcher selects series lacking the label (it matches "").
  bool MatchesEmpty() const { return matches_empty_; }
  // For =~ whose regex is a plain alternation of literals ("a|b|c"), the literals; else empty.
  const std::vector<std::string>& SetMatches() const { return set_matches_; }
  std::string ToString() const;  // name="value", name=~"re"

 private:
  Matcher() = default;
  MatchType type_ = MatchType::kEqual;
  std::string name_, value_;
  std::shared_ptr<const re2::RE2> re_;
  std::vector<std::string> set_matches_;
  bool matches_empty_ = false;
};

using Matchers = std::vector<Matcher>;

}  // namespace trainwatch::model
