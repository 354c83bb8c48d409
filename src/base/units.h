#pragma once
// Durations and byte sizes as Prometheus writes them in flags and
// prometheus.yml: used by the config (app) and scrape_configs (scrape).

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch {

// Prometheus's model.ParseDuration ("15d", "1h30m", "0"), in milliseconds.
Result<int64_t> ParseDurationMs(std::string_view s);
// Byte size with base-2 units (alecthomas/units Base2Bytes, as
// --storage.tsdb.retention.size and body_size_limit): "0", "512MB", "1TiB", "100B".
Result<uint64_t> ParseByteSize(std::string_view s);
// "1d2h", "10m", "1500ms": a positive millisecond duration for messages,
// largest unit first, without weeks and years (as flags are written); "0s"
// for zero or less.
std::string FormatDurationMs(int64_t ms);

}  // namespace trainwatch
