#include "app/check_cmd.h"

#include <iostream>

#include "rules/rule_file.h"

namespace trainwatch::app {

int RunCheckRules(const CheckRulesOptions& o) {
  if (o.lint != "all" && o.lint != "duplicate-rules" && o.lint != "none") {
    std::cerr << "trainwatch: --lint: invalid value \"" << o.lint << "\" (all, duplicate-rules or none)\n";
    return 2;
  }
  bool failed = false, lint_failed = false;
  for (const auto& path : o.files) {
    std::cout << "Checking " << path << "\n";
    std::vector<std::string> errs;
    rules::RuleFile f = rules::LoadRuleFile(path, &errs);
    if (!errs.empty()) {
      std::cout << std::flush;
      std::cerr << "  FAILED:\n";
      for (const auto& e : errs) std::cerr << e << "\n";
      std::cerr << std::flush;
      std::cout << "\n";
      failed = true;
      continue;
    }
    if (o.lint != "none") {
      auto dups = rules::FindDuplicateRecordingRules(f);
      if (!dups.empty()) {
        std::cout << std::flush;
        std::cerr << "  FAILED:\nlint error " << dups.size() << " duplicate rule(s) found.\n";
        for (const auto& d : dups) std::cerr << d;
        std::cerr << "Might cause inconsistency while recording expressions\n" << std::flush;
        std::cout << "\n";
        lint_failed = true;
        continue;
      }
    }
    std::cout << "  SUCCESS: " << f.RuleCount() << " rules found\n\n";
  }
  if (failed) return 1;
  if (lint_failed && o.lint_fatal) return 3;
  return 0;
}

}  // namespace trainwatch::app
