// Prometheus chunks in: XOR, HISTOGRAM and FLOAT_HISTOGRAM as Prometheus 3's
// iterators read them (tsdb/chunkenc xor.go, histogram.go,
// float_histogram.go, histogram_meta.go, varbit.go).

#include <bit>
#include <cmath>
#include <string>

#include "remote/prom_chunks.h"
#include "remote/prom_chunks_internal.h"

namespace trainwatch::remote {
namespace promchunk {

namespace {
// The prefix of a varbit: 0, 3, 6, 9, 12, 18, 25, 56 or 64 value bits.
bool ReadVarbitSize(Reader* r, int* size) {
  static constexpr int kSizes[] = {0, 3, 6, 9, 12, 18, 25, 56, 64};
  int ones = 0;
  for (; ones < 8; ones++) {
    bool bit = false;
    if (!r->ReadBit(&bit)) return false;
    if (!bit) break;
  }
  *size = kSizes[ones];
  return true;
}
}  // namespace

bool ReadVarbitInt(Reader* r, int64_t* v) {
  int size = 0;
  if (!ReadVarbitSize(r, &size)) return false;
  uint64_t bits = 0;
  if (size > 0 && !r->ReadBits(size, &bits)) return false;
  if (size > 0 && size < 64 && bits > (uint64_t{1} << (size - 1))) bits -= uint64_t{1} << size;
  *v = static_cast<int64_t>(bits);
  return true;
}

bool ReadVarbitUint(Reader* r, uint64_t* v) {
  int size = 0;
  if (!ReadVarbitSize(r, &size)) return false;
  *v = 0;
  return size == 0 || r->ReadBits(size, v);
}

}  // namespace promchunk

namespace {

using namespace promchunk;  // NOLINT: internal pieces of this module

// xorIterator (xor.go). Not our chunkenc XOR reader: Prometheus writes the
// delta-of-delta buckets with bitRange, -(2^(n-1)-1)..2^(n-1), and reads
// 2^(n-1) back as positive, where two's complement would make it negative;
// our own writer keeps clear of both edges.
Status DecodeXor(std::string_view data, int64_t mint, int64_t maxt, std::vector<model::Sample>* out) {
  if (data.size() < 2) return Status::Corruption("xor chunk: shorter than its 2-byte header");
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const uint32_t n = (uint32_t{p[0]} << 8) | p[1];
  Reader r(p + 2, data.size() - 2, 0);
  uint64_t t = 0, delta = 0, vbits = 0;
  uint8_t leading = 0, trailing = 0;
  for (uint32_t i = 0; i < n; i++) {
    auto fail = [&](const char* what) {
      return Status::Corruption("xor chunk: sample " + std::to_string(i + 1) + ": " + what + " truncated");
    };
    if (i == 0) {
      uint64_t z = 0;
      if (!r.ReadUvarint(&z)) return fail("timestamp");
      t = (z >> 1) ^ (~(z & 1) + 1);  // binary.ReadVarint's zigzag
      if (!r.ReadBits(64, &vbits)) return fail("value");
    } else {
      if (i == 1) {
        if (!r.ReadUvarint(&delta)) return fail("timestamp");
      } else {
        int ones = 0;
        for (; ones < 4; ones++) {
          bool bit = false;
          if (!r.ReadBit(&bit)) return fail("timestamp");
          if (!bit) break;
        }
        static constexpr int kSizes[] = {0, 14, 17, 20, 64};
        const int size = kSizes[ones];
        uint64_t bits = 0;
        if (size > 0 && !r.ReadBits(size, &bits)) return fail("timestamp");
        if (size > 0 && size < 64 && bits > (uint64_t{1} << (size - 1))) bits -= uint64_t{1} << size;
        delta += bits;
      }
      t += delta;
      if (!chunkenc::internal::ReadXorValue(&r, &vbits, &leading, &trailing)) return fail("value");
    }
    const auto ts = static_cast<int64_t>(t);
    if (ts >= mint && ts <= maxt) out->push_back({ts, std::bit_cast<double>(vbits)});
  }
  return Status::OK();
}

const char* EncodingName(bool integer) { return integer ? "histogram chunk" : "float histogram chunk"; }

// A chunk of either histogram encoding, read as Prometheus's
// histogramIterator / floatHistogramIterator do.
class HistogramChunkReader {
 public:
  HistogramChunkReader(std::string_view data, bool integer) : data_(data), integer_(integer) {}

  Status Read(int64_t mint, int64_t maxt, std::vector<storage::HistogramSample>* out) {
    if (data_.size() < kHeaderSize) return Fail("shorter than its 3-byte header");
    const auto* p = reinterpret_cast<const uint8_t*>(data_.data());
    const uint32_t n = (uint32_t{p[0]} << 8) | p[1];
    const uint8_t header = p[2] & kHeaderMask;
    r_ = Reader(p + kHeaderSize, data_.size() - kHeaderSize, 0);
    for (i_ = 0; i_ < n; i_++) {
      RETURN_IF_ERROR(i_ == 0 ? First() : Next());
      if (t_ < mint || t_ > maxt) continue;
      storage::HistogramSample s{t_, {}, 0};
      RETURN_IF_ERROR(Current(header, &s.h));
      out->push_back(std::move(s));
    }
    return Status::OK();
  }

 private:
  Status Fail(const std::string& what) const {
    return Status::Corruption(std::string(EncodingName(integer_)) + ": " + what);
  }
  Status Truncated(const char* field) const {
    return Fail("sample " + std::to_string(i_ + 1) + ": " + field + " truncated");
  }

  Status ReadSpans(std::vector<model::Span>* spans) {
    uint64_t n = 0;
    if (!ReadVarbitUint(&r_, &n)) return Truncated("span count");
    if (n > r_.remaining() / 2) return Fail("layout: " + std::to_string(n) + " spans, more than the chunk holds");
    for (uint64_t i = 0; i < n; i++) {
      uint64_t length = 0;
      int64_t offset = 0;
      if (!ReadVarbitUint(&r_, &length) || !ReadVarbitInt(&r_, &offset)) return Truncated("span");
      if (length > UINT32_MAX || offset < INT32_MIN || offset > INT32_MAX) {
        return Fail("layout: span (" + std::to_string(offset) + ", " + std::to_string(length) + ") out of range");
      }
      spans->push_back(model::Span{static_cast<int32_t>(offset), static_cast<uint32_t>(length)});
    }
    return Status::OK();
  }

  // readHistogramChunkLayout.
  Status Layout() {
    uint64_t b = 0;
    if (!r_.ReadBits(8, &b)) return Truncated("zero threshold");
    if (b == 255) {
      uint64_t bits = 0;
      if (!r_.ReadBits(64, &bits)) return Truncated("zero threshold");
      h_.zero_threshold = std::bit_cast<double>(bits);
    } else if (b != 0) {
      h_.zero_threshold = std::ldexp(0.5, static_cast<int>(b) - 243);
    }
    int64_t schema = 0;
    if (!ReadVarbitInt(&r_, &schema)) return Truncated("schema");
    if (!(model::IsCustomBucketsSchema(static_cast<int32_t>(schema)) ||
          (schema >= model::kExponentialSchemaMin && schema <= model::kExponentialSchemaMaxReserved))) {
      return Fail("unknown schema " + std::to_string(schema));
    }
    h_.schema = static_cast<int32_t>(schema);
    RETURN_IF_ERROR(ReadSpans(&h_.positive_spans));
    RETURN_IF_ERROR(ReadSpans(&h_.negative_spans));
    if (model::IsCustomBucketsSchema(h_.schema)) {
      uint64_t n = 0;
      if (!ReadVarbitUint(&r_, &n)) return Truncated("custom bound count");
      if (n > r_.remaining()) return Fail("layout: " + std::to_string(n) + " custom bounds, more than the chunk holds");
      for (uint64_t i = 0; i < n; i++) {
        uint64_t v = 0;
        if (!ReadVarbitUint(&r_, &v)) return Truncated("custom bound");
        if (v == 0) {
          if (!r_.ReadBits(64, &v)) return Truncated("custom bound");
          h_.custom_values.push_back(std::bit_cast<double>(v));
        } else {
          h_.custom_values.push_back(static_cast<double>(v - 1) / 1000);
        }
      }
    }
    // Each bucket takes at least a bit in the first sample (64 for floats).
    const uint64_t np = CountSpans(h_.positive_spans), nn = CountSpans(h_.negative_spans);
    if (np + nn > r_.remaining() / (integer_ ? 1 : 64)) {
      return Fail("layout: " + std::to_string(np + nn) + " buckets, more than the chunk holds");
    }
    pos_.assign(np, {});
    neg_.assign(nn, {});
    return Status::OK();
  }

  Status First() {
    RETURN_IF_ERROR(Layout());
    if (!ReadVarbitInt(&r_, &t_)) return Truncated("timestamp");
    if (integer_) {
      if (!ReadVarbitUint(&r_, &icnt_) || !ReadVarbitUint(&r_, &izcnt_)) return Truncated("count");
      uint64_t bits = 0;
      if (!r_.ReadBits(64, &bits)) return Truncated("sum");
      sum_.bits = bits;
      for (auto* side : {&pos_, &neg_}) {
        for (Field& f : *side) {
          if (!ReadVarbitInt(&r_, &f.ival)) return Truncated("bucket");
        }
      }
      return Status::OK();
    }
    for (Field* f : {&cnt_, &zcnt_, &sum_}) {
      if (!r_.ReadBits(64, &f->bits)) return Truncated("count or sum");
    }
    for (auto* side : {&pos_, &neg_}) {
      for (Field& f : *side) {
        if (!r_.ReadBits(64, &f.bits)) return Truncated("bucket");
      }
    }
    return Status::OK();
  }

  Status Next() {
    int64_t dod = 0;
    if (!ReadVarbitInt(&r_, &dod)) return Truncated("timestamp");
    t_delta_ = static_cast<int64_t>(static_cast<uint64_t>(t_delta_) + static_cast<uint64_t>(dod));
    t_ = static_cast<int64_t>(static_cast<uint64_t>(t_) + static_cast<uint64_t>(t_delta_));
    if (integer_) {
      int64_t cdod = 0, zdod = 0;
      if (!ReadVarbitInt(&r_, &cdod) || !ReadVarbitInt(&r_, &zdod)) return Truncated("count");
      // Wrapping arithmetic, as Go's.
      cnt_delta_ = static_cast<int64_t>(static_cast<uint64_t>(cnt_delta_) + static_cast<uint64_t>(cdod));
      icnt_ += static_cast<uint64_t>(cnt_delta_);
      zcnt_delta_ = static_cast<int64_t>(static_cast<uint64_t>(zcnt_delta_) + static_cast<uint64_t>(zdod));
      izcnt_ += static_cast<uint64_t>(zcnt_delta_);
      if (!ReadXor(&sum_)) return Truncated("sum");
      if (model::IsStaleNaN(std::bit_cast<double>(sum_.bits))) return Status::OK();
      for (auto* side : {&pos_, &neg_}) {
        for (Field& f : *side) {
          int64_t d = 0;
          if (!ReadVarbitInt(&r_, &d)) return Truncated("bucket");
          f.idelta = static_cast<int64_t>(static_cast<uint64_t>(f.idelta) + static_cast<uint64_t>(d));
          f.ival = static_cast<int64_t>(static_cast<uint64_t>(f.ival) + static_cast<uint64_t>(f.idelta));
        }
      }
      return Status::OK();
    }
    if (!ReadXor(&cnt_) || !ReadXor(&zcnt_) || !ReadXor(&sum_)) return Truncated("count or sum");
    if (model::IsStaleNaN(std::bit_cast<double>(sum_.bits))) return Status::OK();
    for (auto* side : {&pos_, &neg_}) {
      for (Field& f : *side) {
        if (!ReadXor(&f)) return Truncated("bucket");
      }
    }
    return Status::OK();
  }

  struct Field {
    uint64_t bits = 0;  // float chunks, and the sum of integer ones
    uint8_t leading = 0, trailing = 0;
    int64_t ival = 0, idelta = 0;  // integer chunks: the bucket's delta to the one before, its change
  };
  bool ReadXor(Field* f) { return chunkenc::internal::ReadXorValue(&r_, &f->bits, &f->leading, &f->trailing); }

  // AtFloatHistogram.
  Status Current(uint8_t header, model::FloatHistogram* out) const {
    const double sum = std::bit_cast<double>(sum_.bits);
    if (model::IsStaleNaN(sum)) {
      out->sum = sum;
      return Status::OK();
    }
    *out = h_;
    out->counter_reset_hint = header == kGaugeType ? model::CounterResetHint::kGauge
                              : i_ > 0             ? model::CounterResetHint::kNotCounterReset
                                                   : model::CounterResetHint::kUnknown;
    out->sum = sum;
    if (integer_) {
      out->count = static_cast<double>(icnt_);
      out->zero_count = static_cast<double>(izcnt_);
    } else {
      out->count = std::bit_cast<double>(cnt_.bits);
      out->zero_count = std::bit_cast<double>(zcnt_.bits);
    }
    for (auto [side, buckets] : {std::pair{&pos_, &out->positive_buckets}, std::pair{&neg_, &out->negative_buckets}}) {
      buckets->reserve(side->size());
      int64_t current = 0;  // integer buckets are deltas to the one before
      for (const Field& f : *side) {
        current = static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(f.ival));
        buckets->push_back(integer_ ? static_cast<double>(current) : std::bit_cast<double>(f.bits));
      }
    }
    if (out->schema > model::kExponentialSchemaMax && !model::IsCustomBucketsSchema(out->schema)) {
      // From a Prometheus with finer schemas: reduced as its iterator does.
      out->ReduceResolution(model::kExponentialSchemaMax);
      if (out->schema != model::kExponentialSchemaMax) {
        return Fail("sample " + std::to_string(i_ + 1) + ": schema " + std::to_string(h_.schema) + " does not reduce");
      }
    }
    if (Status s = out->Validate(); !s.ok()) return Fail("sample " + std::to_string(i_ + 1) + ": " + s.message());
    return Status::OK();
  }

  std::string_view data_;
  bool integer_;
  Reader r_;
  uint32_t i_ = 0;  // the sample being read
  model::FloatHistogram h_;  // the layout
  int64_t t_ = 0, t_delta_ = 0;
  uint64_t icnt_ = 0, izcnt_ = 0;
  int64_t cnt_delta_ = 0, zcnt_delta_ = 0;
  Field cnt_, zcnt_, sum_;
  std::vector<Field> pos_, neg_;
};

}  // namespace

Status DecodePromChunk(uint64_t encoding, std::string_view data, int64_t mint, int64_t maxt,
                       std::vector<model::Sample>* floats, std::vector<storage::HistogramSample>* hists) {
  switch (encoding) {
    case static_cast<uint64_t>(PromChunkEncoding::kXor):
      return DecodeXor(data, mint, maxt, floats);
    case static_cast<uint64_t>(PromChunkEncoding::kHistogram):
    case static_cast<uint64_t>(PromChunkEncoding::kFloatHistogram):
      return HistogramChunkReader(data, encoding == static_cast<uint64_t>(PromChunkEncoding::kHistogram))
          .Read(mint, maxt, hists);
    default:
      return Status::NotSupported("chunk encoding " + std::to_string(encoding) +
                                  " (only XOR = 1, HISTOGRAM = 2 and FLOAT_HISTOGRAM = 3 are read)");
  }
}

}  // namespace trainwatch::remote
