// Float histogram chunks. Layout (docs/format/chunks.md, "Float histogram"):
// u16 big-endian sample count, then MSB-first: the layout (zigzag varint
// schema, 64 bits of the zero threshold, uvarint span counts and spans,
// uvarint bucket counts, uvarint custom bound count and 64 bits per bound),
// then the samples: t as in XOR chunks, the hint, and every float field
// XOR'd against the previous sample's.

#include "tsdb/chunkenc/histogram.h"

#include <bit>
#include <cmath>

#include "base/check.h"
#include "base/coding.h"
#include "tsdb/chunkenc/bstream.h"

namespace trainwatch::chunkenc {
namespace {

uint64_t Bits(double v) { return std::bit_cast<uint64_t>(v); }

// As xor.cc: only dod values both readers (ours and Prometheus's) agree on.
bool FitsSigned(int64_t x, int nbits) {
  int64_t lim = int64_t{1} << (nbits - 1);
  return x > -lim && x < lim;
}

int64_t SignExtend(uint64_t v, int nbits) {
  uint64_t m = uint64_t{1} << (nbits - 1);
  return static_cast<int64_t>((v ^ m) - m);
}

template <typename W>
void WriteDod(W* w, int64_t dod) {
  const uint64_t udod = static_cast<uint64_t>(dod);
  if (dod == 0) {
    w->WriteBit(false);
  } else if (FitsSigned(dod, 14)) {
    w->WriteBits(0b10, 2);
    w->WriteBits(udod & ((uint64_t{1} << 14) - 1), 14);
  } else if (FitsSigned(dod, 17)) {
    w->WriteBits(0b110, 3);
    w->WriteBits(udod & ((uint64_t{1} << 17) - 1), 17);
  } else if (FitsSigned(dod, 20)) {
    w->WriteBits(0b1110, 4);
    w->WriteBits(udod & ((uint64_t{1} << 20) - 1), 20);
  } else {
    w->WriteBits(0b1111, 4);
    w->WriteBits(udod, 64);
  }
}

bool ReadDod(internal::BitReader* r, uint64_t* dod) {
  int nbits = 0;
  for (int k = 0; k < 4; k++) {
    bool bit;
    if (!r->ReadBit(&bit)) return false;
    if (!bit) break;
    nbits = k == 3 ? 64 : 14 + 3 * k;
  }
  *dod = 0;
  if (nbits != 0) {
    uint64_t raw;
    if (!r->ReadBits(nbits, &raw)) return false;
    *dod = nbits == 64 ? raw : static_cast<uint64_t>(SignExtend(raw, nbits));
  }
  return true;
}

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (Bits(a[i]) != Bits(b[i])) return false;
  }
  return true;
}


}  // namespace

bool SameLayout(const model::FloatHistogram& a, const model::FloatHistogram& b) {
  return a.schema == b.schema && Bits(a.zero_threshold) == Bits(b.zero_threshold) &&
         a.positive_spans == b.positive_spans && a.negative_spans == b.negative_spans &&
         a.positive_buckets.size() == b.positive_buckets.size() &&
         a.negative_buckets.size() == b.negative_buckets.size() && SameBits(a.custom_values, b.custom_values);
}

bool IdenticalHistograms(const model::FloatHistogram& a, const model::FloatHistogram& b) {
  return a.counter_reset_hint == b.counter_reset_hint && SameLayout(a, b) && Bits(a.zero_count) == Bits(b.zero_count) &&
         Bits(a.count) == Bits(b.count) && Bits(a.sum) == Bits(b.sum) &&
         SameBits(a.positive_buckets, b.positive_buckets) && SameBits(a.negative_buckets, b.negative_buckets);
}

bool FloatHistogramChunk::CanAppend(const model::FloatHistogram& h) const {
  return n_ == 0 || (n_ < kMaxSamples && SameLayout(layout_, h));
}

size_t FloatHistogramChunk::MemoryBytes() const {
  return buf_.capacity() + fields_.capacity() * sizeof(Field) +
         (layout_.positive_spans.capacity() + layout_.negative_spans.capacity()) * sizeof(model::Span) +
         layout_.custom_values.capacity() * sizeof(double);
}

void FloatHistogramChunk::Append(int64_t t, const model::FloatHistogram& h) {
  CHECK(CanAppend(h), "BUG: FloatHistogramChunk::Append of another layout or to a full chunk");
  CHECK(n_ == 0 || t > t_, "BUG: FloatHistogramChunk::Append with non-increasing timestamp");
  internal::BitWriter<std::string> w(&buf_, &bit_pos_);
  const size_t nfields = 3 + h.positive_buckets.size() + h.negative_buckets.size();
  auto field_bits = [&h](size_t i) -> uint64_t {
    if (i == 0) return Bits(h.count);
    if (i == 1) return Bits(h.zero_count);
    if (i == 2) return Bits(h.sum);
    i -= 3;
    return i < h.positive_buckets.size() ? Bits(h.positive_buckets[i]) : Bits(h.negative_buckets[i - h.positive_buckets.size()]);
  };
  const auto hint = static_cast<uint64_t>(h.counter_reset_hint) & 3;
  if (n_ == 0) {
    buf_.assign(2, '\0');
    bit_pos_ = 0;
    w.WriteUvarint(ZigZagEncode(h.schema));
    w.WriteBits(Bits(h.zero_threshold), 64);
    for (const auto* spans : {&h.positive_spans, &h.negative_spans}) {
      w.WriteUvarint(spans->size());
      for (const model::Span& s : *spans) {
        w.WriteUvarint(ZigZagEncode(s.offset));
        w.WriteUvarint(s.length);
      }
    }
    w.WriteUvarint(h.positive_buckets.size());
    w.WriteUvarint(h.negative_buckets.size());
    w.WriteUvarint(h.custom_values.size());
    for (double b : h.custom_values) w.WriteBits(Bits(b), 64);
    layout_.schema = h.schema;
    layout_.zero_threshold = h.zero_threshold;
    layout_.positive_spans = h.positive_spans;
    layout_.negative_spans = h.negative_spans;
    layout_.positive_buckets.assign(h.positive_buckets.size(), 0);
    layout_.negative_buckets.assign(h.negative_buckets.size(), 0);
    layout_.custom_values = h.custom_values;
    fields_.assign(nfields, Field{});
    // Sample 0: t, the hint, every field in full.
    w.WriteUvarint(ZigZagEncode(t));
    w.WriteBits(hint, 2);
    for (size_t i = 0; i < nfields; i++) {
      fields_[i].bits = field_bits(i);
      w.WriteBits(fields_[i].bits, 64);
    }
    t_first_ = t;
  } else {
    const uint64_t delta = static_cast<uint64_t>(t) - static_cast<uint64_t>(t_);
    if (n_ == 1) {
      w.WriteUvarint(delta);
    } else {
      WriteDod(&w, static_cast<int64_t>(delta - static_cast<uint64_t>(t_delta_)));
    }
    t_delta_ = static_cast<int64_t>(delta);
    if (hint == static_cast<uint64_t>(hint_)) {
      w.WriteBit(false);
    } else {
      w.WriteBit(true);
      w.WriteBits(hint, 2);
    }
    for (size_t i = 0; i < nfields; i++) {
      const uint64_t b = field_bits(i);
      internal::WriteXorValue(&w, fields_[i].bits, b, &fields_[i].leading, &fields_[i].trailing);
      fields_[i].bits = b;
    }
  }
  hint_ = h.counter_reset_hint;
  t_ = t;
  n_++;
  buf_[0] = static_cast<char>(n_ >> 8);
  buf_[1] = static_cast<char>(n_ & 0xff);
}

bool FloatHistogramIterator::Fail(const std::string& what) {
  err_ = Status::Corruption("histogram chunk: " + what + " at sample " + std::to_string(i_));
  n_ = i_;  // nothing more
  valid_ = false;
  return false;
}

void FloatHistogramIterator::Reset(std::string_view data) {
  data_ = data;
  pos_ = 0;
  n_ = i_ = 0;
  t_ = t_delta_ = 0;
  valid_ = false;
  h_ = model::FloatHistogram{};
  bits_.clear();
  leading_.clear();
  trailing_.clear();
  err_ = Status::OK();
  if (data.size() < 2) {
    err_ = Status::Corruption("histogram chunk: short header");
    return;
  }
  const uint32_t n = (uint32_t{static_cast<uint8_t>(data[0])} << 8) | static_cast<uint8_t>(data[1]);
  internal::BitReader r(reinterpret_cast<const uint8_t*>(data.data()), data.size(), 16);
  auto bad = [&](const char* what) { err_ = Status::Corruption(std::string("histogram chunk: ") + what); };
  uint64_t v;
  if (!r.ReadUvarint(&v)) return bad("bad schema");
  const int64_t schema = ZigZagDecode(v);
  if (schema < INT32_MIN || schema > INT32_MAX) return bad("bad schema");
  h_.schema = static_cast<int32_t>(schema);
  if (!r.ReadBits(64, &v)) return bad("truncated zero threshold");
  h_.zero_threshold = std::bit_cast<double>(v);
  for (auto* spans : {&h_.positive_spans, &h_.negative_spans}) {
    uint64_t ns;
    if (!r.ReadUvarint(&ns) || ns > r.remaining() / 16) return bad("bad span count");
    spans->resize(ns);
    for (model::Span& s : *spans) {
      uint64_t off, len;
      if (!r.ReadUvarint(&off) || !r.ReadUvarint(&len)) return bad("truncated span");
      const int64_t o = ZigZagDecode(off);
      if (o < INT32_MIN || o > INT32_MAX || len > UINT32_MAX) return bad("bad span");
      s.offset = static_cast<int32_t>(o);
      s.length = static_cast<uint32_t>(len);
    }
  }
  uint64_t npos, nneg, ncustom;
  if (!r.ReadUvarint(&npos) || !r.ReadUvarint(&nneg) || !r.ReadUvarint(&ncustom)) return bad("truncated layout");
  if (npos > r.remaining() || nneg > r.remaining() || ncustom > r.remaining() / 64) return bad("bad bucket count");
  h_.custom_values.resize(ncustom);
  for (double& b : h_.custom_values) {
    if (!r.ReadBits(64, &v)) return bad("truncated custom bounds");
    b = std::bit_cast<double>(v);
  }
  const uint64_t nfields = 3 + npos + nneg;
  // Sample 0 holds every field in full.
  if (n > 0 && nfields > r.remaining() / 64) return bad("bucket count exceeds chunk size");
  h_.positive_buckets.assign(npos, 0);
  h_.negative_buckets.assign(nneg, 0);
  bits_.assign(nfields, 0);
  leading_.assign(nfields, 0);
  trailing_.assign(nfields, 0);
  pos_ = r.pos();
  n_ = n;
}

bool FloatHistogramIterator::Next() {
  if (!err_.ok() || i_ >= n_) return valid_ = false;
  internal::BitReader r(reinterpret_cast<const uint8_t*>(data_.data()), data_.size(), pos_);
  const size_t nfields = bits_.size();
  uint64_t hint;
  if (i_ == 0) {
    uint64_t zt;
    if (!r.ReadUvarint(&zt)) return Fail("bad first timestamp");
    t_ = ZigZagDecode(zt);
    if (!r.ReadBits(2, &hint)) return Fail("truncated hint");
    for (size_t i = 0; i < nfields; i++) {
      if (!r.ReadBits(64, &bits_[i])) return Fail("truncated first values");
    }
  } else {
    uint64_t delta;
    if (i_ == 1) {
      if (!r.ReadUvarint(&delta)) return Fail("bad timestamp delta");
    } else {
      uint64_t dod;
      if (!ReadDod(&r, &dod)) return Fail("truncated timestamp");
      delta = static_cast<uint64_t>(t_delta_) + dod;
    }
    t_delta_ = static_cast<int64_t>(delta);
    t_ = static_cast<int64_t>(static_cast<uint64_t>(t_) + delta);
    bool changed;
    if (!r.ReadBit(&changed)) return Fail("truncated hint");
    hint = static_cast<uint64_t>(h_.counter_reset_hint);
    if (changed && !r.ReadBits(2, &hint)) return Fail("truncated hint");
    for (size_t i = 0; i < nfields; i++) {
      if (!internal::ReadXorValue(&r, &bits_[i], &leading_[i], &trailing_[i])) return Fail("bad value");
    }
  }
  h_.counter_reset_hint = static_cast<model::CounterResetHint>(hint);
  h_.count = std::bit_cast<double>(bits_[0]);
  h_.zero_count = std::bit_cast<double>(bits_[1]);
  h_.sum = std::bit_cast<double>(bits_[2]);
  const size_t npos = h_.positive_buckets.size();
  for (size_t i = 0; i < npos; i++) h_.positive_buckets[i] = std::bit_cast<double>(bits_[3 + i]);
  for (size_t i = 0; i < h_.negative_buckets.size(); i++) {
    h_.negative_buckets[i] = std::bit_cast<double>(bits_[3 + npos + i]);
  }
  pos_ = r.pos();
  i_++;
  return valid_ = true;
}

bool FloatHistogramIterator::Seek(int64_t t) {
  if (valid_ && t_ >= t) return true;
  while (Next()) {
    if (t_ >= t) return true;
  }
  return false;
}

Status DecodeAllHistograms(std::string_view data, std::vector<int64_t>* ts, std::vector<model::FloatHistogram>* hs) {
  FloatHistogramIterator it(data);
  ts->reserve(ts->size() + it.NumSamples());
  hs->reserve(hs->size() + it.NumSamples());
  while (it.Next()) {
    ts->push_back(it.t());
    hs->push_back(it.h());
  }
  return it.Err();
}

}  // namespace trainwatch::chunkenc
