#include "remote/read.h"

#include <httplib.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "base/coding.h"
#include "base/crc32c.h"
#include "base/log.h"
#include "base/proto_reader.h"
#include "base/snappy.h"
#include "ingest/remote_write.h"
#include "model/labels.h"
#include "remote/prom_chunks.h"
#include "remote/proto.h"
#include "storage/merge.h"

namespace trainwatch::remote {

struct RemoteRead::Store {
  RemoteReadConfig cfg;
  std::atomic<uint64_t> queries{0}, failures{0};
};

namespace {

void Len(uint32_t field, std::string_view payload, std::string* out) {
  PutVarint32(out, (field << 3) | 2);
  PutVarint64(out, payload.size());
  out->append(payload);
}

void Varint(uint32_t field, uint64_t v, std::string* out) {
  PutVarint32(out, field << 3);
  PutVarint64(out, v);
}

// ReadRequest{queries: [Query{start, end, matchers}], accepted_response_types:
// [STREAMED_XOR_CHUNKS, SAMPLES]} (prompb/remote.proto; LabelMatcher.Type has
// MatchType's order). Streamed chunks first, as Prometheus 3's client asks:
// a server that has them (Prometheus 2.13+, Thanos, trainwatch) answers
// with them, one that does not with SAMPLES.
std::string ReadRequest(int64_t mint, int64_t maxt, const model::Matchers& matchers) {
  std::string q;
  Varint(1, static_cast<uint64_t>(mint), &q);
  Varint(2, static_cast<uint64_t>(maxt), &q);
  for (const model::Matcher& m : matchers) {
    std::string lm;
    if (m.type() != model::MatchType::kEqual) Varint(1, static_cast<uint64_t>(m.type()), &lm);
    Len(2, m.name(), &lm);
    Len(3, m.value(), &lm);
    Len(3, lm, &q);
  }
  std::string req;
  Len(1, q, &req);
  Len(2, std::string{'\x01', '\x00'}, &req);  // packed: STREAMED_XOR_CHUNKS, SAMPLES
  return req;
}

// Collects what RemoteWriteBatch decodes of a QueryResult (its layout is a
// WriteRequest's: field 1, TimeSeries).
class Collect final : public storage::Appender {
 public:
  struct Data {
    model::Labels labels;
    std::vector<model::Sample> floats;
    std::vector<storage::HistogramSample> hists;
  };
  std::map<std::string, Data> series;
  Result<storage::SeriesRef> Append(storage::SeriesRef, const model::Labels& labels, int64_t t, double v) override {
    Get(labels).floats.push_back({t, v});
    return storage::SeriesRef{0};
  }
  Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef, const model::Labels& labels, int64_t t,
                                             const model::FloatHistogram& h) override {
    Get(labels).hists.push_back({t, h});
    return storage::SeriesRef{0};
  }
  Status Commit() override { return Status::OK(); }
  void Rollback() override {}

  Data& Get(const model::Labels& labels) {
    key_.clear();
    model::AppendEncodedLabels(labels, &key_);
    Data& d = series[key_];
    if (d.labels.empty()) d.labels = labels;
    return d;
  }

 private:
  std::string key_;
};

std::vector<std::shared_ptr<storage::Series>> ToSeries(Collect* c, const model::Labels& drop);

// The series of a SAMPLES answer, external labels removed, sorted.
Result<std::vector<std::shared_ptr<storage::Series>>> DecodeReadResponse(std::string_view body, const model::Labels& drop) {
  std::string buf;
  ASSIGN_OR_RETURN(std::string_view proto, SnappyBlockDecode(body, &buf, ingest::kDefaultMaxBodyBytes));
  ProtoReader r(proto, 0);
  Collect c;
  RETURN_IF_ERROR(r.EachMessage(1, "results", [&](ProtoReader& result) -> Status {
    // A QueryResult's layout is a WriteRequest's: TimeSeries in field 1.
    ingest::RemoteWriteBatch batch;
    RETURN_IF_ERROR(batch.Parse(result.rest(), nullptr));
    return batch.AppendTo(&c);
  }));
  return ToSeries(&c, drop);
}

// The largest frame of a streamed answer, as Prometheus's default
// chunked_read_limit.
constexpr uint64_t kMaxFrameBytes = 50'000'000;

// Label {name = 1, value = 2} of a ChunkedSeries.
Status ParseLabel(ProtoReader& r, std::vector<model::Label>* out) {
  model::Label l;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    std::string_view s;
    if ((f == 1 || f == 2) && w == kLen) {
      RETURN_IF_ERROR(r.Bytes(&s));
      (f == 1 ? l.name : l.value) = std::string(s);
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  if (l.name.empty()) return Status::InvalidArgument("a label with an empty name");
  out->push_back(std::move(l));
  return Status::OK();
}

// Chunk {min_time_ms = 1, max_time_ms = 2, type = 3, data = 4}: its samples
// in [mint, maxt] into *d.
Status ParseChunk(ProtoReader& r, int64_t mint, int64_t maxt, Collect::Data* d) {
  uint64_t type = 0;
  std::string_view data;
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    if (f == 3 && w == kVarint) {
      RETURN_IF_ERROR(r.Varint(&type));
    } else if (f == 4 && w == kLen) {
      RETURN_IF_ERROR(r.Bytes(&data));
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));  // min and max time: the samples say
    }
  }
  return DecodePromChunk(type, data, mint, maxt, &d->floats, &d->hists);
}

// ChunkedSeries {labels = 1, chunks = 2}; chunks are decoded once the
// labels are known, wherever they stand in the message.
Status ParseChunkedSeries(std::string_view msg, size_t base, int64_t mint, int64_t maxt, Collect* c) {
  std::vector<model::Label> ls;
  std::vector<std::pair<std::string_view, size_t>> chunks;
  ProtoReader r(msg, base);
  while (!r.done()) {
    uint32_t f = 0, w = 0;
    RETURN_IF_ERROR(r.Tag(&f, &w));
    std::string_view s;
    size_t at = 0;
    if (f == 1 && w == kLen) {
      RETURN_IF_ERROR(r.Bytes(&s, &at));
      ProtoReader lr(s, at);
      RETURN_IF_ERROR(ParseLabel(lr, &ls));
    } else if (f == 2 && w == kLen) {
      RETURN_IF_ERROR(r.Bytes(&s, &at));
      chunks.emplace_back(s, at);
    } else {
      RETURN_IF_ERROR(r.Skip(f, w));
    }
  }
  std::sort(ls.begin(), ls.end());
  for (size_t i = 1; i < ls.size(); i++) {
    if (ls[i].name == ls[i - 1].name) return Status::InvalidArgument("duplicate label name \"" + ls[i].name + "\"");
  }
  model::Labels labels(std::move(ls));
  Collect::Data& d = c->Get(labels);
  for (size_t i = 0; i < chunks.size(); i++) {
    ProtoReader cr(chunks[i].first, chunks[i].second);
    if (Status s = ParseChunk(cr, mint, maxt, &d); !s.ok()) {
      return s.Annotate("series " + labels.ToString() + ", chunk " + std::to_string(i + 1));
    }
  }
  return Status::OK();
}

}  // namespace

// Frames of a uvarint size, the big-endian CRC-32C of the message and a
// ChunkedReadResponse {chunked_series = 1, query_index = 2}.
Result<std::vector<std::shared_ptr<storage::Series>>> DecodeChunkedReadResponse(std::string_view body, int64_t mint,
                                                                                int64_t maxt, const model::Labels& drop) {
  Collect c;
  size_t pos = 0;
  for (int frame = 1; pos < body.size(); frame++) {
    const std::string where = "frame " + std::to_string(frame) + " at byte " + std::to_string(pos);
    std::string_view in = body.substr(pos);
    uint64_t size = 0;
    if (!GetVarint64(&in, &size)) return Status::Corruption(where + ": truncated size");
    if (size > kMaxFrameBytes) {
      return Status::Corruption(where + ": " + std::to_string(size) + " bytes, more than the limit of " +
                                std::to_string(kMaxFrameBytes));
    }
    if (in.size() < 4 + size) return Status::Corruption(where + ": truncated (" + std::to_string(size) + " bytes announced)");
    const auto* p = reinterpret_cast<const uint8_t*>(in.data());
    const uint32_t want = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    std::string_view msg = in.substr(4, size);
    if (crc32c::Value(msg.data(), msg.size()) != want) return Status::Corruption(where + ": CRC-32C mismatch");
    pos = body.size() - in.size() + 4 + size;
    ProtoReader r(msg);
    Status s = r.EachMessage(1, "chunked_series", [&](ProtoReader& series) -> Status {
      return ParseChunkedSeries(series.rest(), series.offset(), mint, maxt, &c);
    });
    if (!s.ok()) return s.Annotate(where);
  }
  return ToSeries(&c, drop);
}

namespace {

// What a Collect holds as series, external labels removed, sorted.
std::vector<std::shared_ptr<storage::Series>> ToSeries(Collect* c, const model::Labels& drop) {
  std::vector<std::shared_ptr<storage::Series>> out;
  out.reserve(c->series.size());
  for (auto& [key, s] : c->series) {
    model::Labels labels = s.labels;
    if (!drop.empty()) {
      model::LabelsBuilder b(labels);
      for (const model::Label& l : drop) {
        if (labels.Get(l.name) == l.value) b.Del(l.name);
      }
      labels = b.Build();
    }
    // One value per timestamp (streamed chunks may overlap).
    std::stable_sort(s.floats.begin(), s.floats.end(),
                     [](const model::Sample& a, const model::Sample& b) { return a.t < b.t; });
    s.floats.erase(std::unique(s.floats.begin(), s.floats.end(),
                               [](const model::Sample& a, const model::Sample& b) { return a.t == b.t; }),
                   s.floats.end());
    if (s.hists.empty()) {
      if (s.floats.empty()) continue;
      out.push_back(std::make_shared<storage::ListSeries>(std::move(labels), std::move(s.floats)));
      continue;
    }
    // A float wins a tie with a histogram (MixedVectorIterator).
    std::stable_sort(s.hists.begin(), s.hists.end(),
                     [](const storage::HistogramSample& a, const storage::HistogramSample& b) { return a.t < b.t; });
    s.hists.erase(std::unique(s.hists.begin(), s.hists.end(),
                              [](const storage::HistogramSample& a, const storage::HistogramSample& b) { return a.t == b.t; }),
                  s.hists.end());
    out.push_back(std::make_shared<storage::MixedListSeries>(std::move(labels), std::move(s.floats), std::move(s.hists)));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->labels() < b->labels(); });
  return out;
}

using Stores = std::vector<std::shared_ptr<RemoteRead::Store>>;

class RemoteQuerier final : public storage::Querier {
 public:
  RemoteQuerier(std::shared_ptr<const Stores> stores, int64_t mint, int64_t maxt, int64_t local_start,
                const std::string& user_agent)
      : stores_(std::move(stores)), mint_(mint), maxt_(maxt), local_start_(local_start), user_agent_(user_agent) {}

  std::unique_ptr<storage::SeriesSet> Select(bool, const storage::SelectHints& hints,
                                             const model::Matchers& matchers) override {
    std::vector<std::unique_ptr<storage::SeriesSet>> sets;
    for (const auto& store : *stores_) {
      auto series = Query(*store, std::max(mint_, hints.start), std::min(maxt_, hints.end), matchers);
      if (!series.empty()) sets.push_back(storage::ListSeriesSet(std::move(series)));
    }
    if (sets.size() == 1) return std::move(sets[0]);
    return storage::MergeSeriesSets(std::move(sets));
  }
  Result<std::vector<std::string>> LabelValues(std::string_view, const model::Matchers&) override {
    return std::vector<std::string>{};
  }
  Result<std::vector<std::string>> LabelNames(const model::Matchers&) override { return std::vector<std::string>{}; }

 private:
  std::vector<std::shared_ptr<storage::Series>> Query(RemoteRead::Store& store, int64_t mint, int64_t maxt,
                                                      const model::Matchers& matchers) {
    const RemoteReadConfig& cfg = store.cfg;
    // required_matchers: each an equality matcher of the selector.
    for (const model::Label& req : cfg.required_matchers) {
      bool found = std::any_of(matchers.begin(), matchers.end(), [&](const model::Matcher& m) {
        return m.type() == model::MatchType::kEqual && m.name() == req.name && m.value() == req.value;
      });
      if (!found) return {};
    }
    if (!cfg.read_recent) {
      if (mint > local_start_) return {};
      maxt = std::min(maxt, local_start_);
    }
    if (mint > maxt) return {};
    model::Matchers query = matchers;
    model::Labels drop;
    if (cfg.filter_external_labels) {
      std::vector<model::Label> dropped;
      for (const model::Label& l : cfg.external_labels) {
        bool named = std::any_of(matchers.begin(), matchers.end(), [&](const model::Matcher& m) { return m.name() == l.name; });
        if (named) continue;
        auto m = model::Matcher::Make(model::MatchType::kEqual, l.name, l.value);
        if (m.ok()) query.push_back(std::move(*m));
        dropped.push_back(l);
      }
      drop = model::Labels(std::move(dropped));
    }
    store.queries.fetch_add(1, std::memory_order_relaxed);
    auto out = Send(cfg, ReadRequest(mint, maxt, query), mint, maxt, drop);
    if (!out.ok()) {
      store.failures.fetch_add(1, std::memory_order_relaxed);
      TW_LOG(Warn, "remote_read {}: {} (the query is answered without it)", cfg.name, out.error().message());
      return {};
    }
    return std::move(*out);
  }

  Result<std::vector<std::shared_ptr<storage::Series>>> Send(const RemoteReadConfig& cfg, const std::string& request,
                                                            int64_t mint, int64_t maxt, const model::Labels& drop) {
    ASSIGN_OR_RETURN(std::unique_ptr<httplib::Client> c, common::NewHttpClient(cfg.base, cfg.http, cfg.remote_timeout_ms));
    c->set_decompress(false);  // the answer is snappy-framed; httplib knows only gzip and brotli
    std::vector<std::pair<std::string, std::string>> extra;
    RETURN_IF_ERROR(common::ApplyHttpAuth(cfg.http, c.get(), &extra));
    httplib::Headers h = {{"Content-Encoding", "snappy"},
                          {"User-Agent", user_agent_},
                          {"X-Prometheus-Remote-Read-Version", "0.1.0"}};
    h.insert(extra.begin(), extra.end());
    h.insert(cfg.headers.begin(), cfg.headers.end());
    std::string body;
    SnappyCompress(request, &body);
    auto res = c->Post(cfg.path, h, body, "application/x-protobuf");
    if (!res) return Status::Unavailable("Post \"" + cfg.url + "\": " + httplib::to_string(res.error()));
    if (res->status / 100 != 2) {
      std::string msg = res->body.substr(0, 256);
      while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
      return Status::Unavailable("server returned HTTP status " + std::to_string(res->status) + ": " + msg);
    }
    // The answer's type by its Content-Type, as Prometheus's client.
    const std::string type = res->get_header_value("Content-Type");
    const bool streamed = type.starts_with("application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse");
    if (!streamed && !type.starts_with("application/x-protobuf")) {
      return Status::Unavailable("answer of " + cfg.url + ": unsupported content type \"" + type + "\"");
    }
    auto series = streamed ? DecodeChunkedReadResponse(res->body, mint, maxt, drop) : DecodeReadResponse(res->body, drop);
    if (!series.ok()) return series.error().Annotate("answer of " + cfg.url);
    return series;
  }

  std::shared_ptr<const Stores> stores_;
  int64_t mint_, maxt_, local_start_;
  std::string user_agent_;
};

// The primary's querier with the secondary's series merged into each Select.
class FanoutQuerier final : public storage::Querier {
 public:
  FanoutQuerier(std::unique_ptr<storage::Querier> primary, std::unique_ptr<storage::Querier> secondary)
      : primary_(std::move(primary)), secondary_(std::move(secondary)) {}
  std::unique_ptr<storage::SeriesSet> Select(bool sorted, const storage::SelectHints& hints,
                                             const model::Matchers& matchers) override {
    std::vector<std::unique_ptr<storage::SeriesSet>> sets;
    sets.push_back(primary_->Select(true, hints, matchers));
    sets.push_back(secondary_->Select(true, hints, matchers));
    (void)sorted;  // merged sets are sorted
    return storage::MergeSeriesSets(std::move(sets));
  }
  Result<std::vector<std::string>> LabelValues(std::string_view name, const model::Matchers& matchers) override {
    return primary_->LabelValues(name, matchers);
  }
  Result<std::vector<std::string>> LabelNames(const model::Matchers& matchers) override {
    return primary_->LabelNames(matchers);
  }

 private:
  std::unique_ptr<storage::Querier> primary_, secondary_;
};

}  // namespace

RemoteRead::RemoteRead(std::function<int64_t()> local_start, std::string user_agent,
                       common::metrics::Registry* metrics)
    : local_start_(std::move(local_start)),
      user_agent_(std::move(user_agent)),
      stores_(std::make_shared<const Stores>()),
      metrics_({{"trainwatch_remote_read_queries_total", "Remote read requests sent to each remote_read store.",
                 common::metrics::Type::kCounter, {"remote_name"}},
                {"trainwatch_remote_read_failures_total",
                 "Remote read requests that failed (queries were answered without that store).",
                 common::metrics::Type::kCounter, {"remote_name"}}},
               [this](common::metrics::Emitter* e) {
                 std::shared_ptr<const Stores> stores;
                 {
                   base::MutexLock l(&mu_);
                   stores = stores_;
                 }
                 for (const auto& st : *stores) {
                   e->Add("trainwatch_remote_read_queries_total", {st->cfg.name},
                          static_cast<double>(st->queries.load()));
                   e->Add("trainwatch_remote_read_failures_total", {st->cfg.name},
                          static_cast<double>(st->failures.load()));
                 }
               }) {
  if (metrics != nullptr) metrics_registration_ = metrics->MustRegister({&metrics_});
}

RemoteRead::~RemoteRead() { metrics_registration_.Reset(); }

void RemoteRead::Apply(std::vector<RemoteReadConfig> configs) {
  auto next = std::make_shared<Stores>();
  for (RemoteReadConfig& c : configs) {
    auto s = std::make_shared<Store>();
    s->cfg = std::move(c);
    next->push_back(std::move(s));
  }
  base::MutexLock l(&mu_);
  stores_ = std::move(next);
}

bool RemoteRead::empty() const {
  base::MutexLock l(&mu_);
  return stores_->empty();
}

Result<std::unique_ptr<storage::Querier>> RemoteRead::NewQuerier(int64_t mint, int64_t maxt) {
  std::shared_ptr<const Stores> stores;
  {
    base::MutexLock l(&mu_);
    stores = stores_;
  }
  const int64_t local_start = local_start_ ? local_start_() : INT64_MAX;
  return std::unique_ptr<storage::Querier>(new RemoteQuerier(std::move(stores), mint, maxt, local_start, user_agent_));
}

Result<std::unique_ptr<storage::Querier>> FanoutQueryable::NewQuerier(int64_t mint, int64_t maxt) {
  ASSIGN_OR_RETURN(std::unique_ptr<storage::Querier> p, primary_->NewQuerier(mint, maxt));
  if (secondary_ == nullptr || secondary_->empty()) return p;
  ASSIGN_OR_RETURN(std::unique_ptr<storage::Querier> s, secondary_->NewQuerier(mint, maxt));
  return std::unique_ptr<storage::Querier>(new FanoutQuerier(std::move(p), std::move(s)));
}

}  // namespace trainwatch::remote
