#pragma once
// Durations and byte sizes as Prometheus writes them in flags and
// prometheus.yml: used by the config (app) and scrape_configs (scrape).

#include <cstdint>
#include <string_view>

#include "base/status.h"

namespace trainwatch {

// Prometheus's model.ParseDuration ("15d", "1h30m", "0"), in milliseconds.
Result<int64_t> ParseDurationMs(std::string_view s);
// Byte size with base-2 units (alecthomas/units Base2Bytes, as
// --storage.tsdb.retention.size and body_size_limit): "0", "512MB", "1TiB", "100B".
Result<uint64_t> ParseByteSize(std::string_view s);

}  // namespace trainwatch
