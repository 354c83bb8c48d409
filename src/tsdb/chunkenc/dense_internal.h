#pragma once
// Internal: the dense codec (docs/format/chunks.md, "Dense chunks").

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::chunkenc::internal {

// Upper bound on samples in one dense chunk; larger counts are corruption.
// Bounds what a corrupt header can make a decoder allocate.
constexpr uint64_t kMaxDenseSamples = uint64_t{1} << 20;

// Appends the decoded samples. Corruption -> error (the vectors then hold
// unspecified extra elements).
Status DecodeDense(std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs);

}  // namespace trainwatch::chunkenc::internal
