#include "model/matcher.h"

#include <re2/re2.h>

namespace trainwatch::model {

// Literal alternations like "a|b|c" (no metacharacters) are matched by set
// lookup instead of running the regex against every value.
static std::vector<std::string> LiteralAlternatives(const std::string& re) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : re) {
    if (c == '|') {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    if (std::string_view(".*+?()[]{}^$\\").find(c) != std::string_view::npos) return {};
    cur += c;
  }
  out.push_back(cur);
  return out;
}

Result<Matcher> Matcher::Make(MatchType type, std::string name, std::string value) {
  Matcher m;
  m.type_ = type;
  m.name_ = std::move(name);
  m.value_ = std::move(value);
  if (type == MatchType::kRegex || type == MatchType::kNotRegex) {
    RE2::Options opts;
    opts.set_dot_nl(true);
    opts.set_log_errors(false);
    auto re = std::make_shared<RE2>("^(?:" + m.value_ + ")$", opts);
    if (!re->ok()) {
      return Status::InvalidArgument("invalid regular expression \"" + m.value_ + "\": " + re->error());
    }
    m.re_ = std::move(re);
    m.set_matches_ = LiteralAlternatives(m.value_);
  }
  m.matches_empty_ = m.Matches("");
  return m;
}

bool Matcher::Matches(std::string_view v) const {
  switch (type_) {
    case MatchType::kEqual: return v == value_;
    case MatchType::kNotEqual: return v != value_;
    case MatchType::kRegex: return RE2::FullMatch(v, *re_);
    case MatchType::kNotRegex: return !RE2::FullMatch(v, *re_);
  }
  return false;
}

std::string Matcher::ToString() const {
  static const char* kOps[] = {"=", "!=", "=~", "!~"};
  std::string out = name_ + kOps[static_cast<int>(type_)] + "\"";
  for (char c : value_) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

}  // namespace trainwatch::model
