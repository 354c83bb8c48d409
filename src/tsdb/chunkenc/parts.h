#pragma once
// Encoding::kParts: one chunk record holding several chunks of the same
// samples (same timestamps), one per value, each a "part". A tier block
// (docs/format/downsample.md) keeps a window's min, max, sum, count and last
// so: one index entry and one chunk reference per chunk of points, not one
// per aggregate. Layout (docs/format/chunks.md):
//   uvarint part count k (1..255) | k × (u8 encoding | uvarint len | bytes)
// A part is any encoding but kParts.

#include <span>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/st.h"

namespace trainwatch::chunkenc {

// Appends a kParts chunk of `parts` (1..255, none of them kParts) to *out.
void WrapParts(std::span<const Unwrapped> parts, std::string* out);

// Part i of a kParts chunk. Corruption for a malformed chunk (the message
// says what is wrong); NotFound when it has fewer than i + 1 parts.
Result<Unwrapped> UnwrapPart(std::string_view data, size_t i);

}  // namespace trainwatch::chunkenc
