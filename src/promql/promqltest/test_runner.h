#pragma once
// Runner for Prometheus's promqltest `.test` scripts (format described in
// shared/conformance/promql/SOURCE.md) against our Engine and TestStorage.

#include <string>
#include <string_view>
#include <vector>

#include "promql/engine.h"

namespace trainwatch::promql::promqltest {

struct FileResult {
  std::string name;
  int passed = 0;
  int failed = 0;
  std::vector<std::string> failures;  // "line N: expr: reason"
};

FileResult RunScript(std::string_view name, std::string_view content);
Result<FileResult> RunFile(const std::string& path);

}  // namespace trainwatch::promql::promqltest
