#pragma once
// Bounds on new series, shared by the head (which checks them) and the DB's
// options and stats.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace trainwatch::tsdb {

// Bounds on new series, checked once, when a series is created: every
// writer's new series pass through Head::GetOrCreateChecked (the append
// seam). A series beyond one is refused with ResourceExhausted and counted
// by which; existing series keep taking samples. 0: no bound.
struct SeriesLimits {
  uint64_t max_series = 0;               // series in the head (--storage.max-series)
  uint32_t max_labels_per_series = 0;    // labels, __name__ included (--ingest.max-labels-per-series)
  uint32_t max_label_name_length = 0;    // bytes (--ingest.max-label-name-length)
  uint32_t max_label_value_length = 0;   // bytes (--ingest.max-label-value-length)
};
// Which bound of SeriesLimits refused a series.
enum class SeriesRefusal : uint8_t { kMaxSeries, kLabelsPerSeries, kLabelNameLength, kLabelValueLength };
inline constexpr size_t kNumSeriesRefusals = 4;
// "max_series", "labels_per_series", "label_name_length", "label_value_length":
// the `limit` label of trainwatch_tsdb_series_refused_total.
std::string_view SeriesRefusalName(SeriesRefusal r);

}  // namespace trainwatch::tsdb
