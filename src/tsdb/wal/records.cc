#include "tsdb/wal/records.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "base/coding.h"

namespace trainwatch::wal {

namespace {

// Smallest encoded sample: 1-byte ref delta, 1-byte time delta, 8-byte value.
constexpr size_t kMinSampleBytes = 10;

// Varint decode with an inline one-byte fast path: in a samples record most
// deltas are small.
inline const char* GetVarint(const char* p, const char* limit, uint64_t* v) {
  if (p < limit && static_cast<unsigned char>(*p) < 0x80) {
    *v = static_cast<unsigned char>(*p);
    return p + 1;
  }
  return GetVarint64Ptr(p, limit, v);
}

inline char* PutVarint(char* p, uint64_t v) {
  if (v < 0x80) {
    *p = static_cast<char>(v);
    return p + 1;
  }
  return EncodeVarint64(p, v);
}

// The type byte of samples records led by their latest timestamp.
constexpr uint8_t kSamplesTimedByte = 3;
// The type byte of histogram samples records that carry start timestamps.
constexpr uint8_t kHistogramSamplesSTByte = 6;

// Wrapping differences: any pair of int64 values round-trips.
inline int64_t Diff(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
inline int64_t Sum(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }

Status Malformed(std::string_view kind, std::string_view what) {
  std::string m("wal ");
  m += kind;
  m += " record: ";
  m += what;
  return Status::Corruption(std::move(m));
}

}  // namespace

RecordType Type(std::string_view rec) {
  if (rec.empty()) return RecordType::kUnknown;
  switch (static_cast<uint8_t>(rec[0])) {
    case static_cast<uint8_t>(RecordType::kSeries): return RecordType::kSeries;
    case static_cast<uint8_t>(RecordType::kSamples):
    case kSamplesTimedByte: return RecordType::kSamples;
    case static_cast<uint8_t>(RecordType::kHistogramSamples):
    case kHistogramSamplesSTByte: return RecordType::kHistogramSamples;
    case static_cast<uint8_t>(RecordType::kSamplesST): return RecordType::kSamplesST;
    default: return RecordType::kUnknown;
  }
}

void EncodeSeries(const std::vector<RefSeries>& series, std::string* out) {
  out->clear();
  out->push_back(static_cast<char>(RecordType::kSeries));
  PutVarint64(out, series.size());
  for (const auto& s : series) {
    PutVarint64(out, s.ref);
    model::AppendEncodedLabels(s.labels, out);
  }
}

void EncodeSeriesEncoded(const std::vector<std::pair<uint64_t, std::string_view>>& series, std::string* out) {
  out->clear();
  out->push_back(static_cast<char>(RecordType::kSeries));
  PutVarint64(out, series.size());
  for (const auto& [ref, labels] : series) {
    PutVarint64(out, ref);
    out->append(labels);
  }
}

Status DecodeSeries(std::string_view rec, std::vector<RefSeries>* out) {
  out->clear();
  if (Type(rec) != RecordType::kSeries) return Malformed("series", "wrong type byte");
  rec.remove_prefix(1);
  uint64_t n;
  if (!GetVarint64(&rec, &n)) return Malformed("series", "bad count");
  // Each series takes at least 2 bytes; don't trust n for the reservation.
  if (n > rec.size() / 2) return Malformed("series", "count exceeds record size");
  out->reserve(n);
  for (uint64_t i = 0; i < n; i++) {
    RefSeries s;
    uint64_t nlabels;
    if (!GetVarint64(&rec, &s.ref) || !GetVarint64(&rec, &nlabels)) return Malformed("series", "truncated");
    if (nlabels > rec.size() / 2) return Malformed("series", "label count exceeds record size");
    std::vector<model::Label> labels(nlabels);
    for (auto& l : labels) {
      std::string_view name, value;
      if (!GetLengthPrefixed(&rec, &name) || !GetLengthPrefixed(&rec, &value)) {
        return Malformed("series", "truncated label");
      }
      if (name.empty()) return Malformed("series", "empty label name");
      l.name.assign(name);
      l.value.assign(value);
    }
    for (size_t j = 1; j < labels.size(); j++) {
      if (!(labels[j - 1].name < labels[j].name)) return Malformed("series", "label names not sorted and unique");
    }
    s.labels = model::Labels(std::move(labels));
    out->push_back(std::move(s));
  }
  if (!rec.empty()) return Malformed("series", "trailing bytes");
  return Status::OK();
}

void EncodeSamples(const std::vector<RefSample>& samples, std::string* out) {
  // Grow the buffer a block at a time: resizing to the worst case up front
  // (28 bytes a sample) would zero-fill ~3x the typical output.
  constexpr size_t kBlock = 256;
  constexpr size_t kMaxSampleBytes = 10 + 10 + 8;
  int64_t maxt = INT64_MIN;
  for (const RefSample& s : samples) maxt = std::max(maxt, s.t);
  out->resize(1 + 10 + 10);
  char* p = out->data();
  *p++ = static_cast<char>(kSamplesTimedByte);
  p = EncodeVarint64(p, ZigZagEncode(maxt));
  p = EncodeVarint64(p, samples.size());
  size_t used = static_cast<size_t>(p - out->data());
  // Deltas from the previous sample, computed in uint64 so any pair of
  // int64 values round-trips (wrapping) without signed overflow.
  uint64_t prev_ref = 0;
  uint64_t prev_t = 0;
  for (size_t i = 0; i < samples.size(); i += kBlock) {
    const size_t end = std::min(samples.size(), i + kBlock);
    out->resize(used + (end - i) * kMaxSampleBytes);
    p = out->data() + used;
    for (size_t j = i; j < end; j++) {
      const RefSample& s = samples[j];
      p = PutVarint(p, ZigZagEncode(static_cast<int64_t>(s.ref - prev_ref)));
      auto t = static_cast<uint64_t>(s.t);
      p = PutVarint(p, ZigZagEncode(static_cast<int64_t>(t - prev_t)));
      std::memcpy(p, &s.v, 8);
      p += 8;
      prev_ref = s.ref;
      prev_t = t;
    }
    used = static_cast<size_t>(p - out->data());
  }
  out->resize(used);
}

Status DecodeSamples(std::string_view rec, std::vector<RefSample>* out) {
  if (Type(rec) != RecordType::kSamples) {
    out->clear();
    return Malformed("samples", "wrong type byte");
  }
  const char* p = rec.data() + 1;
  const char* limit = rec.data() + rec.size();
  const bool timed = static_cast<uint8_t>(rec[0]) == kSamplesTimedByte;
  uint64_t head_maxt = 0;
  if (timed) {
    p = GetVarint(p, limit, &head_maxt);
    if (p == nullptr) {
      out->clear();
      return Malformed("samples", "bad latest timestamp");
    }
  }
  uint64_t n;
  p = GetVarint(p, limit, &n);
  if (p == nullptr || n > static_cast<uint64_t>(limit - p) / kMinSampleBytes) {
    out->clear();
    return Malformed("samples", p == nullptr ? "bad count" : "count exceeds record size");
  }
  // Every element is overwritten below; resizing a reused vector of the same
  // length (the replay loop) then costs nothing.
  out->resize(n);
  RefSample* dst = out->data();
  uint64_t ref = 0;
  uint64_t t = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t dref, dt;
    p = GetVarint(p, limit, &dref);
    if (p == nullptr) break;
    p = GetVarint(p, limit, &dt);
    if (p == nullptr || limit - p < 8) {
      p = nullptr;
      break;
    }
    ref += static_cast<uint64_t>(ZigZagDecode(dref));
    t += static_cast<uint64_t>(ZigZagDecode(dt));
    dst[i].ref = ref;
    dst[i].t = static_cast<int64_t>(t);
    std::memcpy(&dst[i].v, p, 8);
    p += 8;
  }
  if (p == nullptr) {
    out->clear();
    return Malformed("samples", "truncated");
  }
  if (p != limit) {
    out->clear();
    return Malformed("samples", "trailing bytes");
  }
  if (timed) {
    // Replay skips a record on this figure: it must be the truth.
    int64_t maxt = INT64_MIN;
    for (const RefSample& s : *out) maxt = std::max(maxt, s.t);
    if (maxt != ZigZagDecode(head_maxt)) {
      out->clear();
      return Malformed("samples", "latest timestamp in the head does not match the samples");
    }
  }
  return Status::OK();
}

void PutHistogram(std::string* out, const model::FloatHistogram& h) {
  out->push_back(static_cast<char>(h.counter_reset_hint));
  PutVarsint64(out, h.schema);
  auto put_double = [out](double v) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    PutFixed64(out, b);
  };
  put_double(h.zero_threshold);
  put_double(h.zero_count);
  put_double(h.count);
  put_double(h.sum);
  for (const auto* spans : {&h.positive_spans, &h.negative_spans}) {
    PutVarint64(out, spans->size());
    for (const model::Span& sp : *spans) {
      PutVarsint64(out, sp.offset);
      PutVarint64(out, sp.length);
    }
  }
  for (const auto* vals : {&h.positive_buckets, &h.negative_buckets, &h.custom_values}) {
    PutVarint64(out, vals->size());
    for (double v : *vals) put_double(v);
  }
}

std::string GetHistogram(std::string_view* in, model::FloatHistogram* h) {
  if (in->empty()) return "truncated histogram";
  const auto hint = static_cast<uint8_t>((*in)[0]);
  if (hint > static_cast<uint8_t>(model::CounterResetHint::kGauge)) return "unknown counter reset hint";
  in->remove_prefix(1);
  h->counter_reset_hint = static_cast<model::CounterResetHint>(hint);
  int64_t schema;
  if (!GetVarsint64(in, &schema)) return "truncated histogram";
  if (schema < INT32_MIN || schema > INT32_MAX) return "schema out of range";
  h->schema = static_cast<int32_t>(schema);
  auto get_double = [in](double* v) {
    uint64_t b;
    if (!GetFixed64(in, &b)) return false;
    std::memcpy(v, &b, 8);
    return true;
  };
  if (!get_double(&h->zero_threshold) || !get_double(&h->zero_count) || !get_double(&h->count) ||
      !get_double(&h->sum)) {
    return "truncated histogram";
  }
  uint64_t covered[2] = {0, 0};
  int side = 0;
  for (auto* spans : {&h->positive_spans, &h->negative_spans}) {
    uint64_t n;
    // Each span takes at least 2 bytes.
    if (!GetVarint64(in, &n) || n > in->size() / 2) return "bad span count";
    spans->resize(n);
    for (model::Span& sp : *spans) {
      int64_t off;
      uint64_t len;
      if (!GetVarsint64(in, &off) || !GetVarint64(in, &len)) return "truncated span";
      if (off < INT32_MIN || off > INT32_MAX || len > UINT32_MAX) return "span out of range";
      sp.offset = static_cast<int32_t>(off);
      sp.length = static_cast<uint32_t>(len);
      covered[side] += len;
    }
    side++;
  }
  for (auto* vals : {&h->positive_buckets, &h->negative_buckets, &h->custom_values}) {
    uint64_t n;
    if (!GetVarint64(in, &n) || n > in->size() / 8) return "bad bucket count";
    vals->resize(n);
    for (double& v : *vals) get_double(&v);
  }
  if (covered[0] != h->positive_buckets.size() || covered[1] != h->negative_buckets.size()) {
    return "spans do not cover the buckets";
  }
  return "";
}

void EncodeSamplesST(const std::vector<RefSampleST>& samples, std::string* out) {
  int64_t maxt = INT64_MIN;
  for (const RefSampleST& s : samples) maxt = std::max(maxt, s.t);
  out->clear();
  out->push_back(static_cast<char>(RecordType::kSamplesST));
  PutVarint64(out, ZigZagEncode(maxt));
  PutVarint64(out, samples.size());
  uint64_t prev_ref = 0;
  int64_t prev_t = 0, prev_st = 0;
  for (const RefSampleST& s : samples) {
    PutVarint64(out, ZigZagEncode(static_cast<int64_t>(s.ref - prev_ref)));
    PutVarint64(out, ZigZagEncode(Diff(s.t, prev_t)));
    PutFixed64(out, std::bit_cast<uint64_t>(s.v));
    // A counter keeps its start from sample to sample: one byte.
    PutVarint64(out, ZigZagEncode(Diff(s.st, prev_st)));
    prev_ref = s.ref;
    prev_t = s.t;
    prev_st = s.st;
  }
}

Status DecodeSamplesST(std::string_view rec, std::vector<RefSampleST>* out) {
  out->clear();
  if (Type(rec) != RecordType::kSamplesST) return Malformed("samples with start timestamps", "wrong type byte");
  rec.remove_prefix(1);
  uint64_t head_maxt, n;
  if (!GetVarint64(&rec, &head_maxt) || !GetVarint64(&rec, &n)) {
    return Malformed("samples with start timestamps", "truncated head");
  }
  if (n > rec.size() / (kMinSampleBytes + 1)) return Malformed("samples with start timestamps", "count exceeds record size");
  out->resize(n);
  uint64_t ref = 0;
  int64_t t = 0, st = 0, maxt = INT64_MIN;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t dref, dt, bits, dst;
    if (!GetVarint64(&rec, &dref) || !GetVarint64(&rec, &dt) || !GetFixed64(&rec, &bits) || !GetVarint64(&rec, &dst)) {
      out->clear();
      return Malformed("samples with start timestamps", "truncated in sample " + std::to_string(i));
    }
    ref += static_cast<uint64_t>(ZigZagDecode(dref));
    t = Sum(t, ZigZagDecode(dt));
    st = Sum(st, ZigZagDecode(dst));
    RefSampleST& s = (*out)[i];
    s.ref = ref;
    s.t = t;
    s.v = std::bit_cast<double>(bits);
    s.st = st;
    maxt = std::max(maxt, t);
  }
  if (!rec.empty()) {
    out->clear();
    return Malformed("samples with start timestamps", "trailing bytes");
  }
  if (maxt != ZigZagDecode(head_maxt)) {
    out->clear();
    return Malformed("samples with start timestamps", "latest timestamp in the head does not match the samples");
  }
  return Status::OK();
}

bool SamplesSTMaxTime(std::string_view rec, int64_t* maxt) {
  if (Type(rec) != RecordType::kSamplesST) return false;
  uint64_t v;
  if (GetVarint(rec.data() + 1, rec.data() + rec.size(), &v) == nullptr) return false;
  *maxt = ZigZagDecode(v);
  return true;
}

void EncodeHistogramSamples(const std::vector<RefHistogramSample>& samples, std::string* out) {
  int64_t maxt = INT64_MIN;
  bool with_st = false;
  for (const RefHistogramSample& s : samples) {
    maxt = std::max(maxt, s.t);
    with_st = with_st || s.st != 0;
  }
  out->clear();
  out->push_back(static_cast<char>(with_st ? kHistogramSamplesSTByte : static_cast<uint8_t>(RecordType::kHistogramSamples)));
  PutVarint64(out, ZigZagEncode(maxt));
  PutVarint64(out, samples.size());
  uint64_t prev_ref = 0, prev_t = 0;
  int64_t prev_st = 0;
  for (const RefHistogramSample& s : samples) {
    PutVarint64(out, ZigZagEncode(static_cast<int64_t>(s.ref - prev_ref)));
    const auto t = static_cast<uint64_t>(s.t);
    PutVarint64(out, ZigZagEncode(static_cast<int64_t>(t - prev_t)));
    if (with_st) {
      PutVarint64(out, ZigZagEncode(Diff(s.st, prev_st)));
      prev_st = s.st;
    }
    PutHistogram(out, s.h);
    prev_ref = s.ref;
    prev_t = t;
  }
}

Status DecodeHistogramSamples(std::string_view rec, std::vector<RefHistogramSample>* out) {
  out->clear();
  if (Type(rec) != RecordType::kHistogramSamples) return Malformed("histogram samples", "wrong type byte");
  const bool with_st = static_cast<uint8_t>(rec[0]) == kHistogramSamplesSTByte;
  rec.remove_prefix(1);
  uint64_t head_maxt, n;
  if (!GetVarint64(&rec, &head_maxt) || !GetVarint64(&rec, &n)) return Malformed("histogram samples", "truncated head");
  // A histogram takes at least 2 + 1 + 1 + 32 + 5 bytes: no more than that many.
  constexpr size_t kMinHistogramSampleBytes = 41;
  if (n > rec.size() / kMinHistogramSampleBytes) return Malformed("histogram samples", "count exceeds record size");
  out->resize(n);
  uint64_t ref = 0, t = 0;
  int64_t maxt = INT64_MIN, st = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t dref, dt, dd = 0;
    if (!GetVarint64(&rec, &dref) || !GetVarint64(&rec, &dt) || (with_st && !GetVarint64(&rec, &dd))) {
      out->clear();
      return Malformed("histogram samples", "truncated");
    }
    ref += static_cast<uint64_t>(ZigZagDecode(dref));
    t += static_cast<uint64_t>(ZigZagDecode(dt));
    RefHistogramSample& s = (*out)[i];
    s.ref = ref;
    s.t = static_cast<int64_t>(t);
    st = Sum(st, ZigZagDecode(dd));
    s.st = st;
    maxt = std::max(maxt, s.t);
    if (std::string why = GetHistogram(&rec, &s.h); !why.empty()) {
      out->clear();
      return Malformed("histogram samples", why + " in sample " + std::to_string(i));
    }
  }
  if (!rec.empty()) {
    out->clear();
    return Malformed("histogram samples", "trailing bytes");
  }
  if (maxt != ZigZagDecode(head_maxt)) {
    out->clear();
    return Malformed("histogram samples", "latest timestamp in the head does not match the samples");
  }
  return Status::OK();
}

bool HistogramSamplesMaxTime(std::string_view rec, int64_t* maxt) {
  if (Type(rec) != RecordType::kHistogramSamples) return false;
  uint64_t v;
  if (GetVarint(rec.data() + 1, rec.data() + rec.size(), &v) == nullptr) return false;
  *maxt = ZigZagDecode(v);
  return true;
}

bool SamplesMaxTime(std::string_view rec, int64_t* maxt) {
  if (rec.empty() || static_cast<uint8_t>(rec[0]) != kSamplesTimedByte) return false;
  uint64_t v;
  if (GetVarint(rec.data() + 1, rec.data() + rec.size(), &v) == nullptr) return false;
  *maxt = ZigZagDecode(v);
  return true;
}

}  // namespace trainwatch::wal
