#pragma once
// `trainwatch check config FILE...`: validates alertmanager.yml files like
// `amtool check-config` (0.25): "Checking 'FILE'  SUCCESS" and what was found,
// or "Checking 'FILE'  FAILED: <error naming line and field>". A file
// without `route:`/`receivers:` is checked as a trainwatch/prometheus.yml
// config instead (as `promtool check config` reports it). Exit code 0 when
// every file is valid, 1 otherwise.

#include <string>
#include <vector>

namespace trainwatch::app {

int RunCheckConfig(const std::vector<std::string>& files);

}  // namespace trainwatch::app
