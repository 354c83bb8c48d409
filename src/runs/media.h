#pragma once
// Rich run values (docs/runs-api.md "Rich values"): histograms, images, text
// and tables logged at a step beside the scalars. Parsed and validated here
// from a batch value `{"_type": ...}`; RunStore keeps them in runs.db's media
// table, one row per (run, key, rank, step).

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "runs/run.h"

namespace trainwatch::runs {

inline constexpr size_t kMaxHistogramBuckets = 4096;
inline constexpr size_t kMaxImageBytes = 16u << 20;
inline constexpr size_t kMaxTextBytes = 1u << 20;
inline constexpr size_t kMaxTableColumns = 1000;
inline constexpr size_t kMaxTableCells = 100000;
inline constexpr size_t kMaxMediaKeyBytes = 256;

struct RichValue {
  std::string key;
  std::string kind;  // "histogram", "image", "text" or "table"
  // As stored: histogram: the JSON buckets [[lower, upper, count], ...];
  // image: the file's bytes; text: the markdown; table: JSON {"columns", "rows"}.
  std::string data;
  Json meta = Json::object();  // image: {"format", "width", "height", "caption"?}
};

// True for a batch value that is a rich value (an object), rather than a number.
inline bool IsRichValue(const Json& v) { return v.is_object(); }

// Validates `v` (an object with `_type`) logged under `key`. Errors name the
// field: "histogram: buckets[3]: lower is below the previous upper".
Result<RichValue> ParseRichValue(std::string_view key, const Json& v);

// The image's width and height from its header (PNG IHDR, JPEG SOFn);
// InvalidArgument when `bytes` is not an image of `format`.
struct ImageSize {
  int64_t width = 0, height = 0;
};
Result<ImageSize> ReadImageSize(std::string_view format, std::string_view bytes);

// "image/png" or "image/jpeg".
std::string_view ImageContentType(std::string_view format);

}  // namespace trainwatch::runs
