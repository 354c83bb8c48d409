#pragma once
// `trainwatch check rules FILE...`: validates Prometheus rule files like
// `promtool check rules` (2.42): "Checking FILE" then "  SUCCESS: N rules
// found" on stdout, or "  FAILED:" and one error per line on stderr.
// Exit code 0 when every file is valid, 1 otherwise; duplicate recording
// rules are reported as a lint ("--lint=none" silences it, "--lint-fatal"
// makes it exit 3), as promtool does.

#include <string>
#include <vector>

namespace trainwatch::app {

struct CheckRulesOptions {
  std::vector<std::string> files;
  std::string lint = "duplicate-rules";  // all, duplicate-rules or none
  bool lint_fatal = false;
};

// Runs the check; returns the process exit code.
int RunCheckRules(const CheckRulesOptions& o);

}  // namespace trainwatch::app
