#pragma once
// Import (backfill) of Prometheus text exposition bodies into any
// storage::Appendable: POST /api/v1/import/prometheus. All-or-nothing: the
// whole body is parsed before the first Append, so a malformed body stores
// nothing.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "ingest/refusals.h"
#include "ingest/series_cache.h"
#include "storage/storage.h"

namespace trainwatch::ingest {

struct ImportOptions {
  // Timestamp of samples written without one (the request's receive time).
  int64_t default_timestamp_ms = 0;
  // Added to every series, replacing a label of the same name; an empty value
  // removes the label (VictoriaMetrics's `extra_label=name=value`).
  std::vector<model::Label> extra_labels;
  // Series text -> ref cache shared across requests; optional.
  SeriesCache* cache = nullptr;
  // A body beyond these fails as it is parsed. Series are the series texts
  // the store does not know yet (known ones cost no label parsing).
  RequestLimits limits;
};

struct ImportStats {
  uint64_t samples = 0;
  uint64_t series = 0;  // distinct series texts in the body
};

// A parsed body: its distinct series and their samples, ready to append.
// Not thread-safe. REQUIRES: the parsed body outlives the batch.
class ImportBatch {
 public:
  // Parses `body`. On error (InvalidArgument "line N: ...") the batch is empty.
  Status Parse(std::string_view body, const ImportOptions& opts);
  // Appends every sample; the caller commits or rolls back. Samples of new
  // series refused at the store's series limit are skipped and counted in
  // refusals() (check refusals().After(...) once committed).
  Status AppendTo(storage::Appender* app);
  const SeriesRefusals& refusals() const { return refusals_; }
  ImportStats stats() const { return {samples_.size(), series_.size()}; }
  void Clear();

 private:
  struct Series {
    model::Labels labels;       // empty while only the cached ref is known
    storage::SeriesRef ref = 0;
    std::string_view text;      // as written, into the body
    SeriesCache::Key key;
  };
  Status ResolveLabels(Series* s);
  struct Entry {
    uint32_t series;
    uint32_t line;
    int64_t t;
    double v;
  };
  std::vector<Series> series_;
  std::vector<Entry> samples_;
  std::vector<model::Label> extra_labels_;
  SeriesCache* cache_ = nullptr;
  SeriesRefusals refusals_;
};

// Appends a parsed batch through one appender and commits it; rolls back
// when `append` fails. The shared tail of every push endpoint.
Status AppendAndCommit(storage::Appendable& db, const std::function<Status(storage::Appender*)>& append);

// Parses `body` and appends it to `db` in one Commit. Nothing is stored when
// parsing or appending fails.
Result<ImportStats> ImportText(std::string_view body, const ImportOptions& opts, storage::Appendable& db);

// Parses a VictoriaMetrics `extra_label` value "name=value".
Result<model::Label> ParseExtraLabel(std::string_view s);

}  // namespace trainwatch::ingest
