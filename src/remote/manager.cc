#include "remote/manager.h"

#include <array>
#include <unordered_map>

#include "base/file.h"
#include "base/log.h"
#include "base/mutex.h"

namespace trainwatch::remote {
namespace {

// Maps the primary store's refs to queue ids, in stripes so concurrent
// appenders rarely share a lock.
class RefMap {
 public:
  uint64_t Get(uint64_t ref) {
    Stripe& s = stripes_[ref % kStripes];
    base::MutexLock l(&s.mu);
    auto it = s.m.find(ref);
    return it == s.m.end() ? 0 : it->second;
  }
  void Set(uint64_t ref, uint64_t id) {
    Stripe& s = stripes_[ref % kStripes];
    base::MutexLock l(&s.mu);
    s.m[ref] = id;
  }
  // Drops entries whose queue id the queue forgot; about every 4096th call
  // once the map is more than twice the queue's series.
  void MaybeSweep(Queue* q) {
    if (calls_.fetch_add(1, std::memory_order_relaxed) % 4096 != 0) return;
    size_t total = 0;
    for (Stripe& s : stripes_) {
      base::MutexLock l(&s.mu);
      total += s.m.size();
    }
    if (total <= 2 * q->series() + 1024) return;
    for (Stripe& s : stripes_) {
      base::MutexLock l(&s.mu);
      std::erase_if(s.m, [&](const auto& kv) { return !q->Known(kv.second); });
    }
  }

 private:
  static constexpr size_t kStripes = 64;
  struct Stripe {
    base::Mutex mu;
    std::unordered_map<uint64_t, uint64_t> m TW_GUARDED_BY(mu);
  };
  std::array<Stripe, kStripes> stripes_;
  std::atomic<uint64_t> calls_{0};
};

class FanoutAppender final : public storage::Appender {
 public:
  FanoutAppender(std::unique_ptr<storage::Appender> primary, Queue* q, RefMap* refs, std::atomic<uint64_t>* errors)
      : p_(std::move(primary)), q_(q), refs_(refs), errors_(errors) {}

  Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                    double v) override {
    ASSIGN_OR_RETURN(storage::SeriesRef pref, p_->Append(ref, labels, t, v));
    // The primary accepted it: its rules are the ones that count, so a
    // series the queue cannot name is not forwarded, and no error.
    if (q_ != nullptr) {
      if (uint64_t id = QueueId(pref, labels); id != 0) buf_.push_back({id, t, v});
    }
    return pref;
  }

  bool AppendByRef(storage::SeriesRef ref, int64_t t, double v) override {
    uint64_t id = 0;
    if (q_ != nullptr) {
      id = refs_->Get(ref);
      if (id == 0 || !q_->Known(id)) return false;  // the caller appends with labels
    }
    if (!p_->AppendByRef(ref, t, v)) return false;
    if (q_ != nullptr) buf_.push_back({id, t, v});
    return true;
  }

  // The start timestamp goes to the primary; remote write 1.0 has no place
  // for it, so the queue gets the sample as Append queues it.
  Result<storage::SeriesRef> AppendST(storage::SeriesRef ref, const model::Labels& labels, int64_t st, int64_t t,
                                      double v) override {
    RETURN_IF_ERROR(CheckRefOnly(ref, labels));
    ASSIGN_OR_RETURN(storage::SeriesRef pref, p_->AppendST(ref, labels, st, t, v));
    if (q_ != nullptr) {
      if (uint64_t id = QueueId(pref, labels); id != 0) buf_.push_back({id, t, v});
    }
    return pref;
  }

  Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                             const model::FloatHistogram& h) override {
    // By ref without labels (a scrape's cache) the queue must know the
    // series, or the histogram would be stored but never forwarded.
    RETURN_IF_ERROR(CheckRefOnly(ref, labels));
    ASSIGN_OR_RETURN(storage::SeriesRef pref, p_->AppendHistogram(ref, labels, t, h));
    if (q_ != nullptr) {
      if (uint64_t id = QueueId(pref, labels); id != 0) hbuf_.push_back({id, t, h});
    }
    return pref;
  }

  Result<storage::SeriesRef> AppendHistogramST(storage::SeriesRef ref, const model::Labels& labels, int64_t st,
                                               int64_t t, const model::FloatHistogram& h) override {
    RETURN_IF_ERROR(CheckRefOnly(ref, labels));
    ASSIGN_OR_RETURN(storage::SeriesRef pref, p_->AppendHistogramST(ref, labels, st, t, h));
    if (q_ != nullptr) {
      if (uint64_t id = QueueId(pref, labels); id != 0) hbuf_.push_back({id, t, h});
    }
    return pref;
  }

  Status Commit() override {
    if (q_ != nullptr && (!buf_.empty() || !hbuf_.empty())) {
      // Queued first: a crash before the primary's commit sends samples the
      // client will retry (the receiver stores them once), never loses them.
      Status s = hbuf_.empty() ? q_->Log(buf_) : q_->Log(buf_, hbuf_);
      buf_.clear();
      hbuf_.clear();
      if (!s.ok()) {
        // The local store still takes the batch; its 2xx is what the client
        // relies on. Forwarding of this batch is lost: counted and logged.
        errors_->fetch_add(1, std::memory_order_relaxed);
        TW_LOG(Error, "remote_write: {}", s.ToString());
      }
      refs_->MaybeSweep(q_);
    }
    return p_->Commit();
  }

  void Rollback() override {
    buf_.clear();
    hbuf_.clear();
    p_->Rollback();
  }

 private:
  // The queue's id of the primary's series `pref` (resolved from `labels`
  // when it has none yet); 0 when the queue cannot name it.
  uint64_t QueueId(storage::SeriesRef pref, const model::Labels& labels) {
    uint64_t id = refs_->Get(pref);
    if (id != 0 && q_->Known(id)) return id;
    auto r = q_->Resolve(labels);
    if (!r.ok()) return 0;
    refs_->Set(pref, *r);
    return *r;
  }
  // A scrape appends a cached ref without labels: refused (nothing
  // appended) when the queue could not name that series, so the caller
  // retries with labels, as after a failed AppendByRef.
  Status CheckRefOnly(storage::SeriesRef ref, const model::Labels& labels) {
    if (q_ == nullptr || !labels.empty()) return Status::OK();
    const uint64_t id = refs_->Get(ref);
    if (ref != 0 && id != 0 && q_->Known(id)) return Status::OK();
    return Status::InvalidArgument("series without labels");
  }

  std::unique_ptr<storage::Appender> p_;
  Queue* q_;  // null: no destination when this appender was made
  RefMap* refs_;
  std::atomic<uint64_t>* errors_;
  std::vector<wal::RefSample> buf_;
  std::vector<wal::RefHistogramSample> hbuf_;
};

class Fanout final : public storage::Appendable {
 public:
  Fanout(storage::Appendable* primary, std::function<Queue*()> queue, std::atomic<uint64_t>* errors)
      : primary_(primary), queue_(std::move(queue)), errors_(errors) {}
  std::unique_ptr<storage::Appender> NewAppender() override {
    return std::make_unique<FanoutAppender>(primary_->NewAppender(), queue_(), &refs_, errors_);
  }
  Status CheckTimestamp(int64_t t) override { return primary_->CheckTimestamp(t); }

 private:
  storage::Appendable* primary_;
  std::function<Queue*()> queue_;
  std::atomic<uint64_t>* errors_;
  RefMap refs_;
};

}  // namespace

namespace {

using common::metrics::Type;

struct SenderValue {
  const char* name;
  const char* help;
  Type type;
  double (*get)(const SenderStats&);
};

const SenderValue kSenderValues[] = {
    {"prometheus_remote_storage_samples_total", "Samples sent to remote storage (accepted with a 2xx).",
     Type::kCounter, [](const SenderStats& s) { return static_cast<double>(s.samples_sent); }},
    {"prometheus_remote_storage_samples_failed_total", "Samples dropped after a non-recoverable error.",
     Type::kCounter, [](const SenderStats& s) { return static_cast<double>(s.samples_failed); }},
    {"prometheus_remote_storage_samples_retried_total", "Samples whose send failed and was retried.",
     Type::kCounter, [](const SenderStats& s) { return static_cast<double>(s.samples_retried); }},
    {"prometheus_remote_storage_samples_dropped_total", "Samples dropped by write_relabel_configs.",
     Type::kCounter, [](const SenderStats& s) { return static_cast<double>(s.samples_dropped); }},
    {"prometheus_remote_storage_samples_pending", "Samples read from the queue and not yet sent.", Type::kGauge,
     [](const SenderStats& s) { return static_cast<double>(s.samples_pending); }},
    {"prometheus_remote_storage_shards", "Concurrent senders of the destination.", Type::kGauge,
     [](const SenderStats& s) { return static_cast<double>(s.shards); }},
    {"prometheus_remote_storage_bytes_total", "Compressed request bytes accepted by remote storage.",
     Type::kCounter, [](const SenderStats& s) { return static_cast<double>(s.bytes_sent); }},
    {"prometheus_remote_storage_queue_highest_sent_timestamp_seconds",
     "Timestamp of the newest sample remote storage accepted.", Type::kGauge,
     [](const SenderStats& s) { return static_cast<double>(s.highest_sent_ms) / 1000; }},
    {"trainwatch_remote_write_requests_total", "Requests remote storage accepted.", Type::kCounter,
     [](const SenderStats& s) { return static_cast<double>(s.requests); }},
    {"trainwatch_remote_write_request_seconds_total", "Time spent on accepted requests, retries included.",
     Type::kCounter, [](const SenderStats& s) { return s.request_seconds; }},
    {"trainwatch_remote_write_segments_skipped_total",
     "Queue segments a destination could not read (dropped by the size bound, or corrupt).", Type::kCounter,
     [](const SenderStats& s) { return static_cast<double>(s.segments_skipped); }},
};

constexpr const char* kQueueBytes = "trainwatch_remote_write_queue_bytes";
constexpr const char* kQueueSeries = "trainwatch_remote_write_queue_series";
constexpr const char* kQueueSegmentsDropped = "trainwatch_remote_write_queue_segments_dropped_total";
constexpr const char* kQueueErrors = "trainwatch_remote_write_queue_errors_total";

std::vector<common::metrics::Desc> MetricDescs() {
  std::vector<common::metrics::Desc> d;
  for (const SenderValue& v : kSenderValues) d.push_back({v.name, v.help, v.type, {"remote_name", "url"}});
  d.push_back({kQueueBytes, "Bytes of the on-disk remote write queue.", Type::kGauge, {}});
  d.push_back({kQueueSeries, "Series the remote write queue knows.", Type::kGauge, {}});
  d.push_back({kQueueSegmentsDropped, "Unsent queue segments deleted because the queue exceeded its size bound.",
               Type::kCounter, {}});
  d.push_back({kQueueErrors, "Committed batches that could not be written to the remote write queue.",
               Type::kCounter, {}});
  return d;
}

}  // namespace

Manager::Manager(ManagerOptions opts)
    : opts_(std::move(opts)), metrics_(MetricDescs(), [this](common::metrics::Emitter* e) { CollectMetrics(e); }) {
  if (opts_.metrics != nullptr) metrics_registration_ = opts_.metrics->MustRegister({&metrics_});
  housekeeper_ = std::thread([this] { Housekeep(); });
}

Manager::~Manager() {
  metrics_registration_.Reset();
  Stop();
}

Status Manager::ApplyConfig(std::vector<RemoteWriteConfig> cfgs) {
  base::MutexLock l(&mu_);
  if (stopped_) return Status::Unavailable("remote write manager is stopped");
  if (!cfgs.empty() && queue_ == nullptr) {
    QueueOptions qo = opts_.queue;
    qo.dir = opts_.dir + "/queue";
    ASSIGN_OR_RETURN(queue_, Queue::Open(std::move(qo)));
    queue_ptr_.store(queue_.get(), std::memory_order_release);
  }
  std::vector<std::unique_ptr<Sender>> keep, started;
  std::vector<std::unique_ptr<Sender>> old = std::move(senders_);
  senders_.clear();
  for (RemoteWriteConfig& c : cfgs) {
    auto same = std::find_if(old.begin(), old.end(), [&](const std::unique_ptr<Sender>& s) {
      return s && s->config().name == c.name && s->config().fingerprint == c.fingerprint;
    });
    if (same != old.end()) {
      keep.push_back(std::move(*same));
      continue;
    }
    // A changed entry resumes from the position its name saved.
    for (auto& s : old) {
      if (s && s->config().name == c.name) {
        s->Stop();
        s.reset();
      }
    }
    std::string name = c.name;
    auto s = Sender::Start(std::move(c), queue_.get(), opts_.dir + "/" + name + ".position", opts_.user_agent);
    if (!s.ok()) {
      for (auto& st : started) st->Stop();
      for (auto& o : old) {
        if (o) keep.push_back(std::move(o));
      }
      senders_ = std::move(keep);
      active_.store(!senders_.empty(), std::memory_order_release);
      return s.error().Annotate("remote_write " + name);
    }
    started.push_back(std::move(*s));
  }
  for (auto& s : old) {
    if (!s) continue;
    const std::string path = opts_.dir + "/" + s->config().name + ".position";
    s->Stop();
    Status r = file::RemoveAll(path);  // a destination added again later starts afresh
    if (!r.ok()) TW_LOG(Warn, "remote_write: remove {}: {}", path, r.ToString());
  }
  for (auto& s : started) keep.push_back(std::move(s));
  senders_ = std::move(keep);
  active_.store(!senders_.empty(), std::memory_order_release);
  if (!senders_.empty()) TW_LOG(Info, "remote_write: {} destination(s)", senders_.size());
  cv_.SignalAll();
  return Status::OK();
}

std::unique_ptr<storage::Appendable> Manager::Wrap(storage::Appendable* primary) {
  return std::make_unique<Fanout>(primary, [this] { return active_queue(); }, &queue_errors_);
}

storage::Appendable* Manager::queue() { return queue_ptr_.load(std::memory_order_acquire); }

size_t Manager::destinations() const {
  base::MutexLock l(&mu_);
  return senders_.size();
}

void Manager::Housekeep() {
  base::MutexLock l(&mu_);
  while (!stopped_) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!stopped_ && cv_.WaitUntil(&mu_, deadline)) {
    }
    if (stopped_ || queue_ == nullptr) continue;
    // Segments every destination has sent are deleted; with none, all closed ones.
    int keep_from = queue_->End().segment;
    for (const auto& s : senders_) keep_from = std::min(keep_from, s->acked().segment);
    Status st = queue_->TruncateBefore(keep_from);
    if (!st.ok()) TW_LOG(Error, "remote_write: delete sent queue segments: {}", st.ToString());
  }
}

void Manager::Stop() {
  std::vector<std::unique_ptr<Sender>> senders;
  {
    base::MutexLock l(&mu_);
    if (stopped_) return;
    stopped_ = true;
    active_.store(false, std::memory_order_release);
    senders = std::move(senders_);
  }
  cv_.SignalAll();
  if (housekeeper_.joinable()) housekeeper_.join();
  for (auto& s : senders) s->Stop();
  base::MutexLock l(&mu_);
  if (queue_ != nullptr) {
    Status s = queue_->Close();
    if (!s.ok()) TW_LOG(Error, "remote_write: close queue: {}", s.ToString());
  }
}

void Manager::CollectMetrics(common::metrics::Emitter* e) const {
  base::MutexLock l(&mu_);
  for (const auto& s : senders_) {
    const SenderStats st = s->stats();
    for (const SenderValue& v : kSenderValues) e->Add(v.name, {s->config().name, s->config().url}, v.get(st));
  }
  if (queue_ != nullptr) {
    e->Add(kQueueBytes, {}, static_cast<double>(queue_->SizeBytes()));
    e->Add(kQueueSeries, {}, static_cast<double>(queue_->series()));
    e->Add(kQueueSegmentsDropped, {}, static_cast<double>(queue_->segments_dropped()));
  }
  e->Add(kQueueErrors, {}, static_cast<double>(queue_errors_.load(std::memory_order_relaxed)));
}

}  // namespace trainwatch::remote
