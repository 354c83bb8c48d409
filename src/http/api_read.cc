// POST /api/v1/read: Prometheus's remote read (prompb/remote.proto), so a
// Prometheus or Thanos can query trainwatch's history. The body is a
// snappy-compressed ReadRequest; the answer is, by the first of the
// request's accepted_response_types we speak, either a snappy-compressed
// ReadResponse of raw samples (SAMPLES, what Prometheus 2.x sends) or a
// stream of ChunkedReadResponse frames holding Prometheus XOR chunks
// (STREAMED_XOR_CHUNKS, Thanos and Prometheus 2.13+ when asked): each frame
// a uvarint size, the big-endian CRC-32C of the message, the message.
//
// As Prometheus: matchers equal to an external label are dropped, and the
// external labels are added to every series that lacks them.

#include <algorithm>
#include <cstring>

#include "base/coding.h"
#include "base/crc32c.h"
#include "base/proto_reader.h"
#include "base/snappy.h"
#include "http/api.h"
#include "remote/proto.h"
#include "rules/manager.h"
#include "storage/merge.h"
#include "tsdb/chunkenc/chunk.h"

namespace trainwatch::http {
namespace {

// The samples one request may read (Prometheus's
// --storage.remote.read-sample-limit default).
constexpr size_t kSampleLimit = 50'000'000;
// Samples per XOR chunk and bytes per frame, as Prometheus's read handler.
constexpr size_t kChunkSamples = 120;
constexpr size_t kFrameBytes = 1 << 20;

enum ResponseType : uint64_t { kSamples = 0, kStreamedXorChunks = 1 };

struct ReadQuery {
  int64_t start = 0, end = 0;
  model::Matchers matchers;
};

Status ParseMatcher(std::string_view msg, size_t base, model::Matchers* out) {
  ProtoReader r(msg, base);
  uint64_t type = 0;
  std::string name, value;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    std::string_view s;
    if (f == 1 && w == kVarint) {
      RETURN_IF_ERROR(r.Varint(&type));
    } else if ((f == 2 || f == 3) && w == kLen) {
      RETURN_IF_ERROR(r.Bytes(&s));
      (f == 2 ? name : value) = std::string(s);
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  static constexpr model::MatchType kTypes[] = {model::MatchType::kEqual, model::MatchType::kNotEqual,
                                                model::MatchType::kRegex, model::MatchType::kNotRegex};
  if (type > 3) return Status::InvalidArgument("matcher on \"" + name + "\": unknown type " + std::to_string(type));
  auto m = model::Matcher::Make(kTypes[type], std::move(name), std::move(value));
  if (!m.ok()) return m.error();
  out->push_back(std::move(*m));
  return Status::OK();
}

Status ParseQuery(std::string_view msg, size_t base, ReadQuery* q) {
  ProtoReader r(msg, base);
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    uint64_t v = 0;
    std::string_view s;
    size_t at = 0;
    if ((f == 1 || f == 2) && w == kVarint) {
      RETURN_IF_ERROR(r.Varint(&v));
      (f == 1 ? q->start : q->end) = static_cast<int64_t>(v);
    } else if (f == 3 && w == kLen) {
      RETURN_IF_ERROR(r.Bytes(&s, &at));
      RETURN_IF_ERROR(ParseMatcher(s, at, &q->matchers));
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));  // hints
    }
  }
  return Status::OK();
}

Status ParseReadRequest(std::string_view msg, std::vector<ReadQuery>* queries, std::vector<uint64_t>* types) {
  ProtoReader r(msg);
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    std::string_view s;
    size_t at = 0;
    if (f == 1 && w == kLen) {
      RETURN_IF_ERROR(r.Bytes(&s, &at));
      queries->emplace_back();
      RETURN_IF_ERROR(ParseQuery(s, at, &queries->back()));
    } else if (f == 2 && w == kVarint) {
      uint64_t v = 0;
      RETURN_IF_ERROR(r.Varint(&v));
      types->push_back(v);
    } else if (f == 2 && w == kLen) {  // packed
      RETURN_IF_ERROR(r.Bytes(&s, &at));
      ProtoReader p(s, at);
      while (!p.done()) {
        uint64_t v = 0;
        RETURN_IF_ERROR(p.Varint(&v));
        types->push_back(v);
      }
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  return Status::OK();
}

void PutLenField(std::string* out, uint32_t field, std::string_view bytes) {
  PutVarint32(out, (field << 3) | 2);
  PutVarint64(out, bytes.size());
  out->append(bytes);
}

// One series' samples in the query's range.
struct SeriesData {
  model::Labels labels;
  std::vector<model::Sample> samples;
  std::vector<storage::HistogramSample> hists;  // native histograms (SAMPLES responses only)
};

// Every series of the query with its samples in [start, end], external
// labels added; counts samples into *total against the limit.
Status Select(storage::Querier& q, const ReadQuery& query, const model::Labels& external, size_t* total,
              std::vector<SeriesData>* out) {
  model::Matchers ms;
  for (const model::Matcher& m : query.matchers) {
    // A matcher equal to an external label selects every series here.
    if (m.type() == model::MatchType::kEqual && external.Has(m.name()) && external.Get(m.name()) == m.value()) continue;
    ms.push_back(m);
  }
  if (ms.empty()) return Status::InvalidArgument("a remote read query needs a matcher besides the external labels");
  auto ss = q.Select(true, storage::SelectHints{query.start, query.end}, ms);
  while (ss->Next()) {
    const storage::Series& s = ss->At();
    SeriesData d;
    std::vector<model::Label> ls(s.labels().begin(), s.labels().end());
    for (const model::Label& e : external) {
      if (!s.labels().Has(e.name)) ls.push_back(e);
    }
    std::sort(ls.begin(), ls.end());
    d.labels = model::Labels(std::move(ls));
    auto it = s.Iterator();
    for (bool ok = it->Seek(query.start); ok; ok = it->Next()) {
      model::Sample x = it->At();
      if (x.t > query.end) break;
      // Native histograms: TimeSeries.histograms in SAMPLES responses; not
      // sent as histogram chunks (STREAMED_XOR_CHUNKS skips them, see
      // docs/compatibility.md).
      if (it->AtIsHistogram()) {
        d.hists.push_back(storage::HistogramSample{x.t, *it->AtHistogram()});
        continue;
      }
      d.samples.push_back(x);
    }
    RETURN_IF_ERROR(it->Err());
    *total += d.samples.size() + d.hists.size();
    if (*total > kSampleLimit) {
      return Status::InvalidArgument("exceeded sample limit (" + std::to_string(kSampleLimit) + ")");
    }
    if (!d.samples.empty() || !d.hists.empty()) out->push_back(std::move(d));
  }
  return ss->Err();
}

// ChunkedSeries {labels = 1, chunks = 2}: chunks of at most kChunkSamples.
std::string ChunkedSeries(const SeriesData& d) {
  std::string msg;
  remote::AppendLabelFields(d.labels, &msg);  // Label fields are field 1 here as in TimeSeries
  std::vector<int64_t> ts;
  std::vector<double> vs;
  for (size_t i = 0; i < d.samples.size(); i += kChunkSamples) {
    size_t n = std::min(kChunkSamples, d.samples.size() - i);
    ts.clear();
    vs.clear();
    for (size_t k = 0; k < n; k++) {
      ts.push_back(d.samples[i + k].t);
      vs.push_back(d.samples[i + k].v);
    }
    std::string data;
    chunkenc::EncodeXor(ts.data(), vs.data(), n, &data);
    std::string chunk;
    PutVarint32(&chunk, (1 << 3) | 0);
    PutVarint64(&chunk, static_cast<uint64_t>(ts.front()));
    PutVarint32(&chunk, (2 << 3) | 0);
    PutVarint64(&chunk, static_cast<uint64_t>(ts.back()));
    PutVarint32(&chunk, (3 << 3) | 0);
    PutVarint64(&chunk, 1);  // Chunk.Encoding XOR
    PutLenField(&chunk, 4, data);
    PutLenField(&msg, 2, chunk);
  }
  return msg;
}

// A frame: uvarint size, big-endian CRC-32C of the message, the message
// ChunkedReadResponse {chunked_series = 1 (repeated), query_index = 2}.
void AppendFrame(const std::vector<std::string>& series, int64_t query_index, std::string* out) {
  std::string msg;
  for (const std::string& s : series) PutLenField(&msg, 1, s);
  PutVarint32(&msg, (2 << 3) | 0);
  PutVarint64(&msg, static_cast<uint64_t>(query_index));
  PutVarint64(out, msg.size());
  uint32_t crc = crc32c::Value(msg.data(), msg.size());
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((crc >> s) & 0xff));
  out->append(msg);
}

}  // namespace

Response Api::RemoteRead(const Request& req) {
  std::string buf;
  auto proto = SnappyBlockDecode(req.body, &buf, deps_.request_limits.max_decoded_bytes);
  if (!proto.ok()) return Text(400, "remote read: " + proto.error().message());
  std::vector<ReadQuery> queries;
  std::vector<uint64_t> types;
  if (Status s = ParseReadRequest(*proto, &queries, &types); !s.ok()) {
    return Text(400, "remote read: " + s.message());
  }
  // The first accepted type we speak; none listed means SAMPLES.
  uint64_t type = kSamples;
  if (!types.empty()) {
    auto it = std::find_if(types.begin(), types.end(), [](uint64_t t) { return t == kSamples || t == kStreamedXorChunks; });
    if (it == types.end()) return Text(400, "remote read: none of the accepted response types is supported");
    type = *it;
  }
  const model::Labels external = deps_.rules ? deps_.rules->ExternalLabels() : model::Labels();
  size_t total = 0;
  std::string out;
  for (size_t i = 0; i < queries.size(); i++) {
    const ReadQuery& query = queries[i];
    auto q = deps_.db->NewQuerier(query.start, query.end);
    if (!q.ok()) return Text(500, "remote read: " + q.error().message());
    std::vector<SeriesData> series;
    if (Status s = Select(**q, query, external, &total, &series); !s.ok()) {
      return Text(s.code() == StatusCode::kInvalidArgument ? 400 : 500, "remote read: " + s.message());
    }
    if (type == kSamples) {
      std::string result;  // QueryResult {timeseries = 1}
      std::string fields;
      std::vector<remote::HistogramRef> hs;
      for (const SeriesData& d : series) {
        fields.clear();
        remote::AppendLabelFields(d.labels, &fields);
        hs.clear();
        for (const storage::HistogramSample& h : d.hists) hs.push_back(remote::HistogramRef{h.t, &h.h});
        remote::AppendTimeSeriesEncoded(fields, d.samples.data(), d.samples.size(), hs.data(), hs.size(), &result);
      }
      PutLenField(&out, 1, result);  // ReadResponse {results = 1}
      continue;
    }
    std::vector<std::string> frame;
    size_t frame_bytes = 0;
    for (const SeriesData& d : series) {
      if (d.samples.empty()) continue;  // only histograms: not streamed
      std::string cs = ChunkedSeries(d);
      if (!frame.empty() && frame_bytes + cs.size() > kFrameBytes) {
        AppendFrame(frame, static_cast<int64_t>(i), &out);
        frame.clear();
        frame_bytes = 0;
      }
      frame_bytes += cs.size();
      frame.push_back(std::move(cs));
    }
    if (!frame.empty()) AppendFrame(frame, static_cast<int64_t>(i), &out);
  }
  Response r;
  if (type == kSamples) {
    r.content_type = "application/x-protobuf";
    r.headers.emplace_back("Content-Encoding", "snappy");
    remote::SnappyCompress(out, &r.body);
  } else {
    r.content_type = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse";
    r.body = std::move(out);
  }
  return r;
}

}  // namespace trainwatch::http
