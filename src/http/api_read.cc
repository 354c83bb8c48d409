// POST /api/v1/read: Prometheus's remote read (prompb/remote.proto), so a
// Prometheus or Thanos can query trainwatch's history. The body is a
// snappy-compressed ReadRequest; the answer is, by the first of the
// request's accepted_response_types we speak, either a snappy-compressed
// ReadResponse of raw samples (SAMPLES, what Prometheus 2.x sends) or a
// stream of ChunkedReadResponse frames holding Prometheus chunks
// (STREAMED_XOR_CHUNKS, what Prometheus 3 and Thanos ask for first): XOR
// for floats, FLOAT_HISTOGRAM for native histograms (remote/prom_chunks.h),
// cut as Prometheus cuts a series it re-encodes. As Prometheus's
// StreamChunkedReadResponses, a frame holds one series (its client reads only
// the first of a frame), a series passing the frame size goes on in the
// next frame; each frame a uvarint size, the big-endian CRC-32C of the
// message, the message.
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
#include "remote/prom_chunks.h"
#include "remote/proto.h"
#include "rules/manager.h"
#include "storage/merge.h"

namespace trainwatch::http {
namespace {

// The samples one request may read (Prometheus's
// --storage.remote.read-sample-limit default).
constexpr size_t kSampleLimit = 50'000'000;
// Bytes per frame, as Prometheus's --storage.remote.read-max-bytes-in-frame.
constexpr int64_t kFrameBytes = 1 << 20;

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
  std::vector<storage::HistogramSample> hists;  // native histograms; timestamps differ from the floats'
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

// A frame: uvarint size, big-endian CRC-32C of the message, the message
// ChunkedReadResponse {chunked_series = 1, query_index = 2}.
void AppendFrame(std::string_view series, int64_t query_index, std::string* out) {
  std::string msg;
  PutLenField(&msg, 1, series);
  PutVarint32(&msg, (2 << 3) | 0);
  PutVarint64(&msg, static_cast<uint64_t>(query_index));
  PutVarint64(out, msg.size());
  uint32_t crc = crc32c::Value(msg.data(), msg.size());
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((crc >> s) & 0xff));
  out->append(msg);
}

// One series as ChunkedSeries {labels = 1, chunks = 2} frames, split where
// Prometheus's StreamChunkedReadResponses splits: a frame is sent once its
// chunks pass the frame size less the labels (so by at most one chunk).
void StreamSeries(const SeriesData& d, int64_t query_index, std::string* out) {
  remote::PromChunkEncoder enc;
  for (size_t i = 0, j = 0; i < d.samples.size() || j < d.hists.size();) {
    if (j == d.hists.size() || (i < d.samples.size() && d.samples[i].t < d.hists[j].t)) {
      enc.AppendFloat(d.samples[i].t, d.samples[i].v);
      i++;
    } else {
      enc.AppendHistogram(d.hists[j].t, d.hists[j].h);
      j++;
    }
  }
  const std::vector<remote::PromChunk> chunks = enc.Finish();
  std::string labels;
  remote::AppendLabelFields(d.labels, &labels);  // Label fields are field 1 here as in TimeSeries
  const int64_t max_data = kFrameBytes - static_cast<int64_t>(labels.size());
  int64_t left = max_data;
  std::string msg = labels;
  for (size_t k = 0; k < chunks.size(); k++) {
    const remote::PromChunk& c = chunks[k];
    std::string chunk;  // Chunk {min_time_ms = 1, max_time_ms = 2, type = 3, data = 4}
    PutVarint32(&chunk, (1 << 3) | 0);
    PutVarint64(&chunk, static_cast<uint64_t>(c.min_time));
    PutVarint32(&chunk, (2 << 3) | 0);
    PutVarint64(&chunk, static_cast<uint64_t>(c.max_time));
    PutVarint32(&chunk, (3 << 3) | 0);
    PutVarint64(&chunk, static_cast<uint64_t>(c.encoding));
    PutLenField(&chunk, 4, c.data);
    PutLenField(&msg, 2, chunk);
    left -= static_cast<int64_t>(chunk.size());
    if (left > 0 && k + 1 < chunks.size()) continue;
    AppendFrame(msg, query_index, out);
    msg = labels;
    left = max_data;
  }
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
    for (const SeriesData& d : series) StreamSeries(d, static_cast<int64_t>(i), &out);
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
