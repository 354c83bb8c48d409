// Iterator over XOR and dense chunks, and DecodeAll.

#include <algorithm>
#include <bit>

#include "base/coding.h"
#include "tsdb/chunkenc/bstream.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/dense_internal.h"

namespace trainwatch::chunkenc {

namespace {

int64_t SignExtend(uint64_t v, int nbits) {
  uint64_t m = uint64_t{1} << (nbits - 1);
  return static_cast<int64_t>((v ^ m) - m);
}

}  // namespace

Iterator::Iterator(Encoding enc, std::string_view data) { Reset(enc, data); }

void Iterator::Reset(Encoding enc, std::string_view data) {
  enc_ = enc;
  data_ = data;
  pos_ = 0;
  n_ = i_ = 0;
  t_ = t_delta_ = 0;
  v_ = 0;
  v_bits_ = 0;
  leading_ = trailing_ = 0;
  valid_ = false;
  err_ = Status::OK();
  switch (enc) {
    case Encoding::kXor:
      if (data.size() < 2) {
        err_ = Status::Corruption("xor chunk: short header");
        return;
      }
      n_ = (uint32_t{static_cast<uint8_t>(data[0])} << 8) | static_cast<uint8_t>(data[1]);
      pos_ = 16;
      return;
    case Encoding::kDense: {
      dense_t_.clear();
      dense_v_.clear();
      Status s = internal::DecodeDense(data, &dense_t_, &dense_v_);
      if (!s.ok()) {
        err_ = std::move(s);
        return;
      }
      n_ = static_cast<uint32_t>(dense_t_.size());
      return;
    }
  }
  err_ = Status::NotSupported("chunk: unknown encoding " + std::to_string(static_cast<int>(enc)));
}

bool Iterator::Fail(const char* what) {
  err_ = Status::Corruption(std::string("xor chunk: ") + what + " at sample " + std::to_string(i_));
  valid_ = false;
  return false;
}

bool Iterator::NextXor() {
  internal::BitReader r(reinterpret_cast<const uint8_t*>(data_.data()), data_.size(), pos_);
  if (i_ == 0) {
    uint64_t zt;
    if (!r.ReadUvarint(&zt)) return Fail("bad first timestamp");
    t_ = ZigZagDecode(zt);
    if (!r.ReadBits(64, &v_bits_)) return Fail("truncated first value");
  } else {
    uint64_t delta;
    if (i_ == 1) {
      if (!r.ReadUvarint(&delta)) return Fail("bad timestamp delta");
    } else {
      // Delta-of-delta bucket: '0' | '10' 14 | '110' 17 | '1110' 20 | '1111' 64.
      int nbits = 0;
      for (int k = 0; k < 4; k++) {
        bool bit;
        if (!r.ReadBit(&bit)) return Fail("truncated timestamp");
        if (!bit) break;
        nbits = k == 3 ? 64 : 14 + 3 * k;
      }
      // nbits: 0 ('0'), 14 ('10'), 17 ('110'), 20 ('1110'), 64 ('1111').
      uint64_t dod = 0;
      if (nbits != 0) {
        uint64_t raw;
        if (!r.ReadBits(nbits, &raw)) return Fail("truncated timestamp");
        dod = nbits == 64 ? raw : static_cast<uint64_t>(SignExtend(raw, nbits));
      }
      delta = static_cast<uint64_t>(t_delta_) + dod;
    }
    t_delta_ = static_cast<int64_t>(delta);
    t_ = static_cast<int64_t>(static_cast<uint64_t>(t_) + delta);
    if (!internal::ReadXorValue(&r, &v_bits_, &leading_, &trailing_)) return Fail("bad value");
  }
  pos_ = r.pos();
  v_ = std::bit_cast<double>(v_bits_);
  i_++;
  valid_ = true;
  return true;
}

bool Iterator::Next() {
  if (!err_.ok() || i_ >= n_) {
    valid_ = false;
    return false;
  }
  if (enc_ == Encoding::kXor) return NextXor();
  t_ = dense_t_[i_];
  v_ = dense_v_[i_];
  i_++;
  valid_ = true;
  return true;
}

bool Iterator::Seek(int64_t t) {
  if (!err_.ok()) return false;
  if (valid_ && t_ >= t) return true;
  if (enc_ == Encoding::kDense) {
    auto begin = dense_t_.begin() + i_;
    auto it = std::lower_bound(begin, dense_t_.end(), t);
    i_ = static_cast<uint32_t>(it - dense_t_.begin());
    return Next();
  }
  while (Next()) {
    if (t_ >= t) return true;
  }
  return false;
}

Status DecodeAll(Encoding enc, std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs) {
  if (enc == Encoding::kDense) return internal::DecodeDense(data, ts, vs);
  Iterator it(enc, data);
  if (enc == Encoding::kXor && it.Err().ok() && data.size() >= 2) {
    uint32_t n = (uint32_t{static_cast<uint8_t>(data[0])} << 8) | static_cast<uint8_t>(data[1]);
    ts->reserve(ts->size() + n);
    vs->reserve(vs->size() + n);
  }
  while (it.Next()) {
    ts->push_back(it.t());
    vs->push_back(it.v());
  }
  return it.Err();
}

}  // namespace trainwatch::chunkenc
