#include "remote/sender.h"

#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "base/clock.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/mutex.h"
#include "remote/proto.h"
#include "common/relabel.h"
#include "tsdb/wal/records.h"

namespace trainwatch::remote {

struct Sender::Shard {
  base::Mutex mu;
  base::CondVar cv;  // samples arrived, room was made, or stop
  std::deque<Pending> pending TW_GUARDED_BY(mu);  // oldest first, the batch in flight included
  std::deque<HistPending> hpending TW_GUARDED_BY(mu);  // histogram samples, likewise
  bool quit TW_GUARDED_BY(mu) = false;  // resharding ends this shard
  int64_t batch_started_ns TW_GUARDED_BY(mu) = 0;  // monotonic; when the next batch began to wait
  base::Mutex client_mu;
  std::unique_ptr<httplib::Client> client TW_GUARDED_BY(client_mu);  // the pointer: Stop aborts its request
  std::thread thread;
};

namespace {

std::string FormatPosition(Position p) { return std::to_string(p.segment) + " " + std::to_string(p.offset) + "\n"; }

// "12 4096\n" -> {12, 4096}.
bool ParsePosition(std::string_view s, Position* p) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  auto r1 = std::from_chars(b, e, p->segment);
  if (r1.ec != std::errc() || r1.ptr == e || *r1.ptr != ' ' || p->segment < 0) return false;
  auto r2 = std::from_chars(r1.ptr + 1, e, p->offset);
  return r2.ec == std::errc() && (r2.ptr == e || *r2.ptr == '\n');
}

// Seconds of a Retry-After header in its delay-seconds form; 0 otherwise.
int64_t RetryAfterMs(const httplib::Response& r) {
  std::string v = r.get_header_value("Retry-After");
  int64_t s = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
  if (ec != std::errc() || end != v.data() + v.size() || s <= 0) return 0;
  return s * 1000;
}

}  // namespace

Sender::Sender(RemoteWriteConfig cfg, Queue* q, std::string position_path, std::string user_agent)
    : cfg_(std::move(cfg)), q_(q), position_path_(std::move(position_path)), user_agent_(std::move(user_agent)) {}

Result<std::unique_ptr<Sender>> Sender::Start(RemoteWriteConfig cfg, Queue* q, std::string position_path,
                                              std::string user_agent) {
  Position start = q->End();
  bool have = false;
  if (file::Exists(position_path)) {
    std::string text;
    RETURN_IF_ERROR(file::ReadFile(position_path, &text));
    if (ParsePosition(text, &start)) {
      have = true;
    } else {
      // Resending everything on disk duplicates; skipping it would lose data.
      TW_LOG(Warn, "remote_write {}: unreadable position file {}; sending the whole queue again", cfg.name,
             position_path);
      start = Position{q->FirstSegment(), 0};
    }
  }
  std::unique_ptr<Sender> s(new Sender(std::move(cfg), q, std::move(position_path), std::move(user_agent)));
  {
    base::MutexLock l(&s->mu_);  // no other thread yet; for the analysis
    s->acked_ = start;
  }
  if (!have) RETURN_IF_ERROR(file::WriteFileAtomic(s->position_path_, FormatPosition(start)));
  s->StartShards(std::clamp<uint64_t>(s->cfg_.queue.min_shards, 1, s->cfg_.queue.max_shards));
  s->reader_ = std::thread([p = s.get(), start] { p->ReadLoop(start); });
  TW_LOG(Info, "remote_write {}: sending to {} from queue segment {} offset {}", s->cfg_.name, s->cfg_.url,
         start.segment, start.offset);
  return s;
}

Sender::~Sender() { Stop(); }

void Sender::StartShards(size_t n) {
  std::vector<std::unique_ptr<Shard>> fresh;
  for (size_t i = 0; i < n; i++) fresh.push_back(std::make_unique<Shard>());
  {
    base::WriterMutexLock l(&shards_mu_);
    shards_ = std::move(fresh);
    for (auto& sh : shards_) sh->thread = std::thread([this, shard = sh.get()] { ShardLoop(shard); });
  }
  base::MutexLock l(&mu_);
  stats_.shards = static_cast<int>(n);
}

bool Sender::DrainAndStopShards() {
  {
    auto drained = [&] {
      base::ReaderMutexLock sl(&shards_mu_);
      for (auto& s : shards_) {
        base::MutexLock g(&s->mu);
        if (!s->pending.empty() || !s->hpending.empty()) return false;
      }
      return true;
    };
    base::MutexLock l(&mu_);
    while (!stop_ && !drained()) cv_.Wait(&mu_);
  }
  if (stop_) return false;
  base::ReaderMutexLock sl(&shards_mu_);
  for (auto& s : shards_) {
    {
      base::MutexLock g(&s->mu);
      s->quit = true;
    }
    s->cv.SignalAll();
  }
  for (auto& s : shards_) s->thread.join();
  return true;
}

void Sender::Stop() {
  {
    base::MutexLock l(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_ = true;
  {
    base::ReaderMutexLock sl(&shards_mu_);
    for (auto& s : shards_) {
      { base::MutexLock l(&s->mu); }  // a waiter between its check and its wait sees stop_
      s->cv.SignalAll();
      base::MutexLock l(&s->client_mu);
      if (s->client) s->client->stop();  // aborts a request in flight
    }
  }
  { base::MutexLock l(&mu_); }
  cv_.SignalAll();
  if (reader_.joinable()) reader_.join();  // after this nothing replaces shards_
  for (auto& s : shards_) {
    if (s->thread.joinable()) s->thread.join();
  }
  SavePosition(acked(), file::Sync::kYes);
}

Position Sender::acked() const {
  base::MutexLock l(&mu_);
  return acked_;
}

SenderStats Sender::stats() const {
  uint64_t pending = 0;
  base::ReaderMutexLock sl(&shards_mu_);
  for (auto& s : shards_) {
    base::MutexLock l(&s->mu);
    pending += s->pending.size() + s->hpending.size();
  }
  base::MutexLock l(&mu_);
  SenderStats st = stats_;
  st.samples_pending = pending;
  return st;
}

void Sender::SavePosition(Position p, file::Sync sync) {
  Status s = file::WriteFileAtomic(position_path_, FormatPosition(p), sync);
  if (!s.ok()) TW_LOG(Error, "remote_write {}: save position: {}", cfg_.name, s.ToString());
}

void Sender::UpdateAcked() {
  uint64_t min_unsent = UINT64_MAX;
  {
    base::ReaderMutexLock sl(&shards_mu_);
    for (auto& s : shards_) {
      base::MutexLock l(&s->mu);
      if (!s->pending.empty()) min_unsent = std::min(min_unsent, s->pending.front().seq);
      if (!s->hpending.empty()) min_unsent = std::min(min_unsent, s->hpending.front().seq);
    }
  }
  base::MutexLock l(&mu_);
  const uint64_t done = min_unsent == UINT64_MAX ? dispatched_seq_ : std::min(dispatched_seq_, min_unsent - 1);
  while (!record_ends_.empty() && record_ends_.front().first <= done) {
    acked_ = record_ends_.front().second;
    record_ends_.pop_front();
  }
}

void Sender::ForgetOldSeries(int segment) {
  uint64_t done;
  {
    base::MutexLock l(&mu_);
    done = record_ends_.empty() ? dispatched_seq_ : record_ends_.front().first - 1;
  }
  for (auto it = series_.begin(); it != series_.end();) {
    if (it->second.last_segment < segment - 1 && it->second.last_seq <= done) it = series_.erase(it);
    else ++it;
  }
}

void Sender::ReadLoop(Position start) {
  // Records of the start segment are read from its beginning for their
  // series; samples records that end at or before `start` were sent.
  QueueCursor cur(q_, Position{start.segment, 0});
  std::vector<wal::RefSeries> series;
  std::vector<wal::RefSample> samples;
  std::vector<wal::RefHistogramSample> hists;
  uint64_t seq = 0;
  int segment = start.segment;
  Position saved = start;
  int64_t saved_at = MonoNanos();
  uint64_t unknown = 0;
  const uint64_t capacity = cfg_.queue.capacity;
  std::vector<std::vector<Pending>> groups(shards_.size());  // a record's samples by shard
  std::vector<std::vector<HistPending>> hgroups;             // a histogram record's, by shard
  // Resharding: time the reader waited for shard room in the current window.
  const int64_t kWindowNs = cfg_.queue.reshard_window_ms * 1'000'000;
  int64_t window_start = MonoNanos(), blocked_ns = 0;
  uint64_t retried_at_start = 0;
  int calm_windows = 0;
  auto maybe_reshard = [&] {
    const int64_t now = MonoNanos();
    if (now - window_start < kWindowNs) return;
    const double blocked = static_cast<double>(blocked_ns) / static_cast<double>(now - window_start);
    uint64_t retried;
    {
      base::MutexLock l(&mu_);
      retried = stats_.samples_retried;
    }
    const size_t n = groups.size();
    size_t want = n;
    calm_windows = blocked_ns == 0 ? calm_windows + 1 : 0;
    if (blocked > 0.5 && retried == retried_at_start && n < cfg_.queue.max_shards) {
      want = std::min<size_t>(cfg_.queue.max_shards, n * 2);
    } else if (calm_windows >= 6 && n > cfg_.queue.min_shards) {
      want = std::max<size_t>(cfg_.queue.min_shards, n / 2);
    }
    window_start = now;
    blocked_ns = 0;
    retried_at_start = retried;
    if (want == n) return;
    if (!DrainAndStopShards()) return;
    StartShards(want);
    groups.assign(want, {});
    calm_windows = 0;
    TW_LOG(Info, "remote_write {}: {} shards (was {})", cfg_.name, want, n);
  };
  auto save_now = [&] {
    Position a = acked();
    if (a != saved) {
      SavePosition(a, file::Sync::kNo);
      saved = a;
    }
    saved_at = MonoNanos();
  };
  while (!stop_) {
    if (MonoNanos() - saved_at > 1000000000) save_now();
    maybe_reshard();
    std::string_view rec;
    Position end;
    if (!cur.Next(&rec, &end)) {
      {
        base::MutexLock l(&mu_);
        stats_.segments_skipped = cur.segments_skipped();
      }
      save_now();
      q_->WaitPast(cur.position(), 500);
      continue;
    }
    if (end.segment != segment) {
      segment = end.segment;
      ForgetOldSeries(segment);
    }
    switch (wal::Type(rec)) {
      case wal::RecordType::kSeries: {
        Status s = wal::DecodeSeries(rec, &series);
        if (!s.ok()) {
          TW_LOG(Error, "remote_write {}: queue segment {}: {}", cfg_.name, end.segment, s.ToString());
          break;
        }
        for (wal::RefSeries& rs : series) {
          auto [it, added] = series_.try_emplace(rs.ref);
          SeriesEntry& e = it->second;
          e.last_segment = end.segment;
          if (!added) continue;
          if (!cfg_.external_labels.empty()) {
            model::LabelsBuilder b(rs.labels);
            for (const model::Label& x : cfg_.external_labels) {
              if (!rs.labels.Has(x.name)) b.Set(x.name, x.value);
            }
            rs.labels = b.Build();
          }
          if (cfg_.write_relabel_configs.empty()) {
            AppendLabelFields(rs.labels, &e.label_fields);
          } else {
            common::LabelSet ls(rs.labels);
            e.dropped = !common::Relabel(cfg_.write_relabel_configs, &ls) || ls.pairs().empty();
            if (!e.dropped) AppendLabelFields(ls.ToLabels(), &e.label_fields);
          }
        }
        break;
      }
      case wal::RecordType::kSamples: {
        if (end <= start) break;  // sent before the restart
        Status s = wal::DecodeSamples(rec, &samples);
        if (!s.ok()) {
          TW_LOG(Error, "remote_write {}: queue segment {}: {}", cfg_.name, end.segment, s.ToString());
          break;
        }
        ++seq;
        {
          base::MutexLock l(&mu_);
          record_ends_.emplace_back(seq, end);
        }
        uint64_t dropped = 0;
        for (auto& g : groups) g.clear();
        for (const wal::RefSample& smp : samples) {
          auto it = series_.find(smp.ref);
          if (it == series_.end()) {
            if (unknown++ == 0) TW_LOG(Error, "remote_write {}: sample of unknown queue series {}", cfg_.name, smp.ref);
            continue;
          }
          if (it->second.dropped) {
            dropped++;
            continue;
          }
          it->second.last_seq = seq;
          groups[HashMix(smp.ref, 0x9e3779b97f4a7c15ull) % groups.size()].push_back(
              Pending{&it->second, smp.t, smp.v, seq});
        }
        // One lock and one wake-up per shard and record, in parts when a
        // shard has less room than the record brings.
        for (size_t i = 0; i < groups.size(); i++) {
          const std::vector<Pending>& g = groups[i];
          Shard* sh = shards_[i].get();  // only this thread replaces shards_
          for (size_t k = 0; k < g.size();) {
            base::MutexLock l(&sh->mu);
            if (sh->pending.size() >= capacity) {
              const int64_t w0 = MonoNanos();
              while (!stop_ && sh->pending.size() >= capacity) sh->cv.Wait(&sh->mu);
              blocked_ns += MonoNanos() - w0;
            }
            if (stop_) return;
            const size_t n = std::min<size_t>(capacity - sh->pending.size(), g.size() - k);
            if (sh->pending.empty()) sh->batch_started_ns = MonoNanos();
            sh->pending.insert(sh->pending.end(), g.begin() + static_cast<std::ptrdiff_t>(k),
                               g.begin() + static_cast<std::ptrdiff_t>(k + n));
            k += n;
            sh->cv.SignalAll();
          }
        }
        {
          base::MutexLock l(&mu_);
          dispatched_seq_ = seq;
          stats_.samples_dropped += dropped;
        }
        UpdateAcked();
        break;
      }
      case wal::RecordType::kHistogramSamples: {
        if (end <= start) break;  // sent before the restart
        Status s = wal::DecodeHistogramSamples(rec, &hists);
        if (!s.ok()) {
          TW_LOG(Error, "remote_write {}: queue segment {}: {}", cfg_.name, end.segment, s.ToString());
          break;
        }
        // Not asked for: the record passes (and is acknowledged) empty.
        if (!cfg_.send_native_histograms) hists.clear();
        ++seq;
        {
          base::MutexLock l(&mu_);
          record_ends_.emplace_back(seq, end);
        }
        uint64_t dropped = 0;
        hgroups.resize(groups.size());
        for (auto& g : hgroups) g.clear();
        for (wal::RefHistogramSample& smp : hists) {
          auto it = series_.find(smp.ref);
          if (it == series_.end()) {
            if (unknown++ == 0) TW_LOG(Error, "remote_write {}: sample of unknown queue series {}", cfg_.name, smp.ref);
            continue;
          }
          if (it->second.dropped) {
            dropped++;
            continue;
          }
          it->second.last_seq = seq;
          hgroups[HashMix(smp.ref, 0x9e3779b97f4a7c15ull) % hgroups.size()].push_back(
              HistPending{&it->second, smp.t, std::move(smp.h), seq});
        }
        for (size_t i = 0; i < hgroups.size(); i++) {
          std::vector<HistPending>& g = hgroups[i];
          Shard* sh = shards_[i].get();
          for (size_t k = 0; k < g.size();) {
            base::MutexLock l(&sh->mu);
            if (sh->pending.size() + sh->hpending.size() >= capacity) {
              const int64_t w0 = MonoNanos();
              while (!stop_ && sh->pending.size() + sh->hpending.size() >= capacity) sh->cv.Wait(&sh->mu);
              blocked_ns += MonoNanos() - w0;
            }
            if (stop_) return;
            const size_t n = std::min<size_t>(capacity - sh->pending.size() - sh->hpending.size(), g.size() - k);
            if (sh->pending.empty() && sh->hpending.empty()) sh->batch_started_ns = MonoNanos();
            for (size_t j = k; j < k + n; j++) sh->hpending.push_back(std::move(g[j]));
            k += n;
            sh->cv.SignalAll();
          }
        }
        {
          base::MutexLock l(&mu_);
          dispatched_seq_ = seq;
          stats_.samples_dropped += dropped;
        }
        UpdateAcked();
        break;
      }
      default:
        TW_LOG(Error, "remote_write {}: queue segment {} offset {}: unknown record type", cfg_.name, end.segment,
               end.offset);
    }
  }
}

void Sender::ShardLoop(Shard* s) {
  const size_t max_send = cfg_.queue.max_samples_per_send;
  const int64_t deadline_ns = cfg_.queue.batch_send_deadline_ms * 1000000;
  std::vector<Pending> batch;
  std::vector<HistPending> hbatch;
  std::vector<model::Sample> run;
  std::vector<HistogramRef> hrun;
  std::string proto, body;
  for (;;) {
    batch.clear();
    hbatch.clear();
    {
      base::MutexLock l(&s->mu);
      for (;;) {
        if (stop_ || s->quit) return;
        if (s->pending.size() + s->hpending.size() >= max_send) break;
        if (s->pending.empty() && s->hpending.empty()) {
          s->cv.Wait(&s->mu);
          continue;
        }
        auto due = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(s->batch_started_ns + deadline_ns));
        if (std::chrono::steady_clock::now() >= due) break;
        s->cv.WaitUntil(&s->mu, due);
      }
      const size_t n = std::min(max_send, s->pending.size());
      batch.assign(s->pending.begin(), s->pending.begin() + static_cast<std::ptrdiff_t>(n));
      const size_t hn = std::min(max_send - n, s->hpending.size());
      if (hn > 0) hbatch.assign(s->hpending.begin(), s->hpending.begin() + static_cast<std::ptrdiff_t>(hn));
    }
    // One TimeSeries per series of the batch, its samples in time order.
    std::sort(batch.begin(), batch.end(), [](const Pending& a, const Pending& b) {
      return a.series != b.series ? a.series < b.series : a.t < b.t;
    });
    std::sort(hbatch.begin(), hbatch.end(), [](const HistPending& a, const HistPending& b) {
      return a.series != b.series ? a.series < b.series : a.t < b.t;
    });
    proto.clear();
    int64_t highest = INT64_MIN;
    for (size_t i = 0, j = 0; i < batch.size() || j < hbatch.size();) {
      const SeriesEntry* e = i == batch.size()    ? hbatch[j].series
                             : j == hbatch.size() ? batch[i].series
                                                  : std::min(batch[i].series, hbatch[j].series);
      run.clear();
      for (; i < batch.size() && batch[i].series == e; i++) {
        run.push_back(model::Sample{batch[i].t, batch[i].v});
        highest = std::max(highest, batch[i].t);
      }
      hrun.clear();
      for (; j < hbatch.size() && hbatch[j].series == e; j++) {
        hrun.push_back(HistogramRef{hbatch[j].t, &hbatch[j].h});
        highest = std::max(highest, hbatch[j].t);
      }
      AppendTimeSeriesEncoded(e->label_fields, run.data(), run.size(), hrun.data(), hrun.size(), &proto);
    }
    SnappyCompress(proto, &body);
    if (!SendWithRetries(s, body, batch.size() + hbatch.size(), highest)) return;
    {
      base::MutexLock l(&s->mu);
      s->pending.erase(s->pending.begin(), s->pending.begin() + static_cast<std::ptrdiff_t>(batch.size()));
      s->hpending.erase(s->hpending.begin(), s->hpending.begin() + static_cast<std::ptrdiff_t>(hbatch.size()));
      s->batch_started_ns = MonoNanos();
    }
    s->cv.SignalAll();
    UpdateAcked();
    cv_.SignalAll();  // a reshard may wait for this shard to empty
  }
}

bool Sender::SendWithRetries(Shard* s, const std::string& body, size_t samples, int64_t highest_ms) {
  int64_t backoff = cfg_.queue.min_backoff_ms;
  int attempt = 0;
  const int64_t t0 = MonoNanos();
  for (;;) {
    if (stop_) return false;
    attempt++;
    std::string failure;
    int64_t retry_after = 0;
    bool retryable = true;
    httplib::Client* c = nullptr;
    {
      base::MutexLock l(&s->client_mu);
      if (!s->client) {
        auto nc = common::NewHttpClient(cfg_.base, cfg_.http, cfg_.remote_timeout_ms);
        if (nc.ok()) s->client = std::move(*nc);
        else failure = nc.error().message();
      }
      c = s->client.get();
    }
    std::vector<std::pair<std::string, std::string>> extra;
    if (c != nullptr) {
      Status a = common::ApplyHttpAuth(cfg_.http, c, &extra);
      if (!a.ok()) failure = a.message();
    }
    if (failure.empty()) {
      httplib::Headers h = {{"Content-Encoding", "snappy"},
                            {"User-Agent", user_agent_},
                            {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
      h.insert(extra.begin(), extra.end());
      h.insert(cfg_.headers.begin(), cfg_.headers.end());
      auto res = c->Post(cfg_.path, h, body, "application/x-protobuf");
      if (res && res->status / 100 == 2) {
        base::MutexLock l(&mu_);
        stats_.samples_sent += samples;
        stats_.bytes_sent += body.size();
        stats_.requests++;
        stats_.request_seconds += static_cast<double>(MonoNanos() - t0) / 1e9;
        stats_.highest_sent_ms = std::max(stats_.highest_sent_ms, highest_ms);
        return true;
      }
      if (stop_) return false;
      if (res) {
        failure = "server returned HTTP status " + std::to_string(res->status) + ": " + res->body.substr(0, 256);
        while (!failure.empty() && (failure.back() == '\n' || failure.back() == ' ')) failure.pop_back();
        retryable = res->status / 100 == 5 || (res->status == 429 && cfg_.queue.retry_on_http_429);
        retry_after = RetryAfterMs(*res);
      } else {
        failure = "Post \"" + cfg_.url + "\": " + httplib::to_string(res.error());
        base::MutexLock l(&s->client_mu);
        s->client.reset();  // a fresh connection next time
      }
    }
    if (!retryable) {
      TW_LOG(Error, "remote_write {}: non-recoverable error sending {} samples, dropped: {}", cfg_.name, samples, failure);
      base::MutexLock l(&mu_);
      stats_.samples_failed += samples;
      return true;
    }
    if (attempt == 1 || attempt % 10 == 0) {
      TW_LOG(Warn, "remote_write {}: failed to send batch (attempt {}), retrying: {}", cfg_.name, attempt, failure);
    }
    {
      base::MutexLock l(&mu_);
      stats_.samples_retried += samples;
    }
    const int64_t wait = retry_after > 0 ? retry_after : backoff;
    {
      base::MutexLock l(&s->mu);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait);
      while (!stop_ && s->cv.WaitUntil(&s->mu, deadline)) {
      }
    }
    backoff = std::min(backoff * 2, cfg_.queue.max_backoff_ms);
  }
}

}  // namespace trainwatch::remote
