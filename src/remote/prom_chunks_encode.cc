// Prometheus chunks out: seriesToChunkEncoder's cuts and
// FloatHistogramAppender's bytes (storage/series.go,
// tsdb/chunkenc/float_histogram.go, histogram_meta.go in Prometheus 3).

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "base/check.h"
#include "remote/prom_chunks.h"
#include "remote/prom_chunks_internal.h"
#include "tsdb/chunkenc/chunk.h"

namespace trainwatch::remote {
namespace promchunk {

namespace {
// bitRange: -(2^(n-1) - 1) <= v <= 2^(n-1).
bool BitRange(int64_t v, int n) {
  const int64_t half = int64_t{1} << (n - 1);
  return v >= -(half - 1) && v <= half;
}
// Prometheus's varbit classes (varbit.go): value bits, then the prefix that
// announces them; 0 is a single 0 bit and anything wider 0xff and 64 bits.
struct VarbitClass {
  int bits;
  uint64_t prefix;
  int prefix_len;
};
constexpr VarbitClass kVarbitClasses[] = {{3, 0b10, 2},        {6, 0b110, 3},       {9, 0b1110, 4},
                                          {12, 0b11110, 5},     {18, 0b111110, 6},   {25, 0b1111110, 7},
                                          {56, 0b11111110, 8}};

}  // namespace

void PutVarbitInt(Writer* w, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  if (v == 0) {
    w->WriteBit(false);
    return;
  }
  for (const auto& c : kVarbitClasses) {
    if (BitRange(v, c.bits)) {
      w->WriteBits(c.prefix, c.prefix_len);
      w->WriteBits(u & ((uint64_t{1} << c.bits) - 1), c.bits);
      return;
    }
  }
  w->WriteBits(0xff, 8);
  w->WriteBits(u, 64);
}

void PutVarbitUint(Writer* w, uint64_t v) {
  if (v == 0) {
    w->WriteBit(false);
    return;
  }
  for (const auto& c : kVarbitClasses) {
    if (std::countl_zero(v) >= 64 - c.bits) {
      w->WriteBits(c.prefix, c.prefix_len);
      w->WriteBits(v, c.bits);
      return;
    }
  }
  w->WriteBits(0xff, 8);
  w->WriteBits(v, 64);
}

namespace {

uint64_t Bits(double d) { return std::bit_cast<uint64_t>(d); }

void PutZeroThreshold(Writer* w, double threshold) {
  if (threshold == 0) {
    w->WriteBits(0, 8);
    return;
  }
  int exp = 0;
  double frac = std::frexp(threshold, &exp);
  if (frac != 0.5 || exp < -242 || exp > 11) {
    w->WriteBits(0xff, 8);
    w->WriteBits(Bits(threshold), 64);
    return;
  }
  w->WriteBits(static_cast<uint64_t>(exp + 243), 8);
}

// putCustomBound: bounds that are whole multiples of 0.001 in [0, 33554.430]
// as the varbit bound*1000+1, others as a 0 bit and the double.
void PutCustomBound(Writer* w, double f) {
  const double tf = f * 1000;
  // Go's isWholeWhenMultiplied: uint(math.Round(f*1000)) / 1000 == f; the
  // range test comes first here so that NaN never reaches the conversion.
  if (!(tf >= 0 && tf <= 33554430) || static_cast<double>(static_cast<uint64_t>(std::round(tf))) / 1000 != f) {
    w->WriteBit(false);
    w->WriteBits(Bits(f), 64);
    return;
  }
  PutVarbitUint(w, static_cast<uint64_t>(std::round(tf)) + 1);
}

void PutSpans(Writer* w, const std::vector<model::Span>& spans) {
  PutVarbitUint(w, spans.size());
  for (const model::Span& s : spans) {
    PutVarbitUint(w, s.length);
    PutVarbitInt(w, s.offset);
  }
}

}  // namespace

void PutLayout(Writer* w, const model::FloatHistogram& h) {
  PutZeroThreshold(w, h.zero_threshold);
  PutVarbitInt(w, h.schema);
  PutSpans(w, h.positive_spans);
  PutSpans(w, h.negative_spans);
  if (model::IsCustomBucketsSchema(h.schema)) {
    PutVarbitUint(w, h.custom_values.size());
    for (double b : h.custom_values) PutCustomBound(w, b);
  }
}

uint64_t CountSpans(const std::vector<model::Span>& spans) {
  uint64_t n = 0;
  for (const model::Span& s : spans) n += s.length;
  return n;
}

namespace {

// histogram_meta.go's bucketIterator: the bucket indexes the spans cover.
class BucketIterator {
 public:
  explicit BucketIterator(const std::vector<model::Span>& spans) : spans_(spans) {
    if (!spans_.empty()) idx_ += spans_[0].offset;
  }
  bool Next(int64_t* idx) {
    if (span_ >= spans_.size()) return false;
    if (bucket_ < static_cast<int64_t>(spans_[span_].length) - 1) {
      bucket_++;
      *idx = ++idx_;
      return true;
    }
    while (span_ + 1 < spans_.size()) {
      span_++;
      idx_ += spans_[span_].offset + 1;
      bucket_ = 0;
      if (spans_[span_].length == 0) {
        idx_--;
        continue;
      }
      *idx = idx_;
      return true;
    }
    return false;
  }

 private:
  const std::vector<model::Span>& spans_;
  size_t span_ = 0;
  int64_t bucket_ = -1;
  int64_t idx_ = -1;
};

// `num` new buckets go before the pos'th bucket of the original slice;
// bucket_idx is the first new bucket's index.
struct Insert {
  int64_t pos = 0, num = 0, bucket_idx = 0;
};

// expandFloatSpansAndBuckets: inserts that widen a to b (forward) and b to
// the empty buckets of a it lacks (backward); false on a counter reset (a
// bucket shrank, or a non-empty one vanished).
bool ExpandFloatSpansAndBuckets(const std::vector<model::Span>& a, const std::vector<model::Span>& b,
                                const std::vector<double>& a_buckets, const std::vector<double>& b_buckets,
                                std::vector<Insert>* forward, std::vector<Insert>* backward) {
  BucketIterator ai(a), bi(b);
  Insert a_inter, b_inter;
  int64_t a_idx = 0, b_idx = 0;
  bool a_ok = ai.Next(&a_idx), b_ok = bi.Next(&b_idx);
  size_t a_count_idx = 0, b_count_idx = 0;
  double a_count = a_ok ? a_buckets[0] : 0, b_count = b_ok ? b_buckets[0] : 0;
  auto add_insert = [](std::vector<Insert>* inserts, Insert* ins, int64_t other_idx) {
    if (ins->num == 0) {
      ins->bucket_idx = other_idx;
    } else if (ins->bucket_idx + ins->num != other_idx) {
      inserts->push_back(*ins);
      ins->num = 0;
      ins->bucket_idx = other_idx;
    }
    ins->num++;
  };
  auto advance_a = [&] {
    if (a_inter.num > 0) {
      forward->push_back(a_inter);
      a_inter.num = 0;
    }
    a_ok = ai.Next(&a_idx);
    a_inter.pos++;
    a_count_idx++;
    if (a_ok) a_count = a_buckets[a_count_idx];
  };
  auto advance_b = [&] {
    if (b_inter.num > 0) {
      backward->push_back(b_inter);
      b_inter.num = 0;
    }
    b_ok = bi.Next(&b_idx);
    b_inter.pos++;
    b_count_idx++;
    if (b_ok) b_count = b_buckets[b_count_idx];
  };
  for (;;) {
    if (a_ok && b_ok) {
      if (a_idx == b_idx) {
        if (a_count > b_count) return false;
        advance_a();
        advance_b();
      } else if (a_idx < b_idx) {
        if (a_count != 0) return false;
        add_insert(backward, &b_inter, a_idx);
        advance_a();
      } else {
        add_insert(forward, &a_inter, b_idx);
        advance_b();
      }
    } else if (a_ok) {
      if (a_count != 0) return false;
      add_insert(backward, &b_inter, a_idx);
      advance_a();
    } else if (b_ok) {
      add_insert(forward, &a_inter, b_idx);
      advance_b();
    } else {
      if (a_inter.num > 0) forward->push_back(a_inter);
      if (b_inter.num > 0) backward->push_back(b_inter);
      return true;
    }
  }
}

// Appends a bucket index to spans being built (expandSpansBothWays' and
// adjustForInserts' addBucket).
void AddBucket(std::vector<model::Span>* spans, int64_t* last, int64_t b) {
  int64_t offset = b - *last - 1;
  if (offset == 0 && !spans->empty()) {
    spans->back().length++;
  } else {
    if (spans->empty()) offset++;
    spans->push_back(model::Span{static_cast<int32_t>(offset), 1});
  }
  *last = b;
}

// expandSpansBothWays (gauge histograms): inserts that widen a to b and b to
// a, and the union of both spans.
void ExpandSpansBothWays(const std::vector<model::Span>& a, const std::vector<model::Span>& b,
                         std::vector<Insert>* forward, std::vector<Insert>* backward, std::vector<model::Span>* merged) {
  BucketIterator ai(a), bi(b);
  Insert f_inter, b_inter;
  int64_t last = 0, av = 0, bv = 0;
  bool a_ok = ai.Next(&av), b_ok = bi.Next(&bv);
  for (;;) {
    if (a_ok && b_ok) {
      if (av == bv) {
        if (f_inter.num > 0) {
          forward->push_back(f_inter);
          f_inter.num = 0;
        }
        if (b_inter.num > 0) {
          backward->push_back(b_inter);
          b_inter.num = 0;
        }
        AddBucket(merged, &last, av);
        a_ok = ai.Next(&av);
        b_ok = bi.Next(&bv);
        f_inter.pos++;
        b_inter.pos++;
      } else if (av < bv) {
        b_inter.num++;
        if (f_inter.num > 0) {
          forward->push_back(f_inter);
          f_inter.num = 0;
        }
        AddBucket(merged, &last, av);
        f_inter.pos++;
        a_ok = ai.Next(&av);
      } else {
        f_inter.num++;
        if (b_inter.num > 0) {
          backward->push_back(b_inter);
          b_inter.num = 0;
        }
        AddBucket(merged, &last, bv);
        b_inter.pos++;
        b_ok = bi.Next(&bv);
      }
    } else if (a_ok) {
      b_inter.num++;
      AddBucket(merged, &last, av);
      a_ok = ai.Next(&av);
    } else if (b_ok) {
      f_inter.num++;
      AddBucket(merged, &last, bv);
      b_ok = bi.Next(&bv);
    } else {
      if (f_inter.num > 0) forward->push_back(f_inter);
      if (b_inter.num > 0) backward->push_back(b_inter);
      return;
    }
  }
}

// insert(in, out, inserts, deltas=false): `in` with zero buckets added.
std::vector<double> InsertBuckets(const std::vector<double>& in, uint64_t n, const std::vector<Insert>& inserts) {
  std::vector<double> out(n, 0.0);
  size_t oi = 0, ii = 0;
  for (size_t i = 0; i < in.size(); i++) {
    while (ii < inserts.size() && static_cast<int64_t>(i) == inserts[ii].pos) {
      oi += static_cast<size_t>(inserts[ii].num);
      ii++;
    }
    CHECK(oi < out.size(), "BUG: bucket inserts beyond the new spans");
    out[oi++] = in[i];
  }
  return out;  // inserts past the end are the zeros already there
}

// adjustForInserts: spans that also cover the inserted buckets.
std::vector<model::Span> AdjustForInserts(const std::vector<model::Span>& spans, const std::vector<Insert>& inserts) {
  if (inserts.empty()) return spans;
  std::vector<model::Span> merged;
  BucketIterator it(spans);
  int64_t last = 0;
  size_t i = 0;
  int64_t insert_idx = inserts[0].bucket_idx, insert_num = inserts[0].num;
  auto consume = [&] {
    if (--insert_num == 0) {
      if (++i < inserts.size()) {
        insert_idx = inserts[i].bucket_idx;
        insert_num = inserts[i].num;
      }
    } else {
      insert_idx++;
    }
  };
  int64_t bucket = 0;
  bool ok = it.Next(&bucket);
  while (ok) {
    if (i < inserts.size() && insert_idx < bucket) {
      AddBucket(&merged, &last, insert_idx);
      consume();
    } else {
      AddBucket(&merged, &last, bucket);
      ok = it.Next(&bucket);
    }
  }
  while (i < inserts.size()) {
    AddBucket(&merged, &last, insert_idx);
    consume();
  }
  return merged;
}

struct XorValue {
  double value = 0;
  uint8_t leading = 0xff, trailing = 0;
};

bool CustomBoundsMatch(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace
}  // namespace promchunk

using namespace promchunk;  // NOLINT: this file implements it

// FloatHistogramChunk with its FloatHistogramAppender's state. The samples
// as written are kept for recode, which Prometheus does by decoding the
// chunk: the same values, since XOR coding is lossless.
struct PromChunkEncoder::HistogramChunk {
  std::string buf = std::string(kHeaderSize, '\0');
  uint8_t bit_pos = 0;
  uint8_t header = kUnknownCounterReset;
  std::vector<std::pair<int64_t, model::FloatHistogram>> written;
  // The layout of the first sample.
  model::FloatHistogram layout;
  int64_t t = 0, t_delta = 0;
  XorValue sum, cnt, zcnt;
  std::vector<XorValue> pos, neg;

  size_t NumSamples() const { return written.size(); }

  // appendFloatHistogram.
  void Write(int64_t ts, const model::FloatHistogram& in) {
    model::FloatHistogram stale;
    const model::FloatHistogram* h = &in;
    if (model::IsStaleNaN(in.sum)) {
      // No buckets, and an empty layout if it is the chunk's first sample.
      stale.sum = in.sum;
      h = &stale;
    }
    Writer w(&buf, &bit_pos);
    int64_t delta = 0;
    if (written.empty()) {
      PutLayout(&w, *h);
      layout = *h;
      layout.positive_buckets.clear();
      layout.negative_buckets.clear();
      pos.assign(h->positive_buckets.size(), XorValue{});
      neg.assign(h->negative_buckets.size(), XorValue{});
      PutVarbitInt(&w, ts);
      w.WriteBits(Bits(h->count), 64);
      w.WriteBits(Bits(h->zero_count), 64);
      w.WriteBits(Bits(h->sum), 64);
      cnt.value = h->count;
      zcnt.value = h->zero_count;
      sum.value = h->sum;
      for (size_t i = 0; i < h->positive_buckets.size(); i++) {
        w.WriteBits(Bits(h->positive_buckets[i]), 64);
        pos[i].value = h->positive_buckets[i];
      }
      for (size_t i = 0; i < h->negative_buckets.size(); i++) {
        w.WriteBits(Bits(h->negative_buckets[i]), 64);
        neg[i].value = h->negative_buckets[i];
      }
    } else {
      // Go's wrapping int64 arithmetic (a series may span the whole range).
      delta = static_cast<int64_t>(static_cast<uint64_t>(ts) - static_cast<uint64_t>(t));
      PutVarbitInt(&w, static_cast<int64_t>(static_cast<uint64_t>(delta) - static_cast<uint64_t>(t_delta)));
      WriteXor(&w, &cnt, h->count);
      WriteXor(&w, &zcnt, h->zero_count);
      WriteXor(&w, &sum, h->sum);
      for (size_t i = 0; i < h->positive_buckets.size(); i++) WriteXor(&w, &pos[i], h->positive_buckets[i]);
      for (size_t i = 0; i < h->negative_buckets.size(); i++) WriteXor(&w, &neg[i], h->negative_buckets[i]);
    }
    t = ts;
    t_delta = delta;
    written.emplace_back(ts, *h);
  }

  static void WriteXor(Writer* w, XorValue* old, double v) {
    chunkenc::internal::WriteXorValue(w, Bits(old->value), Bits(v), &old->leading, &old->trailing);
    old->value = v;
  }

  std::vector<double> Values(const std::vector<XorValue>& xs) const {
    std::vector<double> out;
    out.reserve(xs.size());
    for (const XorValue& x : xs) out.push_back(x.value);
    return out;
  }

  // appendable: false when h needs a new chunk; *reset when because of a
  // counter reset.
  bool Appendable(const model::FloatHistogram& h, std::vector<Insert>* pf, std::vector<Insert>* nf,
                  std::vector<Insert>* pb, std::vector<Insert>* nb, bool* reset) const {
    *reset = false;
    if (!written.empty() && header == kGaugeType) return false;
    if (h.counter_reset_hint == model::CounterResetHint::kCounterReset) {
      *reset = true;
      return false;
    }
    if (model::IsStaleNaN(h.sum)) return true;
    if (model::IsStaleNaN(sum.value)) return false;
    if (h.count < cnt.value) {
      *reset = true;
      return false;
    }
    if (h.schema != layout.schema || h.zero_threshold != layout.zero_threshold) return false;
    if (model::IsCustomBucketsSchema(h.schema) && !CustomBoundsMatch(h.custom_values, layout.custom_values)) {
      *reset = true;
      return false;
    }
    if (h.zero_count < zcnt.value ||
        !ExpandFloatSpansAndBuckets(layout.positive_spans, h.positive_spans, Values(pos), h.positive_buckets, pf, pb) ||
        !ExpandFloatSpansAndBuckets(layout.negative_spans, h.negative_spans, Values(neg), h.negative_buckets, nf, nb)) {
      *reset = true;
      return false;
    }
    return true;
  }

  // appendableGauge.
  bool AppendableGauge(const model::FloatHistogram& h, std::vector<Insert>* pf, std::vector<Insert>* nf,
                       std::vector<Insert>* pb, std::vector<Insert>* nb, std::vector<model::Span>* pspans,
                       std::vector<model::Span>* nspans) const {
    if (!written.empty() && header != kGaugeType) return false;
    if (model::IsStaleNaN(h.sum)) return true;
    if (model::IsStaleNaN(sum.value)) return false;
    if (h.schema != layout.schema || h.zero_threshold != layout.zero_threshold) return false;
    if (model::IsCustomBucketsSchema(h.schema) && !CustomBoundsMatch(h.custom_values, layout.custom_values)) {
      return false;
    }
    ExpandSpansBothWays(layout.positive_spans, h.positive_spans, pf, pb, pspans);
    ExpandSpansBothWays(layout.negative_spans, h.negative_spans, nf, nb, nspans);
    return true;
  }

  // recode: the chunk again with the wider spans, counter reset header kept.
  void Recode(const std::vector<Insert>& pf, const std::vector<Insert>& nf, const std::vector<model::Span>& pspans,
              const std::vector<model::Span>& nspans) {
    HistogramChunk next;
    const uint64_t np = CountSpans(pspans), nn = CountSpans(nspans);
    for (auto& [ts, h] : written) {
      h.positive_spans = pspans;
      h.negative_spans = nspans;
      if (!pf.empty()) h.positive_buckets = InsertBuckets(h.positive_buckets, np, pf);
      if (!nf.empty()) h.negative_buckets = InsertBuckets(h.negative_buckets, nn, nf);
      next.Write(ts, h);
    }
    next.header = header;
    *this = std::move(next);
  }

  // recodeHistogram: h with the chunk's empty buckets it lacks.
  static void RecodeHistogram(model::FloatHistogram* h, const std::vector<Insert>& pb, const std::vector<Insert>& nb) {
    if (!pb.empty()) h->positive_buckets = InsertBuckets(h->positive_buckets, CountSpans(h->positive_spans), pb);
    if (!nb.empty()) h->negative_buckets = InsertBuckets(h->negative_buckets, CountSpans(h->negative_spans), nb);
  }

  PromChunk Take() {
    const size_t n = NumSamples();
    buf[0] = static_cast<char>(n >> 8);
    buf[1] = static_cast<char>(n & 0xff);
    buf[2] = static_cast<char>(header);
    PromChunk c{written.front().first, written.back().first, PromChunkEncoding::kFloatHistogram, std::move(buf)};
    return c;
  }
};

PromChunkEncoder::PromChunkEncoder() = default;
PromChunkEncoder::~PromChunkEncoder() { delete hist_; }

void PromChunkEncoder::Cut() {
  if (open_ == Open::kFloat && !ts_.empty()) {
    PromChunk c{ts_.front(), ts_.back(), PromChunkEncoding::kXor, {}};
    chunkenc::EncodeXor(ts_.data(), vs_.data(), ts_.size(), &c.data);
    out_.push_back(std::move(c));
  } else if (open_ == Open::kHistogram && hist_->NumSamples() > 0) {
    out_.push_back(hist_->Take());
  }
  ts_.clear();
  vs_.clear();
  delete hist_;
  hist_ = nullptr;
  open_ = Open::kNone;
  samples_ = 0;
}

// seriesToChunkEncoder's cut: a new chunk when the type changes or after
// seriesToChunkEncoderSplit (120) samples.
void PromChunkEncoder::AppendFloat(int64_t t, double v) {
  if (open_ != Open::kFloat || samples_ >= 120) {
    Cut();
    open_ = Open::kFloat;
  }
  ts_.push_back(t);
  vs_.push_back(v);
  samples_++;
}

void PromChunkEncoder::AppendHistogram(int64_t t, const model::FloatHistogram& in) {
  if (open_ != Open::kHistogram || samples_ >= 120) {
    Cut();
    open_ = Open::kHistogram;
    hist_ = new HistogramChunk;
  }
  samples_++;
  model::FloatHistogram h = in;  // the appender may widen it
  HistogramChunk* c = hist_;
  // FloatHistogramAppender.AppendFloatHistogram(prev = nil, appendOnly = false).
  if (c->NumSamples() == 0) {
    c->Write(t, h);
    if (h.counter_reset_hint == model::CounterResetHint::kGauge) {
      c->header = kGaugeType;
    } else if (h.counter_reset_hint == model::CounterResetHint::kCounterReset) {
      c->header = kCounterReset;
    }
    return;
  }
  std::vector<Insert> pf, nf, pb, nb;
  if (h.counter_reset_hint != model::CounterResetHint::kGauge) {
    bool reset = false;
    if (!c->Appendable(h, &pf, &nf, &pb, &nb, &reset)) {
      Cut();
      open_ = Open::kHistogram;
      hist_ = new HistogramChunk;
      if (reset) hist_->header = kCounterReset;
      hist_->Write(t, h);
      samples_ = 1;
      return;
    }
    if (!pb.empty() || !nb.empty()) {
      if (pf.empty() && nf.empty()) {
        h.positive_spans = c->layout.positive_spans;
        h.negative_spans = c->layout.negative_spans;
      } else {
        h.positive_spans = AdjustForInserts(h.positive_spans, pb);
        h.negative_spans = AdjustForInserts(h.negative_spans, nb);
      }
      HistogramChunk::RecodeHistogram(&h, pb, nb);
    }
    if (!pf.empty() || !nf.empty()) c->Recode(pf, nf, h.positive_spans, h.negative_spans);
    c->Write(t, h);
    return;
  }
  std::vector<model::Span> pspans, nspans;
  if (!c->AppendableGauge(h, &pf, &nf, &pb, &nb, &pspans, &nspans)) {
    Cut();
    open_ = Open::kHistogram;
    hist_ = new HistogramChunk;
    hist_->header = kGaugeType;
    hist_->Write(t, h);
    samples_ = 1;
    return;
  }
  if (!pb.empty() || !nb.empty()) {
    h.positive_spans = std::move(pspans);
    h.negative_spans = std::move(nspans);
    HistogramChunk::RecodeHistogram(&h, pb, nb);
  }
  if (!pf.empty() || !nf.empty()) c->Recode(pf, nf, h.positive_spans, h.negative_spans);
  c->Write(t, h);
}

std::vector<PromChunk> PromChunkEncoder::Finish() {
  Cut();
  return std::move(out_);
}

}  // namespace trainwatch::remote
