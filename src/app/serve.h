#pragma once
// `trainwatch serve`: opens the TSDB, starts the query engine and the HTTP
// server, waits for SIGTERM/SIGINT, then stops them in reverse order.

#include "app/flags.h"

namespace trainwatch::app {

// Runs until SIGTERM or SIGINT; returns the process exit code (0 on a clean stop).
int RunServe(const ServeOptions& opts);

}  // namespace trainwatch::app
