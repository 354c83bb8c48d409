#pragma once
// Internal to prom_chunks*.cc: the bit-level pieces of Prometheus's
// histogram chunks (tsdb/chunkenc/varbit.go, histogram_meta.go) on our
// MSB-first bit streams, which write and read bits as Prometheus's bstream.

#include <cstdint>
#include <string>
#include <vector>

#include "model/histogram.h"
#include "tsdb/chunkenc/bstream.h"

namespace trainwatch::remote::promchunk {

using Writer = chunkenc::internal::BitWriter<std::string>;
using Reader = chunkenc::internal::BitReader;

// Histogram chunks: u16 sample count, a flags byte whose top two bits are
// the counter reset header, then the bit stream.
inline constexpr size_t kHeaderSize = 3;
inline constexpr uint8_t kUnknownCounterReset = 0x00;
inline constexpr uint8_t kNotCounterReset = 0x40;
inline constexpr uint8_t kCounterReset = 0x80;
inline constexpr uint8_t kGaugeType = 0xc0;
inline constexpr uint8_t kHeaderMask = 0xc0;

// putVarbitInt / putVarbitUint: a prefix of 1 bits ended by a 0 (none after
// eight 1s) selects 0, 3, 6, 9, 12, 18, 25, 56 or 64 value bits.
void PutVarbitInt(Writer* w, int64_t v);
void PutVarbitUint(Writer* w, uint64_t v);
bool ReadVarbitInt(Reader* r, int64_t* v);
bool ReadVarbitUint(Reader* r, uint64_t* v);

// writeHistogramChunkLayout: zero threshold (one byte for 0 and powers of
// two in [2^-243, 2^10], else 0xff and the double), schema, positive and
// negative spans (count; length, offset each), custom bounds for schema -53
// (count; each a varbit of bound*1000+1 when that is whole and in range,
// else a 0 bit and the double).
void PutLayout(Writer* w, const model::FloatHistogram& h);

// Sum of the span lengths (64 bits: a hostile chunk may overflow 32).
uint64_t CountSpans(const std::vector<model::Span>& spans);

}  // namespace trainwatch::remote::promchunk
