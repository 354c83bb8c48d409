#include "ingest/proto_parser.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "base/proto_reader.h"
#include "base/utf8.h"
#include "model/nhcb.h"

namespace trainwatch::ingest {
namespace {

// MetricType of metrics.proto.
enum : int { kCounter = 0, kGauge = 1, kSummary = 2, kUntyped = 3, kHistogram = 4, kGaugeHistogram = 5 };

std::string_view TypeName(int t) {
  switch (t) {
    case kCounter: return "counter";
    case kGauge: return "gauge";
    case kSummary: return "summary";
    case kHistogram: return "histogram";
    case kGaugeHistogram: return "gaugehistogram";
    default: return "unknown";
  }
}

// The repeated fields of one side of a native histogram.
struct Side {
  std::vector<model::Span> spans;
  std::vector<int64_t> deltas;
  std::vector<double> counts;
};

struct ClassicBucket {
  double cumulative = 0;
  double upper = 0;
};

// Histogram, Summary (fields read into the same struct: a summary's
// sample_count, sample_sum and quantiles use fields 1, 2, 3).
struct HistogramMsg {
  uint64_t count = 0;
  double count_float = 0;
  double sum = 0;
  std::vector<ClassicBucket> buckets;  // summary: (quantile, value) in (upper, cumulative)
  int32_t schema = 0;
  double zero_threshold = 0;
  uint64_t zero_count = 0;
  double zero_count_float = 0;
  Side neg, pos;
  int64_t st = 0;  // created_timestamp (Histogram 15, Summary 4), ms; 0: none
};

Status Double(ProtoReader& r, uint32_t wire, std::string_view what, double* v) {
  RETURN_IF_ERROR(r.Expect(wire, kFixed64, what));
  uint64_t bits = 0;
  RETURN_IF_ERROR(r.Fixed64(&bits));
  *v = std::bit_cast<double>(bits);
  return Status::OK();
}

Status Uint(ProtoReader& r, uint32_t wire, std::string_view what, uint64_t* v) {
  RETURN_IF_ERROR(r.Expect(wire, kVarint, what));
  return r.Varint(v);
}

int64_t ZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

// A google.protobuf.Timestamp {seconds=1, nanos=2} in ms, as Prometheus's
// StartTimestamp computes it: seconds*1e3 + nanos/1e6, without validation
// (and wrapping as Go's int64 does).
Status Timestamp(ProtoReader& r, uint32_t wire, std::string_view what, int64_t* ms) {
  RETURN_IF_ERROR(r.Expect(wire, kLen, what));
  std::string_view m;
  size_t at = 0;
  RETURN_IF_ERROR(r.Bytes(&m, &at));
  ProtoReader tr(m, at);
  uint64_t seconds = 0, nanos = 0;
  while (!tr.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(tr.Tag(&f, &w));
    if (f == 1 || f == 2) {
      RETURN_IF_ERROR(Uint(tr, w, std::string(what) + (f == 1 ? ".seconds" : ".nanos"), f == 1 ? &seconds : &nanos));
    } else {
      RETURN_IF_ERROR(tr.Skip(f, w));
    }
  }
  // nanos is an int32: a negative one is sent as a 64-bit varint.
  const int64_t n = static_cast<int32_t>(static_cast<uint32_t>(nanos));
  *ms = static_cast<int64_t>(seconds * 1000 + static_cast<uint64_t>(n / 1000000));
  return Status::OK();
}

// A packed or unpacked repeated scalar: calls fn(ProtoReader&) per element.
template <typename Fn>
Status Repeated(ProtoReader& r, uint32_t wire, uint32_t elem_wire, std::string_view what, Fn&& fn) {
  if (wire == elem_wire) return fn(r);
  RETURN_IF_ERROR(r.Expect(wire, kLen, what));
  std::string_view packed;
  size_t at = 0;
  RETURN_IF_ERROR(r.Bytes(&packed, &at));
  ProtoReader sub(packed, at);
  while (!sub.done()) RETURN_IF_ERROR(fn(sub));
  return Status::OK();
}

Status ReadSpan(std::string_view msg, size_t at, model::Span* s) {
  ProtoReader r(msg, at);
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    uint64_t v = 0;
    if (f == 1) {
      RETURN_IF_ERROR(Uint(r, w, "BucketSpan.offset", &v));
      int64_t o = ZigZag(v);
      if (o < INT32_MIN || o > INT32_MAX) return r.Err("BucketSpan.offset out of range");
      s->offset = static_cast<int32_t>(o);
    } else if (f == 2) {
      RETURN_IF_ERROR(Uint(r, w, "BucketSpan.length", &v));
      if (v > UINT32_MAX) return r.Err("BucketSpan.length out of range");
      s->length = static_cast<uint32_t>(v);
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  return Status::OK();
}

// Bucket (classic histogram) or Quantile (summary: quantile=1, value=2).
Status ReadBucket(std::string_view msg, size_t at, bool quantile, ClassicBucket* b) {
  ProtoReader r(msg, at);
  uint64_t count = 0;
  double count_float = 0;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (quantile) {
      if (f == 1) RETURN_IF_ERROR(Double(r, w, "Quantile.quantile", &b->upper));
      else if (f == 2) RETURN_IF_ERROR(Double(r, w, "Quantile.value", &b->cumulative));
      else RETURN_IF_ERROR(r.Skip(f, w));
      continue;
    }
    switch (f) {
      case 1: RETURN_IF_ERROR(Uint(r, w, "Bucket.cumulative_count", &count)); break;
      case 2: RETURN_IF_ERROR(Double(r, w, "Bucket.upper_bound", &b->upper)); break;
      case 4: RETURN_IF_ERROR(Double(r, w, "Bucket.cumulative_count_float", &count_float)); break;
      default: RETURN_IF_ERROR(r.Skip(f, w)); break;  // 3: exemplar
    }
  }
  if (!quantile) b->cumulative = count_float > 0 ? count_float : static_cast<double>(count);
  return Status::OK();
}

Status ReadSideField(ProtoReader& r, uint32_t f, uint32_t w, Side* side, std::string_view prefix) {
  const uint32_t k = (f - 9) % 3;  // 9/12 span, 10/13 delta, 11/14 count
  if (k == 0) {
    RETURN_IF_ERROR(r.Expect(w, kLen, std::string(prefix) + "_span"));
    std::string_view m;
    size_t at = 0;
    RETURN_IF_ERROR(r.Bytes(&m, &at));
    RETURN_IF_ERROR(ReadSpan(m, at, &side->spans.emplace_back()));
  } else if (k == 1) {
    RETURN_IF_ERROR(Repeated(r, w, kVarint, std::string(prefix) + "_delta", [&](ProtoReader& x) {
      uint64_t v = 0;
      RETURN_IF_ERROR(x.Varint(&v));
      side->deltas.push_back(ZigZag(v));
      return Status::OK();
    }));
  } else {
    RETURN_IF_ERROR(Repeated(r, w, kFixed64, std::string(prefix) + "_count", [&](ProtoReader& x) {
      uint64_t bits = 0;
      RETURN_IF_ERROR(x.Fixed64(&bits));
      side->counts.push_back(std::bit_cast<double>(bits));
      return Status::OK();
    }));
  }
  return Status::OK();
}

Status ReadHistogram(std::string_view msg, size_t at, bool summary, HistogramMsg* h) {
  ProtoReader r(msg, at);
  const std::string_view m = summary ? "Summary" : "Histogram";
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f == 1) {
      RETURN_IF_ERROR(Uint(r, w, std::string(m) + ".sample_count", &h->count));
    } else if (f == 2) {
      RETURN_IF_ERROR(Double(r, w, std::string(m) + ".sample_sum", &h->sum));
    } else if (f == 3) {
      RETURN_IF_ERROR(r.Expect(w, kLen, summary ? "Summary.quantile" : "Histogram.bucket"));
      std::string_view b;
      size_t bat = 0;
      RETURN_IF_ERROR(r.Bytes(&b, &bat));
      RETURN_IF_ERROR(ReadBucket(b, bat, summary, &h->buckets.emplace_back()));
    } else if (summary) {
      if (f == 4) RETURN_IF_ERROR(Timestamp(r, w, "Summary.created_timestamp", &h->st));
      else RETURN_IF_ERROR(r.Skip(f, w));
    } else if (f == 4) {
      RETURN_IF_ERROR(Double(r, w, "Histogram.sample_count_float", &h->count_float));
    } else if (f == 5) {
      uint64_t v = 0;
      RETURN_IF_ERROR(Uint(r, w, "Histogram.schema", &v));
      int64_t s = ZigZag(v);
      if (s < INT32_MIN || s > INT32_MAX) return r.Err("Histogram.schema out of range");
      h->schema = static_cast<int32_t>(s);
    } else if (f == 6) {
      RETURN_IF_ERROR(Double(r, w, "Histogram.zero_threshold", &h->zero_threshold));
    } else if (f == 7) {
      RETURN_IF_ERROR(Uint(r, w, "Histogram.zero_count", &h->zero_count));
    } else if (f == 8) {
      RETURN_IF_ERROR(Double(r, w, "Histogram.zero_count_float", &h->zero_count_float));
    } else if (f >= 9 && f <= 11) {
      RETURN_IF_ERROR(ReadSideField(r, f, w, &h->neg, "Histogram.negative"));
    } else if (f >= 12 && f <= 14) {
      RETURN_IF_ERROR(ReadSideField(r, f, w, &h->pos, "Histogram.positive"));
    } else if (f == 15) {
      RETURN_IF_ERROR(Timestamp(r, w, "Histogram.created_timestamp", &h->st));
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));  // 16 exemplars
    }
  }
  return Status::OK();
}

bool IsNative(const HistogramMsg& h) {
  return !h.pos.spans.empty() || !h.neg.spans.empty() || h.zero_threshold > 0 || h.zero_count > 0;
}

// Prometheus's Histogram(): float counts when sample_count_float or
// zero_count_float is > 0, else integer deltas.
model::FloatHistogram ToFloatHistogram(const HistogramMsg& h, bool gauge) {
  model::FloatHistogram fh;
  const bool is_float = h.count_float > 0 || h.zero_count_float > 0;
  fh.schema = h.schema;
  fh.zero_threshold = h.zero_threshold;
  fh.sum = h.sum;
  fh.count = is_float ? h.count_float : static_cast<double>(h.count);
  fh.zero_count = is_float ? h.zero_count_float : static_cast<double>(h.zero_count);
  fh.positive_spans = h.pos.spans;
  fh.negative_spans = h.neg.spans;
  auto fill = [is_float](const Side& s, std::vector<double>* out) {
    if (is_float) {
      *out = s.counts;
      return;
    }
    int64_t abs = 0;
    for (int64_t d : s.deltas) {
      abs = static_cast<int64_t>(static_cast<uint64_t>(abs) + static_cast<uint64_t>(d));  // wraps as Go's
      out->push_back(static_cast<double>(abs));
    }
  };
  fill(h.pos, &fh.positive_buckets);
  fill(h.neg, &fh.negative_buckets);
  if (gauge) fh.counter_reset_hint = model::CounterResetHint::kGauge;
  return fh;
}

bool ValidName(std::string_view s) { return !s.empty() && IsValidUtf8(s); }

}  // namespace

bool IsProtobufContentType(std::string_view ct) {
  size_t semi = ct.find(';');
  std::string_view media = ct.substr(0, semi);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  if (media.size() != kProtoMediaType.size()) return false;
  for (size_t i = 0; i < media.size(); i++) {
    char c = media[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kProtoMediaType[i]) return false;
  }
  return true;
}

std::string FormatOpenMetricsFloat(double f) {
  if (f == 1) return "1.0";
  if (f == 0) return "0.0";
  if (f == -1) return "-1.0";
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "+Inf" : "-Inf";
  // Shortest round-trip digits, laid out as Go's %g with precision -1:
  // exponent form when the exponent is < -4 or >= 21.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  size_t e = sci.find('e');
  std::string_view mant = sci.substr(0, e);
  int exp = std::atoi(std::string(sci.substr(e + 1)).c_str());
  std::string sign;
  if (mant[0] == '-') {
    sign = "-";
    mant.remove_prefix(1);
  }
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits += c;
  }
  std::string out = sign;
  if (exp < -4 || exp >= 21) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += exp < 0 ? "e-" : "e+";
    int ae = exp < 0 ? -exp : exp;
    if (ae < 10) out += '0';
    out += std::to_string(ae);
    return out;
  }
  if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
    out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
  }
  return out;
}

ProtoParser::ProtoParser(std::string_view body, ProtoParseOptions opts) : body_(body), opts_(std::move(opts)) {}

bool ProtoParser::Next() {
  if (!status_.ok()) return false;
  while (next_ >= pending_.size()) {
    if (pos_ >= body_.size()) return false;
    status_ = ReadFamily();
    if (!status_.ok()) return false;
  }
  Emit();
  return true;
}

Status ProtoParser::ReadFamily() {
  pending_.clear();
  metrics_.clear();
  hists_.clear();
  next_ = 0;
  ProtoReader outer(body_.substr(pos_), pos_);
  const size_t at_family = pos_;
  std::string_view msg;
  size_t at = 0;
  RETURN_IF_ERROR(outer.Bytes(&msg, &at));
  pos_ += outer.pos();
  ProtoReader r(msg, at);
  std::string_view help, unit;
  uint64_t type = kCounter;
  std::vector<std::pair<std::string_view, size_t>> metric_msgs;
  family_ = {};
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    std::string_view* str = f == 1 ? &family_ : f == 2 ? &help : f == 5 ? &unit : nullptr;
    if (str != nullptr) {
      RETURN_IF_ERROR(r.Expect(w, kLen, f == 1 ? "MetricFamily.name" : f == 2 ? "MetricFamily.help" : "MetricFamily.unit"));
      RETURN_IF_ERROR(r.Bytes(str));
    } else if (f == 3) {
      RETURN_IF_ERROR(Uint(r, w, "MetricFamily.type", &type));
    } else if (f == 4) {
      RETURN_IF_ERROR(r.Expect(w, kLen, "MetricFamily.metric"));
      std::string_view m;
      size_t mat = 0;
      RETURN_IF_ERROR(r.Bytes(&m, &mat));
      metric_msgs.emplace_back(m, mat);
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  const std::string where = "metric family at offset " + std::to_string(at_family);
  if (metric_msgs.empty()) return Status::OK();  // skipped, as Prometheus skips empty families
  if (!ValidName(family_)) return Status::InvalidArgument(where + ": invalid metric name \"" + std::string(family_) + "\"");
  if (!IsValidUtf8(help)) return Status::InvalidArgument(where + ": invalid help for metric \"" + std::string(family_) + "\"");
  if (type > kGaugeHistogram) {
    return Status::InvalidArgument(where + ": unknown metric type " + std::to_string(type) + " for metric \"" +
                                   std::string(family_) + "\"");
  }
  if (!IsValidUtf8(unit)) return Status::InvalidArgument(where + ": invalid unit for metric \"" + std::string(family_) + "\"");
  if (opts_.on_metadata) {
    MetadataLine ml{MetadataLine::Kind::kHelp, count_ + 1, family_, help};
    if (!help.empty()) opts_.on_metadata(ml);
    ml.kind = MetadataLine::Kind::kType;
    ml.text = TypeName(static_cast<int>(type));
    opts_.on_metadata(ml);
    if (!unit.empty()) {
      ml.kind = MetadataLine::Kind::kUnit;
      ml.text = unit;
      opts_.on_metadata(ml);
    }
  }
  for (const auto& [m, mat] : metric_msgs) RETURN_IF_ERROR(ReadMetric(m, mat, static_cast<int>(type)));
  return Status::OK();
}

Status ProtoParser::ReadMetric(std::string_view msg, size_t at, int type) {
  const size_t idx = metrics_.size();
  Metric& met = metrics_.emplace_back();
  ProtoReader r(msg, at);
  double value = 0;
  HistogramMsg h;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    // The value field of this family's type; the others are ignored as
    // Prometheus's Get<Type>() ignores them.
    const int want = type == kCounter ? 3 : type == kGauge ? 2 : type == kUntyped ? 5 : type == kSummary ? 4 : 7;
    if (f == 1) {
      RETURN_IF_ERROR(r.Expect(w, kLen, "Metric.label"));
      std::string_view lm;
      size_t lat = 0;
      RETURN_IF_ERROR(r.Bytes(&lm, &lat));
      ProtoReader lr(lm, lat);
      LabelRef l;
      while (!lr.done()) {
        uint32_t lf = 0, lw = 0;
        RETURN_IF_ERROR(lr.Tag(&lf, &lw));
        if (lf == 1 || lf == 2) {
          RETURN_IF_ERROR(lr.Expect(lw, kLen, lf == 1 ? "LabelPair.name" : "LabelPair.value"));
          RETURN_IF_ERROR(lr.Bytes(lf == 1 ? &l.name : &l.value));
        } else {
          RETURN_IF_ERROR(lr.Skip(lf, lw));
        }
      }
      if (!ValidName(l.name) || !IsValidUtf8(l.value)) {
        return lr.ErrAt(0, "invalid label " + std::string(l.name.substr(0, 64)) + " of metric \"" + std::string(family_) + "\"");
      }
      met.labels.push_back(l);
    } else if (f == 6) {
      uint64_t v = 0;
      RETURN_IF_ERROR(Uint(r, w, "Metric.timestamp_ms", &v));
      met.timestamp_ms = static_cast<int64_t>(v);
    } else if (f == static_cast<uint32_t>(want)) {
      RETURN_IF_ERROR(r.Expect(w, kLen, "Metric value"));
      std::string_view vm;
      size_t vat = 0;
      RETURN_IF_ERROR(r.Bytes(&vm, &vat));
      if (type == kSummary || type == kHistogram || type == kGaugeHistogram) {
        h = HistogramMsg{};
        RETURN_IF_ERROR(ReadHistogram(vm, vat, type == kSummary, &h));
        met.st = h.st;
        continue;
      }
      // Gauge, Counter, Untyped: value is field 1 (Counter: 2 exemplar, 3 created_timestamp).
      ProtoReader vr(vm, vat);
      met.st = 0;
      while (!vr.done()) {
        uint32_t vf = 0, vw = 0;
        RETURN_IF_ERROR(vr.Tag(&vf, &vw));
        if (vf == 1) RETURN_IF_ERROR(Double(vr, vw, "value", &value));
        else if (vf == 3 && type == kCounter) RETURN_IF_ERROR(Timestamp(vr, vw, "Counter.created_timestamp", &met.st));
        else RETURN_IF_ERROR(vr.Skip(vf, vw));
      }
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  auto add = [&](std::string suffix, double v, std::string magic_name = {}, std::string magic_value = {}) {
    Pending p;
    p.metric = idx;
    p.kind = 0;
    p.suffix = std::move(suffix);
    p.value = v;
    p.magic_name = std::move(magic_name);
    p.magic_value = std::move(magic_value);
    pending_.push_back(std::move(p));
  };
  if (type == kCounter || type == kGauge || type == kUntyped) {
    add("", value);
    return Status::OK();
  }
  if (type == kSummary) {
    add("_count", static_cast<double>(h.count));
    add("_sum", h.sum);
    for (const ClassicBucket& q : h.buckets) add("", q.cumulative, "quantile", FormatOpenMetricsFloat(q.upper));
    return Status::OK();
  }
  const bool native = opts_.native_histograms && IsNative(h);
  if (native) {
    model::FloatHistogram fh = ToFloatHistogram(h, type == kGaugeHistogram);
    fh.Compact(0);
    Status v = fh.Validate();
    if (!v.ok()) {
      return Status::InvalidArgument("metric at offset " + std::to_string(at) + ": histogram \"" + std::string(family_) +
                                     "\": " + v.message());
    }
    Pending p;
    p.metric = idx;
    p.kind = 1;
    p.hist = hists_.size();
    hists_.push_back(std::move(fh));
    pending_.push_back(std::move(p));
    if (!opts_.keep_classic || h.buckets.empty()) return Status::OK();
  }
  const double count = h.count_float > 0 ? h.count_float : static_cast<double>(h.count);
  auto add_classic = [&] {
    add("_count", count);
    add("_sum", h.sum);
    bool inf = false;
    for (const ClassicBucket& b : h.buckets) {
      add("_bucket", b.cumulative, "le", FormatOpenMetricsFloat(b.upper));
      if (std::isinf(b.upper) && b.upper > 0) {
        inf = true;
        break;
      }
    }
    if (!inf) add("_bucket", count, "le", "+Inf");
  };
  if (!native && opts_.convert_nhcb) {
    // Prometheus's ProtobufParser.convertToNHCB: the classic buckets as
    // read, through util/convertnhcb; a histogram that does not convert
    // fails the parse.
    model::NhcbBuilder nb;
    Status s = nb.SetCount(count);
    if (s.ok()) s = nb.SetSum(h.sum);
    for (const ClassicBucket& b : h.buckets) {
      if (s.ok()) s = nb.SetBucketCount(b.upper, b.cumulative);
    }
    Result<model::FloatHistogram> fh = s.ok() ? nb.Convert() : Result<model::FloatHistogram>(s);
    // Unlike Prometheus's parser this one validates it too: _count below a
    // bucket's count would leave a negative +Inf bucket.
    if (fh.ok()) s = fh->Validate();
    if (!fh.ok() || !s.ok()) {
      return Status::InvalidArgument("metric at offset " + std::to_string(at) + ": histogram \"" + std::string(family_) +
                                     "\": convert to native histogram with custom buckets: " +
                                     (fh.ok() ? s.message() : fh.error().message()));
    }
    if (type == kGaugeHistogram) fh->counter_reset_hint = model::CounterResetHint::kGauge;
    if (opts_.keep_classic) add_classic();
    Pending p;
    p.metric = idx;
    p.kind = 1;
    p.hist = hists_.size();
    hists_.push_back(std::move(*fh));
    pending_.push_back(std::move(p));
    return Status::OK();
  }
  add_classic();
  return Status::OK();
}

void ProtoParser::Emit() {
  const Pending& p = pending_[next_++];
  const Metric& m = metrics_[p.metric];
  name_.assign(family_);
  name_ += p.suffix;
  labels_.clear();
  for (const LabelRef& l : m.labels) {
    // The family name wins over a __name__ label, as Prometheus's builder
    // adds the name first and then the labels.
    if (l.name == "__name__") continue;
    labels_.push_back(l);
  }
  if (!p.magic_name.empty()) labels_.push_back({p.magic_name, p.magic_value});
  // The cache key: name and labels joined by 0xff (never in valid UTF-8).
  key_.assign(name_);
  for (const LabelRef& l : labels_) {
    key_ += '\xff';
    key_ += l.name;
    key_ += '\xff';
    key_ += l.value;
  }
  sample_ = TextSample{};
  sample_.line = ++count_;
  sample_.series = key_;
  sample_.name = name_;
  sample_.labels = labels_.data();
  sample_.num_labels = labels_.size();
  sample_.value = p.value;
  sample_.has_timestamp = m.timestamp_ms != 0;
  sample_.timestamp_ms = sample_.has_timestamp ? m.timestamp_ms : opts_.default_timestamp_ms;
  sample_.start_timestamp_ms = m.st;
  is_histogram_ = p.kind == 1;
  if (is_histogram_) histogram_ = hists_[p.hist];
}

}  // namespace trainwatch::ingest
