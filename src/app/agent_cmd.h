#pragma once
// `trainwatch agent`: on every node of a cluster, the built-in host and GPU
// collectors plus the config's scrape jobs, forwarded by remote_write to a
// central trainwatch, Prometheus, VictoriaMetrics, Mimir or Thanos through
// the on-disk queue of remote/ (no sample lost across receiver outages).
// Nothing else is stored. /metrics, /-/healthy, /-/ready, /api/v1/targets
// and /-/reload answer on --listen.

#include "app/flags.h"

namespace trainwatch::app {

// Runs until SIGTERM or SIGINT; returns the process exit code.
int RunAgent(const AgentOptions& opts);

}  // namespace trainwatch::app
