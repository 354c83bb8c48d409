#include "ingest/remote_write.h"

#include "base/proto_reader.h"
#include "base/snappy.h"
#include "base/utf8.h"

#include "ingest/clear_bounded.h"
#include "ingest/import.h"

#include <algorithm>
#include <bit>

namespace trainwatch::ingest {
namespace {

// Salts the SeriesCache key so encoded label bytes never collide with the
// text import's series texts, which share the cache.
constexpr uint64_t kCacheSalt = 0x7277'5f70'726f'746full;  // "rw_proto"

using Reader = ProtoReader;

// A Sample as every sender writes it: the value (tag 0x09, fixed64) then
// the timestamp (tag 0x10, varint), nothing else. Other encodings (a field
// left out for being zero, reordered or unknown fields) return false and
// take the general path.
bool DecodeCanonicalSample(std::string_view v, double* value, int64_t* t) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  if (v.size() < 11 || v.size() > 20 || p[0] != 0x09 || p[9] != 0x10) return false;
  uint64_t bits = 0;
  for (int i = 8; i >= 1; i--) bits = (bits << 8) | p[i];
  uint64_t ts = 0;
  for (size_t i = 10, shift = 0; i < v.size(); i++, shift += 7) {
    ts |= uint64_t{p[i] & 0x7fu} << shift;
    if ((p[i] & 0x80) == 0) {
      if (i + 1 != v.size()) return false;
      *value = std::bit_cast<double>(bits);
      *t = static_cast<int64_t>(ts);
      return true;
    }
  }
  return false;
}

std::string Quote(std::string_view s) {
  constexpr size_t kMax = 128;
  std::string out = "\"";
  out.append(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  out += '"';
  return out;
}

int64_t ZigZag64(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// BucketSpan { sint32 offset = 1; uint32 length = 2; }.
Status DecodeSpan(std::string_view msg, size_t base, std::string_view what, std::vector<model::Span>* out) {
  Reader r(msg, base);
  model::Span sp;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f == 1 || f == 2) {
      RETURN_IF_ERROR(r.Expect(w, kVarint, std::string(what) + (f == 1 ? " offset" : " length")));
      uint64_t v = 0;
      RETURN_IF_ERROR(r.Varint(&v));
      const int64_t x = f == 1 ? ZigZag64(v) : static_cast<int64_t>(v);
      if (f == 1 ? (x < INT32_MIN || x > INT32_MAX) : v > UINT32_MAX) {
        return r.Err(std::string(what) + (f == 1 ? " offset" : " length") + " out of range");
      }
      if (f == 1) sp.offset = static_cast<int32_t>(x);
      else sp.length = static_cast<uint32_t>(v);
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  out->push_back(sp);
  return Status::OK();
}

// A repeated sint64 (deltas) field, packed or not: appends the values.
Status DecodeSint64s(Reader& r, uint32_t w, std::string_view what, std::vector<int64_t>* out) {
  uint64_t v = 0;
  if (w == kVarint) {
    RETURN_IF_ERROR(r.Varint(&v));
    out->push_back(ZigZag64(v));
    return Status::OK();
  }
  RETURN_IF_ERROR(r.Expect(w, kLen, what));
  std::string_view packed;
  size_t at = 0;
  RETURN_IF_ERROR(r.Bytes(&packed, &at));
  Reader p(packed, at);
  while (!p.done()) {
    RETURN_IF_ERROR(p.Varint(&v));
    out->push_back(ZigZag64(v));
  }
  return Status::OK();
}

// A repeated double field, packed or not: appends the values.
Status DecodeDoubles(Reader& r, uint32_t w, std::string_view what, std::vector<double>* out) {
  uint64_t bits = 0;
  if (w == kFixed64) {
    RETURN_IF_ERROR(r.Fixed64(&bits));
    out->push_back(std::bit_cast<double>(bits));
    return Status::OK();
  }
  RETURN_IF_ERROR(r.Expect(w, kLen, what));
  std::string_view packed;
  size_t at = 0;
  RETURN_IF_ERROR(r.Bytes(&packed, &at));
  if (packed.size() % 8 != 0) return r.Err(std::string(what) + ": packed length " + std::to_string(packed.size()) + " is not a multiple of 8");
  Reader p(packed, at);
  while (!p.done()) {
    RETURN_IF_ERROR(p.Fixed64(&bits));
    out->push_back(std::bit_cast<double>(bits));
  }
  return Status::OK();
}

// Integer deltas to absolute float counts.
Status SumDeltas(const std::vector<int64_t>& deltas, std::string_view what, std::vector<double>* out) {
  out->clear();
  out->reserve(deltas.size());
  int64_t c = 0;
  for (int64_t d : deltas) {
    if (__builtin_add_overflow(c, d, &c)) return Status::InvalidArgument(std::string(what) + ": bucket count overflows int64");
    out->push_back(static_cast<double>(c));
  }
  return Status::OK();
}

}  // namespace

Status DecodeRemoteWriteHistogram(std::string_view msg, size_t base, model::FloatHistogram* h, int64_t* t,
                                  int64_t* st) {
  *h = model::FloatHistogram();
  *t = 0;
  if (st != nullptr) *st = 0;
  Reader r(msg, base);
  // Which member of the count oneof came last (protobuf: the last one wins);
  // an integer histogram when it is count_int or absent, as Prometheus's
  // IsFloatHistogram.
  bool float_count = false, int_fields = false, float_fields = false;
  uint64_t count_int = 0, zero_count_int = 0;
  double count_float = 0, zero_count_float = 0;
  std::vector<int64_t> pos_deltas, neg_deltas;
  std::vector<double> pos_counts, neg_counts;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    uint64_t v = 0;
    std::string_view sub;
    size_t at = 0;
    switch (f) {
      case 1:
        RETURN_IF_ERROR(r.Expect(w, kVarint, "histogram count_int"));
        RETURN_IF_ERROR(r.Varint(&count_int));
        float_count = false;
        break;
      case 2:
        RETURN_IF_ERROR(r.Expect(w, kFixed64, "histogram count_float"));
        RETURN_IF_ERROR(r.Fixed64(&v));
        count_float = std::bit_cast<double>(v);
        float_count = true;
        break;
      case 3:
        RETURN_IF_ERROR(r.Expect(w, kFixed64, "histogram sum"));
        RETURN_IF_ERROR(r.Fixed64(&v));
        h->sum = std::bit_cast<double>(v);
        break;
      case 4: {
        RETURN_IF_ERROR(r.Expect(w, kVarint, "histogram schema"));
        RETURN_IF_ERROR(r.Varint(&v));
        const int64_t schema = ZigZag64(v);
        if (schema < INT32_MIN || schema > INT32_MAX) return r.Err("histogram schema out of range");
        h->schema = static_cast<int32_t>(schema);
        break;
      }
      case 5:
        RETURN_IF_ERROR(r.Expect(w, kFixed64, "histogram zero_threshold"));
        RETURN_IF_ERROR(r.Fixed64(&v));
        h->zero_threshold = std::bit_cast<double>(v);
        break;
      case 6:
        RETURN_IF_ERROR(r.Expect(w, kVarint, "histogram zero_count_int"));
        RETURN_IF_ERROR(r.Varint(&zero_count_int));
        int_fields = true;
        break;
      case 7:
        RETURN_IF_ERROR(r.Expect(w, kFixed64, "histogram zero_count_float"));
        RETURN_IF_ERROR(r.Fixed64(&v));
        zero_count_float = std::bit_cast<double>(v);
        float_fields = true;
        break;
      case 8:
      case 11:
        RETURN_IF_ERROR(r.Expect(w, kLen, f == 8 ? "histogram negative_spans" : "histogram positive_spans"));
        RETURN_IF_ERROR(r.Bytes(&sub, &at));
        RETURN_IF_ERROR(DecodeSpan(sub, at, f == 8 ? "histogram negative_spans" : "histogram positive_spans",
                                   f == 8 ? &h->negative_spans : &h->positive_spans));
        break;
      case 9:
      case 12:
        RETURN_IF_ERROR(DecodeSint64s(r, w, f == 9 ? "histogram negative_deltas" : "histogram positive_deltas",
                                      f == 9 ? &neg_deltas : &pos_deltas));
        int_fields = true;
        break;
      case 10:
      case 13:
        RETURN_IF_ERROR(DecodeDoubles(r, w, f == 10 ? "histogram negative_counts" : "histogram positive_counts",
                                      f == 10 ? &neg_counts : &pos_counts));
        float_fields = true;
        break;
      case 14:
        RETURN_IF_ERROR(r.Expect(w, kVarint, "histogram reset_hint"));
        RETURN_IF_ERROR(r.Varint(&v));
        if (v > 3) return r.Err("histogram reset_hint: unknown value " + std::to_string(v));
        h->counter_reset_hint = static_cast<model::CounterResetHint>(v);
        break;
      case 15:
        RETURN_IF_ERROR(r.Expect(w, kVarint, "histogram timestamp"));
        RETURN_IF_ERROR(r.Varint(&v));
        *t = static_cast<int64_t>(v);
        break;
      case 16:
        RETURN_IF_ERROR(DecodeDoubles(r, w, "histogram custom_values", &h->custom_values));
        break;
      case 17:
        if (st == nullptr) {  // not a 1.0 field: skipped as unknown there
          RETURN_IF_ERROR(r.Skip(f, w));
          break;
        }
        RETURN_IF_ERROR(r.Expect(w, kVarint, "histogram start_timestamp"));
        RETURN_IF_ERROR(r.Varint(&v));
        *st = static_cast<int64_t>(v);
        break;
      default:
        RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  if (float_count) {
    if (int_fields) {
      return Status::InvalidArgument(
          "histogram: count_float with integer fields (zero_count_int, positive_deltas or negative_deltas)");
    }
    h->count = count_float;
    h->zero_count = zero_count_float;
    h->positive_buckets = std::move(pos_counts);
    h->negative_buckets = std::move(neg_counts);
  } else {
    if (float_fields) {
      return Status::InvalidArgument(
          "histogram: count_int with float fields (zero_count_float, positive_counts or negative_counts)");
    }
    h->count = static_cast<double>(count_int);
    h->zero_count = static_cast<double>(zero_count_int);
    RETURN_IF_ERROR(SumDeltas(pos_deltas, "histogram positive_deltas", &h->positive_buckets));
    RETURN_IF_ERROR(SumDeltas(neg_deltas, "histogram negative_deltas", &h->negative_buckets));
  }
  if (Status s = h->Validate(); !s.ok()) return Status::InvalidArgument("histogram: " + s.message());
  return Status::OK();
}


Result<model::Labels> DecodeRemoteWriteLabels(std::string_view label_fields) {
  std::vector<model::Label> v;
  Reader r(label_fields, 0);
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f != 1 || w != kLen) return r.Err("unexpected field " + std::to_string(f) + " among labels");
    std::string_view msg;
    RETURN_IF_ERROR(r.Bytes(&msg));
    Reader lr(msg, 0);
    model::Label l;
    while (!lr.done()) {
      uint32_t lf = 0, lw = 0;
      RETURN_IF_ERROR(lr.Tag(&lf, &lw));
      if (lf == 1 || lf == 2) {
        RETURN_IF_ERROR(lr.Expect(lw, kLen, lf == 1 ? "label name" : "label value"));
        std::string_view s;
        RETURN_IF_ERROR(lr.Bytes(&s));
        (lf == 1 ? l.name : l.value).assign(s);
      } else {
        RETURN_IF_ERROR(lr.Skip(lf, lw));
      }
    }
    if (l.name.empty()) return Status::InvalidArgument("empty label name");
    if (!model::IsValidLabelName(l.name)) return Status::InvalidArgument("invalid label name " + Quote(l.name));
    if (!IsValidUtf8(l.value)) return Status::InvalidArgument("label " + l.name + ": value is not valid UTF-8");
    if (l.name == model::kMetricName && !model::IsValidMetricName(l.value)) {
      return Status::InvalidArgument("invalid metric name " + Quote(l.value));
    }
    v.push_back(std::move(l));
  }
  // Duplicates are checked before empty values are dropped: a="" a="x" is
  // still two labels named a.
  std::vector<std::string_view> names;
  names.reserve(v.size());
  for (const model::Label& l : v) names.push_back(l.name);
  std::sort(names.begin(), names.end());
  for (size_t i = 1; i < names.size(); i++) {
    if (names[i] == names[i - 1]) return Status::InvalidArgument("duplicate label name " + Quote(names[i]));
  }
  ASSIGN_OR_RETURN(model::Labels labels, model::Labels::FromUnsorted(std::move(v)));
  if (labels.empty()) return Status::InvalidArgument("empty label set");
  return labels;
}

void RemoteWriteBatch::Clear() {
  constexpr size_t kKeepEntries = 1u << 16;
  ClearBounded(&series_, kKeepEntries);
  ClearBounded(&samples_, 4 * kKeepEntries);
  ClearBounded(&hists_, kKeepEntries);
  ClearBounded(&keys_, kKeepEntries);
  ClearBounded(&refs_, kKeepEntries);
  if (buf_.capacity() > (size_t{16} << 20)) std::string().swap(buf_);  // else kept: see SnappyBlockDecode
  scratch_.clear();
  if (index_.size() > 4 * kKeepEntries) std::vector<uint32_t>().swap(index_);
  else std::fill(index_.begin(), index_.end(), 0);
  stats_ = {};
  refusals_.Clear();
}

Status RemoteWriteBatch::ParseSnappy(std::string_view body, SeriesCache* cache, const RequestLimits& limits) {
  Clear();
  auto proto = SnappyBlockDecode(body, &buf_, limits.max_decoded_bytes);
  Status s = proto.ok() ? ParseProto(*proto, cache, limits) : proto.error();
  if (!s.ok()) Clear();
  return s;
}

uint32_t RemoteWriteBatch::FindSeries(std::string_view fields, const SeriesCache::Key& key) {
  if (!index_.empty()) {
    const size_t mask = index_.size() - 1;
    for (size_t i = key.a & mask; index_[i] != 0; i = (i + 1) & mask) {
      const uint32_t j = index_[i] - 1;
      if (keys_[j] == key && series_[j].label_fields == fields) return j;
    }
  }
  return static_cast<uint32_t>(series_.size());
}

void RemoteWriteBatch::IndexSeries(uint32_t idx) {
  auto place = [this](uint32_t j) {
    const size_t mask = index_.size() - 1;
    size_t i = keys_[j].a & mask;
    while (index_[i] != 0) i = (i + 1) & mask;
    index_[i] = j + 1;
  };
  if (2 * (size_t{idx} + 1) > index_.size()) {  // rebuild at twice the size
    index_.assign(std::max<size_t>(1024, 2 * index_.size()), 0);
    for (uint32_t j = 0; j < idx; j++) place(j);
  }
  place(idx);
}

Status RemoteWriteBatch::Parse(std::string_view proto, SeriesCache* cache, const RequestLimits& limits) {
  Clear();
  Status s = ParseProto(proto, cache, limits);
  if (!s.ok()) Clear();
  return s;
}

Status RemoteWriteBatch::ParseProto(std::string_view proto, SeriesCache* cache, const RequestLimits& limits) {
  cache_ = cache;
  limits_ = limits;
  Reader r(proto, 0);
  size_t index = 0;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f == 1) {
      RETURN_IF_ERROR(r.Expect(w, kLen, "timeseries"));
      std::string_view msg;
      size_t at = 0;
      RETURN_IF_ERROR(r.Bytes(&msg, &at));
      RETURN_IF_ERROR(ParseTimeSeries(msg, at, index++));
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));  // metadata (3) and unknown fields
    }
  }
  if (cache_ != nullptr) RETURN_IF_ERROR(ResolveSeries());
  stats_.samples = samples_.size();
  stats_.histograms = hists_.size();
  stats_.series = series_.size();
  return Status::OK();
}

Status RemoteWriteBatch::ParseTimeSeries(std::string_view msg, size_t base, size_t index) {
  Reader r(msg, base);
  // The Label submessages (tags included). Senders write them contiguously;
  // otherwise they are concatenated into scratch_.
  size_t fields_begin = 0, fields_end = 0;
  bool have_labels = false;
  std::string* joined = nullptr;
  size_t first_sample = samples_.size();
  size_t first_hist = hists_.size();
  while (!r.done()) {
    size_t field_start = r.pos();
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    switch (f) {
      case 1: {  // Label
        RETURN_IF_ERROR(r.Expect(w, kLen, "label"));
        std::string_view v;
        RETURN_IF_ERROR(r.Bytes(&v));
        if (!have_labels) {
          have_labels = true;
          fields_begin = field_start;
        } else if (joined == nullptr && field_start != fields_end) {
          joined = &scratch_.emplace_back(msg.substr(fields_begin, fields_end - fields_begin));
        }
        if (joined != nullptr) joined->append(msg.substr(field_start, r.pos() - field_start));
        fields_end = r.pos();
        break;
      }
      case 2: {  // Sample { double value = 1; int64 timestamp = 2; }
        RETURN_IF_ERROR(r.Expect(w, kLen, "sample"));
        std::string_view v;
        size_t at = 0;
        RETURN_IF_ERROR(r.Bytes(&v, &at));
        Entry e{0, 0, 0.0};
        if (!limits_.SamplesOk(samples_.size() + 1)) return limits_.TooManySamples();
        if (DecodeCanonicalSample(v, &e.v, &e.t)) {
          samples_.push_back(e);
          break;
        }
        Reader sr(v, at);
        while (!sr.done()) {
          uint32_t sf = 0, sw = 0;
          RETURN_IF_ERROR(sr.Tag(&sf, &sw));
          if (sf == 1) {
            RETURN_IF_ERROR(sr.Expect(sw, kFixed64, "sample value"));
            uint64_t bits = 0;
            RETURN_IF_ERROR(sr.Fixed64(&bits));
            e.v = std::bit_cast<double>(bits);
          } else if (sf == 2) {
            RETURN_IF_ERROR(sr.Expect(sw, kVarint, "sample timestamp"));
            uint64_t t = 0;
            RETURN_IF_ERROR(sr.Varint(&t));
            e.t = static_cast<int64_t>(t);
          } else {
            RETURN_IF_ERROR(sr.Skip(sf, sw));
          }
        }
        samples_.push_back(e);
        break;
      }
      case 3:  // Exemplar
        RETURN_IF_ERROR(r.Skip(f, w));
        stats_.exemplars++;
        break;
      case 4:  // native Histogram
        RETURN_IF_ERROR(ParseHistogramField(r, w, base, index, first_hist));
        break;
      default:
        RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  std::string_view fields =
      joined != nullptr ? std::string_view(*joined) : msg.substr(fields_begin, fields_end - fields_begin);
  if (!have_labels) return SeriesError(index, base, Status::InvalidArgument("empty label set"));
  bool has_samples = first_sample != samples_.size() || first_hist != hists_.size();
  const SeriesCache::Key key = SeriesCache::KeyOf(fields, kCacheSalt);
  uint32_t idx = FindSeries(fields, key);
  if (idx == series_.size()) {
    // With a cache, a series with samples is looked up (and if unknown
    // decoded) in ResolveSeries; one with only exemplars is validated here,
    // not stored.
    model::Labels labels;
    if (cache_ == nullptr || (!has_samples && cache_->Get(key) == 0)) {
      auto l = DecodeRemoteWriteLabels(fields);
      if (!l.ok()) return SeriesError(index, base, l.error());
      labels = std::move(*l);
    }
    if (!has_samples) return Status::OK();
    if (!limits_.SeriesOk(series_.size() + 1)) return limits_.TooManySeries();
    series_.push_back(Series{std::move(labels), fields, static_cast<uint32_t>(index), base});
    keys_.push_back(key);
    refs_.push_back(0);
    IndexSeries(idx);
  }
  for (size_t i = first_sample; i < samples_.size(); i++) samples_[i].series = idx;
  for (size_t i = first_hist; i < hists_.size(); i++) hists_[i].series = idx;
  return Status::OK();
}

Status RemoteWriteBatch::ResolveSeries() {
  cache_->GetMany(keys_, refs_);
  for (size_t i = 0; i < series_.size(); i++) {
    if (refs_[i] != 0) continue;
    Series& s = series_[i];
    auto l = DecodeRemoteWriteLabels(s.label_fields);
    if (!l.ok()) return SeriesError(s.index, s.base, l.error());
    s.labels = std::move(*l);
  }
  return Status::OK();
}

[[gnu::noinline]] Status RemoteWriteBatch::ParseHistogramField(Reader& r, uint32_t wire, size_t base, size_t index,
                                                               size_t first_hist) {
  RETURN_IF_ERROR(r.Expect(wire, kLen, "histogram"));
  std::string_view v;
  size_t at = 0;
  RETURN_IF_ERROR(r.Bytes(&v, &at));
  if (!limits_.SamplesOk(samples_.size() + hists_.size() + 1)) return limits_.TooManySamples();
  HistEntry& e = hists_.emplace_back();
  Status s = DecodeRemoteWriteHistogram(v, at, &e.h, &e.t);
  if (!s.ok()) {
    return SeriesError(index, base,
                       Status::InvalidArgument("histogram " + std::to_string(hists_.size() - 1 - first_hist) + ": " +
                                               s.message()));
  }
  return Status::OK();
}

[[gnu::noinline]] Status RemoteWriteBatch::SeriesError(size_t index, size_t base, const Status& s) {
  return Status::InvalidArgument("timeseries " + std::to_string(index) + " (offset " + std::to_string(base) +
                                 "): " + s.message());
}

Status RemoteWriteBatch::AppendTo(storage::Appender* app) {
  for (const Entry& e : samples_) {
    storage::SeriesRef& ref = refs_[e.series];
    if (ref != 0 && app->AppendByRef(ref, e.t, e.v)) continue;
    Series& s = series_[e.series];
    if (s.labels.empty()) {
      // The cached ref went stale; the fields decoded before, so this succeeds.
      ASSIGN_OR_RETURN(s.labels, DecodeRemoteWriteLabels(s.label_fields));
    }
    auto got = app->Append(0, s.labels, e.t, e.v);
    if (!got.ok() && refusals_.Take(got.error())) continue;
    if (!got.ok()) return got.error().Annotate("series " + s.labels.ToString());
    ref = *got;
    if (cache_ != nullptr && ref != 0) cache_->Put(keys_[e.series], ref);
  }
  for (const HistEntry& e : hists_) {
    storage::SeriesRef& ref = refs_[e.series];
    Series& s = series_[e.series];
    if (s.labels.empty()) {
      ASSIGN_OR_RETURN(s.labels, DecodeRemoteWriteLabels(s.label_fields));
    }
    auto got = app->AppendHistogram(ref, s.labels, e.t, e.h);
    if (!got.ok() && refusals_.Take(got.error())) continue;
    if (!got.ok()) return got.error().Annotate("series " + s.labels.ToString());
    if (ref == 0 && *got != 0) {
      ref = *got;
      if (cache_ != nullptr) cache_->Put(keys_[e.series], ref);
    }
  }
  return Status::OK();
}

Result<RemoteWriteStats> RemoteWrite(std::string_view body, SeriesCache* cache, storage::Appendable& db,
                                     const RequestLimits& limits) {
  RemoteWriteBatch batch;
  RETURN_IF_ERROR(batch.ParseSnappy(body, cache, limits));
  const uint64_t total = batch.stats().samples + batch.stats().histograms;
  if (total == 0) return batch.stats();
  RETURN_IF_ERROR(AppendAndCommit(db, [&](storage::Appender* app) { return batch.AppendTo(app); }));
  RETURN_IF_ERROR(batch.refusals().After(total));
  return batch.stats();
}

}  // namespace trainwatch::ingest
