// Iterator over XOR and dense chunks, and DecodeAll.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <iterator>

#include "base/coding.h"
#include "tsdb/chunkenc/bstream.h"
#include "tsdb/chunkenc/chunk.h"
#include "tsdb/chunkenc/st.h"
#include "tsdb/chunkenc/delta_internal.h"
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
  if (enc == Encoding::kStartTimes) {  // the chunk inside; its start timestamps are not read here
    Result<Unwrapped> u = UnwrapST(enc, data, nullptr);
    if (!u.ok()) {
      Reset(Encoding::kXor, {});
      err_ = u.status();
      return;
    }
    enc = u->enc;
    data = u->data;
  }
  enc_ = enc;
  data_ = data;
  pos_ = 0;
  n_ = i_ = 0;
  counts_ = nullptr;
  t_ = t_delta_ = 0;
  v_ = 0;
  v_bits_ = 0;
  leading_ = trailing_ = 0;
  valid_ = false;
  xor_mode_ = false;
  e_ = 0;
  bias_ = xbias_ = 0;
  m_ = d_ = 0;
  reg_ = 0;
  kp_ = 0;
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
    case Encoding::kDelta:
    case Encoding::kDelta1: {
      leading_ = 0xff;  // the writer's initial (shadow) window
      const size_t header = enc == Encoding::kDelta ? 4 : 2;
      if (data.size() < header) {
        err_ = Status::Corruption("delta chunk: short header");
        return;
      }
      n_ = (uint32_t{static_cast<uint8_t>(data[0])} << 8) | static_cast<uint8_t>(data[1]);
      if (enc == Encoding::kDelta) reg_ = (uint32_t{static_cast<uint8_t>(data[2])} << 8) | static_cast<uint8_t>(data[3]);
      if (reg_ > n_) {
        err_ = Status::Corruption("delta chunk: more regular timestamps than samples");
        return;
      }
      pos_ = 8 * header;
      return;
    }
    case Encoding::kDense: {
      Status s = dense_.Decode(data);
      if (!s.ok()) {
        err_ = std::move(s);
        return;
      }
      n_ = static_cast<uint32_t>(dense_.n);
      dt_ = dense_.t.get();
      dv_ = dense_.v.get();
      return;
    }
    case Encoding::kStartTimes:  // unwrapped above: one inside another
      err_ = Status::Corruption("start-times chunk: wraps another start-times chunk");
      return;
    case Encoding::kFloatHistogram:
      err_ = Status::NotSupported("chunk: a float histogram chunk has no float samples (read it with FloatHistogramIterator)");
      return;
    case Encoding::kParts:
      err_ = Status::NotSupported("chunk: a parts chunk holds several (read one with UnwrapPart)");
      return;
  }
  err_ = Status::NotSupported("chunk: unknown encoding " + std::to_string(static_cast<int>(enc)));
}

bool Iterator::Fail(const char* what) {
  err_ = Status::Corruption(std::string(IsDeltaEncoding(enc_) ? "delta chunk: " : "xor chunk: ") + what +
                            " at sample " + std::to_string(i_));
  valid_ = false;
  return false;
}

namespace {

// Reads sample i's timestamp of an XOR or delta chunk at *r into t and
// t_delta (the last delta). nullptr, or what is wrong.
// Inlined always: out of line, NextXor was 40 % slower (the state through
// pointers to members).
[[gnu::always_inline]] inline const char* ReadTimestamp(internal::BitReader* r, uint32_t i, int64_t* t,
                                                        int64_t* t_delta) {
  if (i == 0) {
    uint64_t zt;
    if (!r->ReadUvarint(&zt)) return "bad first timestamp";
    *t = ZigZagDecode(zt);
    return nullptr;
  }
  uint64_t delta;
  if (i == 1) {
    if (!r->ReadUvarint(&delta)) return "bad timestamp delta";
  } else {
    // Delta-of-delta bucket: '0' | '10' 14 | '110' 17 | '1110' 20 | '1111' 64.
    int nbits = 0;
    for (int k = 0; k < 4; k++) {
      bool bit;
      if (!r->ReadBit(&bit)) return "truncated timestamp";
      if (!bit) break;
      nbits = k == 3 ? 64 : 14 + 3 * k;
    }
    // nbits: 0 ('0'), 14 ('10'), 17 ('110'), 20 ('1110'), 64 ('1111').
    uint64_t dod = 0;
    if (nbits != 0) {
      uint64_t raw;
      if (!r->ReadBits(nbits, &raw)) return "truncated timestamp";
      dod = nbits == 64 ? raw : static_cast<uint64_t>(SignExtend(raw, nbits));
    }
    delta = static_cast<uint64_t>(*t_delta) + dod;
  }
  *t_delta = static_cast<int64_t>(delta);
  *t = static_cast<int64_t>(static_cast<uint64_t>(*t) + delta);
  return nullptr;
}

// Sample i of an XOR chunk: its timestamp, then its value's bits (the XOR
// window in leading/trailing). The iterator's step and DecodeXor's loop.
[[gnu::always_inline]] inline const char* ReadXorSample(internal::BitReader* r, uint32_t i, int64_t* t,
                                                        int64_t* t_delta, uint64_t* bits, uint8_t* leading,
                                                        uint8_t* trailing) {
  if (const char* what = ReadTimestamp(r, i, t, t_delta)) return what;
  if (i == 0) return r->ReadBits(64, bits) ? nullptr : "truncated first value";
  return internal::ReadXorValue(r, bits, leading, trailing) ? nullptr : "bad value";
}

// Room for n more elements, growing as push_back would (callers append
// chunk after chunk: an exact reserve each time would copy quadratically).
template <typename T>
void GrowFor(std::vector<T>* v, size_t n) {
  if (v->capacity() < v->size() + n) v->reserve(std::max(v->size() + n, 2 * v->capacity()));
}

// A whole XOR chunk appended to ts and vs, the bit reader's state kept in
// registers from sample to sample (an Iterator stores it back after each).
Status DecodeXor(std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs) {
  if (data.size() < 2) return Status::Corruption("xor chunk: short header");
  const uint32_t n = (uint32_t{static_cast<uint8_t>(data[0])} << 8) | static_cast<uint8_t>(data[1]);
  GrowFor(ts, n);
  GrowFor(vs, n);
  internal::BitReader r(reinterpret_cast<const uint8_t*>(data.data()), data.size(), 16);
  int64_t t = 0, delta = 0;
  uint64_t bits = 0;
  uint8_t leading = 0, trailing = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (const char* what = ReadXorSample(&r, i, &t, &delta, &bits, &leading, &trailing)) {
      return Status::Corruption(std::string("xor chunk: ") + what + " at sample " + std::to_string(i));
    }
    ts->push_back(t);
    vs->push_back(std::bit_cast<double>(bits));
  }
  return Status::OK();
}

}  // namespace

bool Iterator::NextXor() {
  internal::BitReader r(reinterpret_cast<const uint8_t*>(data_.data()), data_.size(), pos_);
  if (const char* what = ReadXorSample(&r, i_, &t_, &t_delta_, &v_bits_, &leading_, &trailing_)) return Fail(what);
  pos_ = r.pos();
  v_ = std::bit_cast<double>(v_bits_);
  i_++;
  valid_ = true;
  return true;
}

bool Iterator::NextDelta() {
  internal::BitReader r(reinterpret_cast<const uint8_t*>(data_.data()), data_.size(), pos_);
  // Timestamps as in XOR chunks, but none written for samples 2..reg-1.
  if (i_ >= 2 && i_ < reg_) {
    t_ = static_cast<int64_t>(static_cast<uint64_t>(t_) + static_cast<uint64_t>(t_delta_));
  } else if (const char* what = ReadTimestamp(&r, i_, &t_, &t_delta_)) {
    return Fail(what);
  }
  // Value.
  if (i_ == 0) {
    bool bit;
    if (!r.ReadBit(&bit)) return Fail("truncated first value");
    if (bit) {
      if (!r.ReadBits(64, &v_bits_)) return Fail("truncated first value");
      xor_mode_ = true;
    } else {
      uint64_t e;
      int64_t m;
      if (!r.ReadBits(internal::kDeltaExpBits, &e) || e > static_cast<uint64_t>(internal::kMaxExp)) {
        return Fail("bad decimal exponent");
      }
      if (internal::ReadResidual(&r, &m) != 1 || !(m > -internal::kDeltaMantissaMax && m < internal::kDeltaMantissaMax)) {
        return Fail("bad first value");
      }
      e_ = static_cast<uint8_t>(e);
      m_ = m;
      d_ = 0;
    }
  } else if (!xor_mode_ && i_ >= internal::kDeltaMinSamplesBeforeXor && xbias_ > 0) {
    xor_mode_ = true;  // XOR has been cheaper so far: the writer switched here, unmarked
  }
  if (i_ == 0) return FinishDelta(r);
  if (xor_mode_) {
    if (!internal::ReadXorValue(&r, &v_bits_, &leading_, &trailing_)) return Fail("bad value");
  } else {
    const uint64_t prev = v_bits_;
    int cost = 0;
    int64_t x;
    // Encoding 7 codes residuals with Rice codes, the first format with
    // the classes (and a shorter escape, which xbias counts).
    const bool rice = enc_ == Encoding::kDelta;
    uint16_t kp_before = 0;  // kp_ before the last residual read
    auto read_residual = [&](int64_t* out) {
      kp_before = kp_;
      return rice ? internal::ReadRice(&r, out, &kp_) : internal::ReadResidual(&r, out);
    };
    int got = read_residual(&x);
    if (got < 0) return Fail("truncated value");
    if (got == 0) {
      bool to_xor;
      if (!r.ReadBit(&to_xor)) return Fail("truncated escape");
      if (to_xor) {
        if (!internal::ReadXorValue(&r, &v_bits_, &leading_, &trailing_)) return Fail("bad value");
        xor_mode_ = true;
      } else {
        uint64_t e;
        if (!r.ReadBits(internal::kDeltaExpBits, &e) || e <= e_ || e > static_cast<uint64_t>(internal::kMaxExp) ||
            !internal::RescaleDecimal(&m_, &d_, static_cast<int>(e) - e_)) {
          return Fail("bad decimal exponent");
        }
        e_ = static_cast<uint8_t>(e);
        cost = rice ? internal::kDeltaExpEscapeBits : internal::kResidualClasses + 1 + internal::kDeltaExpBits;
        if (read_residual(&x) != 1) return Fail("bad value after exponent change");
        got = 1;
      }
    }
    if (got == 1) {
      const int64_t dm = bias_ < 0 ? internal::WrapAdd(d_, x) : x;
      const int64_t dod = internal::WrapSub(dm, d_);
      bias_ = internal::UpdateBias(bias_, dm, dod);
      d_ = dm;
      m_ = internal::WrapAdd(m_, dm);
      cost += rice ? internal::RiceBits(x, kp_before) : internal::ResidualBits(x);
      const uint64_t cur = std::bit_cast<uint64_t>(internal::DecimalToDouble(m_, e_));
      xbias_ = internal::ClampBias(xbias_ + cost - internal::XorValueCost(prev, cur, &leading_, &trailing_));
    }
  }
  return FinishDelta(r);
}

bool Iterator::FinishDelta(const internal::BitReader& r) {
  pos_ = r.pos();
  v_ = xor_mode_ ? std::bit_cast<double>(v_bits_) : internal::DecimalToDouble(m_, e_);
  if (!xor_mode_) v_bits_ = std::bit_cast<uint64_t>(v_);
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
  if (IsDeltaEncoding(enc_)) return NextDelta();
  t_ = dt_[i_];
  v_ = dv_[i_];
  i_++;
  valid_ = true;
  return true;
}

void Iterator::ResetCounted(Encoding enc, std::string_view data, Encoding counts_enc, std::string_view counts) {
  Reset(enc, data);
  if (!err_.ok()) return;
  if (enc == Encoding::kDense && counts_enc == Encoding::kDense) {
    err_ = dense_.DecodeCounts(counts);
    counts_ = dense_.c.get();
    return;
  }
  // A young tier block's short XOR parts: both decoded whole, then read as
  // a dense chunk is.
  for (auto* v : {&other_.t, &other_.ct}) v->clear();
  for (auto* v : {&other_.v, &other_.c}) v->clear();
  Status s = DecodeAll(enc, data, &other_.t, &other_.v);
  if (s.ok()) s = DecodeAll(counts_enc, counts, &other_.ct, &other_.c);
  if (s.ok() && other_.t != other_.ct) s = Status::Corruption("chunk: counts of other points than the values'");
  if (!s.ok()) {
    err_ = std::move(s);
    return;
  }
  enc_ = Encoding::kDense;
  n_ = static_cast<uint32_t>(other_.t.size());
  dt_ = other_.t.data();
  dv_ = other_.v.data();
  counts_ = other_.c.data();
}

namespace {

// Timestamps and values of two arrays read as samples, for one
// vector::insert: it allocates once and constructs each sample from the
// pair, where a resize first zeroed them all.
struct ZipSamples {
  using iterator_category = std::forward_iterator_tag;
  using value_type = model::Sample;
  using difference_type = std::ptrdiff_t;
  using pointer = const model::Sample*;
  using reference = model::Sample;
  const int64_t* t;
  const double* v;
  model::Sample operator*() const { return {*t, *v}; }
  ZipSamples& operator++() {
    ++t;
    ++v;
    return *this;
  }
  ZipSamples operator++(int) {
    ZipSamples before = *this;
    ++*this;
    return before;
  }
  bool operator==(const ZipSamples& o) const { return t == o.t; }
};

}  // namespace

bool Iterator::AppendCountedUntil(int64_t maxt, std::vector<model::Sample>* out, std::vector<double>* counts) {
  if (enc_ == Encoding::kDense && valid_) {
    // The current sample is dt_[i_ - 1]. Mostly the whole rest of the
    // chunk goes: one resize (it grows the vector geometrically) and a copy
    // that is not a push_back a sample.
    const uint32_t from = i_ - 1;
    const int64_t* t = dt_;
    const uint32_t j = t[n_ - 1] <= maxt
                           ? n_
                           : static_cast<uint32_t>(std::upper_bound(t + from, t + n_, maxt) - t);
    out->insert(out->end(), ZipSamples{t + from, dv_ + from}, ZipSamples{t + j, dv_ + j});
    if (counts != nullptr) counts->insert(counts->end(), counts_ + from, counts_ + j);
    i_ = j;
    return Next();
  }
  do {
    if (t_ > maxt) return true;
    out->push_back({t_, v_});
    if (counts != nullptr) counts->push_back(counts_[i_ - 1]);
  } while (Next());
  return false;
}

bool Iterator::Seek(int64_t t) {
  if (!err_.ok()) return false;
  if (valid_ && t_ >= t) return true;
  if (enc_ == Encoding::kDense) {
    const int64_t* it = std::lower_bound(dt_ + i_, dt_ + n_, t);
    i_ = static_cast<uint32_t>(it - dt_);
    return Next();
  }
  while (Next()) {
    if (t_ >= t) return true;
  }
  return false;
}


Status DecodeAll(Encoding enc, std::string_view data, std::vector<int64_t>* ts, std::vector<double>* vs) {
  if (enc == Encoding::kStartTimes) {
    ASSIGN_OR_RETURN(Unwrapped u, UnwrapST(enc, data, nullptr));
    enc = u.enc;
    data = u.data;
  }
  if (enc == Encoding::kDense) return internal::DecodeDense(data, ts, vs);
  if (enc == Encoding::kXor) return DecodeXor(data, ts, vs);
  Iterator it(enc, data);
  if (it.Err().ok()) {
    const size_t n = (size_t{static_cast<uint8_t>(data[0])} << 8) | static_cast<uint8_t>(data[1]);
    GrowFor(ts, n);
    GrowFor(vs, n);
  }
  while (it.Next()) {
    ts->push_back(it.t());
    vs->push_back(it.v());
  }
  return it.Err();
}

}  // namespace trainwatch::chunkenc
