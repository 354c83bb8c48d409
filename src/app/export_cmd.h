#pragma once
// `trainwatch export run ID [--url URL] [--out DIR]`: a run from a server
// into files (docs/runs-api.md, "Export"): `<ID>.json` (the run: config,
// summary, tags, alerts, as GET /api/v1/runs/{id} answers), `<ID>.csv`
// (GET /api/v1/runs/{id}/history?format=csv, streamed to the file),
// `<ID>.jsonl` (the same points, one JSON object a line) and
// `<ID>.media.jsonl` (the media index: a line per rich value, as
// GET /api/v1/runs/media answers it, images by URL without their bytes).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch::app {

struct ExportOptions {
  std::string id;
  std::string url = "http://127.0.0.1:9800";
  std::string out_dir = ".";
};

// Turns the history CSV (`rank,key,step,timestamp,value`, RFC 4180 quoting
// of the key, timestamp in unix seconds with 3 decimals, values as
// Prometheus writes them) into JSON lines
// `{"rank": 0 | null, "key": "...", "step": N, "timestamp": unix ms, "value": number | "NaN" | "Inf" | "-Inf"}`,
// fed in chunks of any size as they arrive.
// One line of the media index: `entry` (an element of GET
// /api/v1/runs/media's answer) with its `key`, without image bytes should a
// server send them, its content `url` put after `url_prefix` (the --url's
// path).
nlohmann::json MediaIndexLine(const nlohmann::json& entry, std::string_view key, std::string_view url_prefix);

class HistoryCsvToJsonl {
 public:
  // Appends the lines of the complete rows in `chunk` to *out.
  Status Feed(std::string_view chunk, std::string* out);
  // The end of the CSV: the last row (without a newline) to *out; an error
  // when the CSV ends inside a quoted key.
  Status Finish(std::string* out);
  uint64_t rows() const { return rows_; }

 private:
  Status Row(std::string* out);
  std::string line_;  // the row so far
  bool quoted_ = false;
  bool header_ = true;
  uint64_t line_no_ = 0;
  uint64_t rows_ = 0;
};

int RunExport(const ExportOptions& o);

}  // namespace trainwatch::app
