#pragma once
// The `trainwatch.logs` section of the config file (docs/logs.md):
//
//   trainwatch:
//     logs:
//       patterns: {disk_full: 'No space left on device'}   # added to / replacing the defaults by name
//       files:
//         - paths: ['/var/log/train/*.log']
//           labels: {project: vision, source: file}
//           json: true                      # decode JSON lines
//           multiline: {start: '^\d{4}-'}   # default: Python tracebacks joined
//       forward:                            # the store is the disk-backed queue
//         - {type: elasticsearch, url: 'http://es:9200', index: trainwatch-logs}
//         - {type: loki, url: 'http://loki:3100'}
//
// Errors name the field ("trainwatch.logs.files[0].paths: ...").

#include <optional>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "base/status.h"
#include "logs/forward.h"
#include "logs/metrics.h"
#include "logs/tailer.h"

namespace trainwatch::app {

struct LogsConfig {
  // The defaults plus configured ones: the defaults alone with no
  // trainwatch.logs section, or no config file.
  std::vector<logs::Pattern> patterns = logs::DefaultPatterns();
  std::vector<logs::TailInput> files;
  std::vector<logs::ForwardTarget> forward;  // state_path left empty
};

Status ParseLogsConfig(const YAML::Node& n, LogsConfig* out);

}  // namespace trainwatch::app
