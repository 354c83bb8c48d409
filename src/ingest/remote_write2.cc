#include "ingest/remote_write2.h"

#include <bit>
#include <unordered_map>

#include "base/proto_reader.h"
#include "base/snappy.h"
#include "base/coding.h"
#include "base/utf8.h"
#include "ingest/remote_write.h"

namespace trainwatch::ingest {

namespace {

using Reader = ProtoReader;

// A field of timeseries[i], for error messages.
std::string Where(size_t index, std::string_view field) {
  return "timeseries[" + std::to_string(index) + "]." + std::string(field);
}

// Appends the varints of a packed (kLen) or single (kVarint) repeated uint32.
Status ReadRefs(Reader& r, uint32_t w, std::string_view what, std::vector<uint32_t>* out) {
  auto one = [&](Reader& rr) -> Status {
    uint64_t v = 0;
    RETURN_IF_ERROR(rr.Varint(&v));
    if (v > UINT32_MAX) return rr.Err(std::string(what) + ": ref over uint32");
    out->push_back(static_cast<uint32_t>(v));
    return Status::OK();
  };
  if (w == kVarint) return one(r);
  RETURN_IF_ERROR(r.Expect(w, kLen, what));
  std::string_view packed;
  size_t at = 0;
  RETURN_IF_ERROR(r.Bytes(&packed, &at));
  Reader p(packed, at);
  while (!p.done()) RETURN_IF_ERROR(one(p));
  return Status::OK();
}

// Checks that every ref names a symbol.
Status CheckRefs(const std::vector<uint32_t>& refs, size_t symbols, std::string_view what) {
  for (size_t j = 0; j < refs.size(); j++) {
    if (refs[j] >= symbols) {
      return Status::InvalidArgument(std::string(what) + "[" + std::to_string(j) + "]: symbol ref " +
                                     std::to_string(refs[j]) + " out of range (" + std::to_string(symbols) +
                                     " symbols)");
    }
  }
  if (refs.size() % 2 != 0) {
    return Status::InvalidArgument(std::string(what) + ": odd number of refs (" + std::to_string(refs.size()) +
                                   "), want name and value pairs");
  }
  return Status::OK();
}

void PutLen(std::string* out, uint32_t field, std::string_view s) {
  PutVarint32(out, (field << 3) | kLen);
  PutVarint64(out, s.size());
  out->append(s);
}

}  // namespace

RemoteWriteProto RemoteWriteProtoOf(std::string_view content_type) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  const size_t semi = content_type.find(';');
  const std::string_view media = trim(content_type.substr(0, semi));
  std::string_view proto;
  for (size_t at = semi; at != std::string_view::npos;) {
    const size_t next = content_type.find(';', at + 1);
    std::string_view param = trim(content_type.substr(at + 1, next == std::string_view::npos ? next : next - at - 1));
    if (param.substr(0, 6) == "proto=") {
      proto = param.substr(6);
      if (proto.size() >= 2 && proto.front() == '"' && proto.back() == '"') proto = proto.substr(1, proto.size() - 2);
    }
    at = next;
  }
  if (!media.empty() && media != "application/x-protobuf") return RemoteWriteProto::kUnknown;
  if (proto.empty() || proto == "prometheus.WriteRequest") return RemoteWriteProto::kV1;
  if (proto == "io.prometheus.write.v2.Request") return RemoteWriteProto::kV2;
  return RemoteWriteProto::kUnknown;
}

Status RemoteWrite2Batch::ParseSnappy(std::string_view body, const RequestLimits& limits) {
  auto proto = SnappyBlockDecode(body, &buf_, limits.max_decoded_bytes);
  if (!proto.ok()) return proto.error();
  return Parse(*proto, limits);
}

Status RemoteWrite2Batch::Parse(std::string_view proto, const RequestLimits& limits) {
  series_.clear(), samples_.clear(), hists_.clear();
  stats_ = {};
  // Symbols may follow the series that use them: collect both first.
  std::vector<std::string_view> symbols;
  std::vector<std::pair<std::string_view, size_t>> series_msgs;  // message, offset
  Reader r(proto, 0);
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f == 4 || f == 5) {
      RETURN_IF_ERROR(r.Expect(w, kLen, f == 4 ? "symbols" : "timeseries"));
      std::string_view s;
      size_t at = 0;
      RETURN_IF_ERROR(r.Bytes(&s, &at));
      if (f == 4) {
        symbols.push_back(s);
      } else {
        series_msgs.emplace_back(s, at);
      }
    } else if (f <= 3) {
      // Reserved in 2.0: 1 is 1.0's WriteRequest.timeseries, a 1.0 body
      // sent as 2.0 would otherwise store nothing and say so with 204.
      return r.Err("field " + std::to_string(f) +
                   " is reserved in io.prometheus.write.v2.Request (a remote write 1.0 body?)");
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  if (!symbols.empty() && !symbols[0].empty()) {
    return Status::InvalidArgument("symbols[0] must be the empty string");
  }
  for (size_t i = 0; i < symbols.size(); i++) {
    if (!IsValidUtf8(symbols[i])) return Status::InvalidArgument("symbols[" + std::to_string(i) + "]: not valid UTF-8");
  }
  index_.clear();
  for (size_t i = 0; i < series_msgs.size(); i++) {
    RETURN_IF_ERROR(ParseTimeSeries(series_msgs[i].first, series_msgs[i].second, i, symbols, limits));
  }
  index_.clear();
  stats_.series = series_.size();
  stats_.samples = samples_.size();
  stats_.histograms = hists_.size();
  return Status::OK();
}

Status RemoteWrite2Batch::ParseTimeSeries(std::string_view msg, size_t base, size_t index,
                                          const std::vector<std::string_view>& symbols, const RequestLimits& limits) {
  std::vector<uint32_t> refs;
  std::vector<Sample> samples;  // series set once the labels are known
  std::vector<HistSample> hists;
  int64_t created = 0;  // the drafts' TimeSeries.created_timestamp
  Reader r(msg, base);
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    switch (f) {
      case 1:
        RETURN_IF_ERROR(ReadRefs(r, w, Where(index, "labels_refs"), &refs));
        break;
      case 2: {
        RETURN_IF_ERROR(r.Expect(w, kLen, Where(index, "samples")));
        std::string_view sm;
        size_t at = 0;
        RETURN_IF_ERROR(r.Bytes(&sm, &at));
        Reader sr(sm, at);
        Sample s{0, 0, 0, 0};
        while (!sr.done()) {
          uint32_t sf = 0, sw = 0;
          uint64_t v = 0;
          RETURN_IF_ERROR(sr.Tag(&sf, &sw));
          if (sf == 1) {
            RETURN_IF_ERROR(sr.Expect(sw, kFixed64, Where(index, "samples.value")));
            RETURN_IF_ERROR(sr.Fixed64(&v));
            s.v = std::bit_cast<double>(v);
          } else if (sf == 2 || sf == 3) {  // timestamp; start_timestamp
            RETURN_IF_ERROR(sr.Expect(sw, kVarint, Where(index, sf == 2 ? "samples.timestamp" : "samples.start_timestamp")));
            RETURN_IF_ERROR(sr.Varint(&v));
            (sf == 2 ? s.t : s.st) = static_cast<int64_t>(v);
          } else {
            RETURN_IF_ERROR(sr.Skip(sf, sw));
          }
        }
        samples.push_back(s);
        break;
      }
      case 3: {
        RETURN_IF_ERROR(r.Expect(w, kLen, Where(index, "histograms")));
        std::string_view hm;
        size_t at = 0;
        RETURN_IF_ERROR(r.Bytes(&hm, &at));
        HistSample h{0, 0, {}, 0};
        Status s = DecodeRemoteWriteHistogram(hm, at, &h.h, &h.t, &h.st);
        if (!s.ok()) return s.Annotate(Where(index, "histograms[" + std::to_string(hists.size()) + "]"));
        hists.push_back(std::move(h));
        break;
      }
      case 4: {  // exemplars: refs checked, not stored
        RETURN_IF_ERROR(r.Expect(w, kLen, Where(index, "exemplars")));
        std::string_view em;
        size_t at = 0;
        RETURN_IF_ERROR(r.Bytes(&em, &at));
        Reader er(em, at);
        std::vector<uint32_t> erefs;
        while (!er.done()) {
          uint32_t ef = 0, ew = 0;
          RETURN_IF_ERROR(er.Tag(&ef, &ew));
          if (ef == 1) {
            RETURN_IF_ERROR(ReadRefs(er, ew, Where(index, "exemplars.labels_refs"), &erefs));
          } else {
            RETURN_IF_ERROR(er.Skip(ef, ew));
          }
        }
        RETURN_IF_ERROR(CheckRefs(erefs, symbols.size(), Where(index, "exemplars.labels_refs")));
        stats_.exemplars++;
        break;
      }
      case 5: {  // metadata: refs checked, not stored
        RETURN_IF_ERROR(r.Expect(w, kLen, Where(index, "metadata")));
        std::string_view mm;
        size_t at = 0;
        RETURN_IF_ERROR(r.Bytes(&mm, &at));
        Reader mr(mm, at);
        while (!mr.done()) {
          uint32_t mf = 0, mw = 0;
          uint64_t v = 0;
          RETURN_IF_ERROR(mr.Tag(&mf, &mw));
          if (mf == 1 || mf == 3 || mf == 4) {
            const std::string what = Where(index, mf == 1 ? "metadata.type" : mf == 3 ? "metadata.help_ref" : "metadata.unit_ref");
            RETURN_IF_ERROR(mr.Expect(mw, kVarint, what));
            RETURN_IF_ERROR(mr.Varint(&v));
            if (mf == 1 && v > 7) return Status::InvalidArgument(what + ": unknown metric type " + std::to_string(v));
            if (mf != 1 && v >= symbols.size()) {
              return Status::InvalidArgument(what + ": symbol ref " + std::to_string(v) + " out of range (" +
                                             std::to_string(symbols.size()) + " symbols)");
            }
          } else {
            RETURN_IF_ERROR(mr.Skip(mf, mw));
          }
        }
        break;
      }
      case 6: {  // created_timestamp of the 2.0 drafts (now reserved)
        uint64_t v = 0;
        RETURN_IF_ERROR(r.Expect(w, kVarint, Where(index, "created_timestamp")));
        RETURN_IF_ERROR(r.Varint(&v));
        created = static_cast<int64_t>(v);
        break;
      }
      default:
        RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  RETURN_IF_ERROR(CheckRefs(refs, symbols.size(), Where(index, "labels_refs")));
  // The pairs as 1.0 Label messages, to validate them as 1.0 does.
  std::string fields, label;
  for (size_t j = 0; j < refs.size(); j += 2) {
    label.clear();
    PutLen(&label, 1, symbols[refs[j]]);
    PutLen(&label, 2, symbols[refs[j + 1]]);
    PutLen(&fields, 1, label);
  }
  auto labels = DecodeRemoteWriteLabels(fields);
  if (!labels.ok()) return labels.error().Annotate(Where(index, "labels_refs"));
  if (labels->Get(model::kMetricName).empty()) {
    return Status::InvalidArgument(Where(index, "labels_refs") + ": no metric name (__name__) in " + labels->ToString());
  }
  if (samples.empty() && hists.empty()) {
    return Status::InvalidArgument("timeseries[" + std::to_string(index) + "] " + labels->ToString() + ": no samples or histograms");
  }
  // One entry per distinct label set: a series may come in several messages.
  fields.clear();
  model::AppendEncodedLabels(*labels, &fields);
  auto [it, inserted] = index_.try_emplace(std::move(fields), static_cast<uint32_t>(series_.size()));
  if (inserted) {
    if (!limits.SeriesOk(series_.size() + 1)) return limits.TooManySeries();
    series_.push_back({std::move(*labels), 0});
  }
  if (!limits.SamplesOk(samples_.size() + hists_.size() + samples.size() + hists.size())) return limits.TooManySamples();
  // The drafts' created_timestamp is the start timestamp of the samples
  // that carry none of their own.
  for (Sample& s : samples) {
    s.series = it->second;
    if (s.st == 0) s.st = created;
    samples_.push_back(s);
  }
  for (HistSample& h : hists) {
    h.series = it->second;
    if (h.st == 0) h.st = created;
    hists_.push_back(std::move(h));
  }
  return Status::OK();
}

Status RemoteWrite2Batch::AppendTo(storage::Appender* app) {
  AppendCounts counts;
  Status st = AppendBatch(app, &series_, samples_, hists_, &refusals_, &counts);
  stats_.samples_written += counts.samples;
  stats_.histograms_written += counts.histograms;
  return st;
}

}  // namespace trainwatch::ingest
