#include "remote/queue.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>

#include "base/clock.h"
#include "base/coding.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/log.h"
#include "base/mutex.h"
#include "tsdb/wal/reader.h"
#include "tsdb/wal/segment.h"
#include "tsdb/wal/wal.h"

namespace trainwatch::remote {
namespace {

constexpr int kIdCounterBits = 40;

// The queue's own segment size rule replaces the writer's: it never rolls
// by itself, so the queue knows which segment each record lands in.
constexpr uint64_t kWriterNeverRolls = uint64_t{1} << 62;

class QueueAppender final : public storage::Appender {
 public:
  explicit QueueAppender(Queue* q) : q_(q) {}

  Result<storage::SeriesRef> Append(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                    double v) override {
    uint64_t id = ref;
    if (id == 0 || !q_->Known(id)) { ASSIGN_OR_RETURN(id, q_->Resolve(labels)); }
    buf_.push_back({id, t, v});
    return id;
  }
  bool AppendByRef(storage::SeriesRef ref, int64_t t, double v) override {
    if (ref == 0 || !q_->Known(ref)) return false;
    buf_.push_back({ref, t, v});
    return true;
  }
  Result<storage::SeriesRef> AppendHistogram(storage::SeriesRef ref, const model::Labels& labels, int64_t t,
                                             const model::FloatHistogram& h) override {
    RETURN_IF_ERROR(h.Validate());
    uint64_t id = ref;
    if (id == 0 || !q_->Known(id)) { ASSIGN_OR_RETURN(id, q_->Resolve(labels)); }
    hbuf_.push_back({id, t, h});
    return id;
  }
  Status Commit() override {
    Status s = hbuf_.empty() ? q_->Log(buf_) : q_->Log(buf_, hbuf_);
    buf_.clear();
    hbuf_.clear();
    return s;
  }
  void Rollback() override {
    buf_.clear();
    hbuf_.clear();
  }

 private:
  Queue* q_;
  std::vector<wal::RefSample> buf_;
  std::vector<wal::RefHistogramSample> hbuf_;
};

// Reads <dir>/epoch (0 when absent), writes it back plus one.
Result<uint64_t> NextEpoch(const std::string& dir) {
  const std::string path = dir + "/epoch";
  uint64_t epoch = 0;
  if (file::Exists(path)) {
    std::string text;
    RETURN_IF_ERROR(file::ReadFile(path, &text));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), epoch);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return Status::Corruption("remote write queue " + path + ": not a number: \"" + text + "\"");
    }
  }
  epoch = (epoch + 1) & ((uint64_t{1} << (64 - kIdCounterBits)) - 1);
  if (epoch == 0) epoch = 1;
  RETURN_IF_ERROR(file::WriteFileAtomic(path, std::to_string(epoch) + "\n"));
  return epoch;
}

}  // namespace

Result<std::unique_ptr<Queue>> Queue::Open(QueueOptions opts) {
  RETURN_IF_ERROR(file::MkdirAll(opts.dir));
  ASSIGN_OR_RETURN(uint64_t epoch, NextEpoch(opts.dir));
  // A crash can leave the last segment with a torn tail: cut it off before
  // the writer starts the next segment. Earlier segments were closed cleanly.
  ASSIGN_OR_RETURN(auto segs, wal::internal::ListSegments(opts.dir));
  int first = segs.empty() ? -1 : segs.front().index;
  auto last = std::find_if(segs.rbegin(), segs.rend(), [](const auto& s) { return s.size > 0; });
  if (last != segs.rend()) {
    ASSIGN_OR_RETURN(auto r, wal::Reader::Open(opts.dir, last->index));
    std::string_view rec;
    while (r->Next(&rec)) {
    }
    if (r->corruption()) {
      TW_LOG(Warn, "remote write queue {}: {}; truncating there", opts.dir, r->status().message());
      RETURN_IF_ERROR(wal::Repair(opts.dir, *r->corruption()));
    } else if (!r->status().ok()) {
      return r->status();
    }
  }
  wal::Options wo;
  wo.dir = opts.dir;
  wo.segment_bytes = kWriterNeverRolls;
  ASSIGN_OR_RETURN(auto writer, wal::Writer::Open(wo));
  std::unique_ptr<Queue> q(new Queue(std::move(opts)));
  {
    base::MutexLock l(&q->mu_);  // no other thread yet; for the analysis
    q->writer_ = std::move(writer);
    q->end_ = Position{q->writer_->CurrentSegment(), 0};
    q->first_segment_ = first >= 0 ? first : q->end_.segment;
    q->segment_started_ms_ = NowMillis();
    q->next_id_ = (epoch << kIdCounterBits) | 1;
  }
  q->sync_thread_ = std::thread([p = q.get()] { p->SyncLoop(); });
  return q;
}

Queue::Queue(QueueOptions opts) : opts_(std::move(opts)) {}

Queue::~Queue() {
  Status s = Close();
  if (!s.ok()) TW_LOG(Error, "close remote write queue {}: {}", opts_.dir, s.ToString());
}

std::unique_ptr<storage::Appender> Queue::NewAppender() { return std::make_unique<QueueAppender>(this); }

Result<uint64_t> Queue::Resolve(const model::Labels& given) {
  // Sent as a TSDB stores it (and as Prometheus would send it): without
  // empty-valued labels, whether the writer was the TSDB's fan-out or agent mode.
  const model::Labels labels = model::WithoutEmptyValues(given);
  if (labels.empty()) return Status::InvalidArgument("series without labels");
  std::string enc;
  model::AppendEncodedLabels(labels, &enc);
  const uint64_t h = HashString(enc);
  base::MutexLock l(&mu_);
  auto [lo, hi] = by_hash_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    Entry& e = by_id_.at(it->second);
    if (e.labels == enc) {
      e.last_used = end_.segment;
      return it->second;
    }
  }
  const uint64_t id = next_id_++;
  by_id_.emplace(id, Entry{std::move(enc), -1, end_.segment});
  by_hash_.emplace(h, id);
  return id;
}

bool Queue::Known(uint64_t id) {
  base::MutexLock l(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return false;
  it->second.last_used = end_.segment;
  return true;
}

Status Queue::Log(const std::vector<wal::RefSample>& samples) {
  static const std::vector<wal::RefHistogramSample> kNone;
  return Log(samples, kNone);
}

Status Queue::Log(const std::vector<wal::RefSample>& samples, const std::vector<wal::RefHistogramSample>& hists) {
  if (samples.empty() && hists.empty()) return Status::OK();
  base::MutexLock l(&mu_);
  if (closed_) return Status::Unavailable("remote write queue is closed");
  const int seg = end_.segment;
  new_series_.clear();
  size_t unknown = 0;
  auto define = [&](uint64_t ref) {
    mu_.AssertHeld();  // called right below, under l
    auto it = by_id_.find(ref);
    if (it == by_id_.end()) {
      unknown++;
      return;
    }
    Entry& e = it->second;
    e.last_used = seg;
    if (e.defined_in != seg) {
      e.defined_in = seg;
      new_series_.emplace_back(ref, e.labels);
    }
  };
  for (const wal::RefSample& s : samples) define(s.ref);
  for (const wal::RefHistogramSample& s : hists) define(s.ref);
  std::vector<std::string> recs;
  if (unknown > 0) {
    // Only an appender held open across two segment rotations can get here.
    unknown_ += unknown;
    std::vector<wal::RefSample> known;
    for (const wal::RefSample& s : samples) {
      if (by_id_.contains(s.ref)) known.push_back(s);
    }
    std::vector<wal::RefHistogramSample> known_hists;
    for (const wal::RefHistogramSample& s : hists) {
      if (by_id_.contains(s.ref)) known_hists.push_back(s);
    }
    if (known.empty() && known_hists.empty()) return Status::OK();
    if (!known.empty()) wal::EncodeSamples(known, &samples_buf_);
    else samples_buf_.clear();
    if (!known_hists.empty()) {
      recs.emplace_back();
      wal::EncodeHistogramSamples(known_hists, &recs.back());
    }
  } else {
    if (!samples.empty()) wal::EncodeSamples(samples, &samples_buf_);
    else samples_buf_.clear();
    if (!hists.empty()) {
      recs.emplace_back();
      wal::EncodeHistogramSamples(hists, &recs.back());
    }
  }
  // Order: the series record, the samples record, the histograms record.
  const bool have_samples = !samples_buf_.empty();
  const bool have_series = !new_series_.empty();
  if (have_samples) recs.insert(recs.begin(), std::move(samples_buf_));
  if (have_series) {
    wal::EncodeSeriesEncoded(new_series_, &series_buf_);
    recs.insert(recs.begin(), std::move(series_buf_));
  }
  Status s = writer_->Log(recs);
  uint64_t bytes = 0;
  for (const std::string& r : recs) bytes += wal::internal::kFrameHeaderSize + r.size();
  // Keep the buffers' capacity for the next batch.
  if (have_series) series_buf_ = std::move(recs[0]);
  if (have_samples) samples_buf_ = std::move(recs[have_series ? 1 : 0]);
  if (!s.ok()) {
    // The series records may not be on disk: define them again next time.
    for (const auto& [ref, labels] : new_series_) by_id_.at(ref).defined_in = -1;
    return s.Annotate("remote write queue");
  }
  end_.offset += bytes;
  cv_.SignalAll();
  if (end_.offset >= opts_.segment_bytes) RETURN_IF_ERROR(RotateLocked());
  return Status::OK();
}

Status Queue::RotateLocked() {
  ASSIGN_OR_RETURN(int next, writer_->NextSegment());
  end_ = Position{next, 0};
  segment_started_ms_ = NowMillis();
  // Forget series not used in the segment just closed nor since.
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    if (it->second.last_used < next - 1) {
      auto [lo, hi] = by_hash_.equal_range(HashString(it->second.labels));
      for (auto h = lo; h != hi; ++h) {
        if (h->second == it->first) {
          by_hash_.erase(h);
          break;
        }
      }
      it = by_id_.erase(it);
    } else {
      ++it;
    }
  }
  DropOldestLocked();
  cv_.SignalAll();
  return Status::OK();
}

void Queue::DropOldestLocked() {
  if (opts_.max_bytes == 0) return;
  while (writer_->SizeBytes() > opts_.max_bytes && first_segment_ < end_.segment) {
    Status s = writer_->TruncateBefore(first_segment_ + 1);
    if (!s.ok()) {
      TW_LOG(Error, "remote write queue {}: drop oldest segment: {}", opts_.dir, s.ToString());
      return;
    }
    TW_LOG(Warn, "remote write queue {} over {} bytes: dropped unsent segment {}", opts_.dir, opts_.max_bytes,
           first_segment_);
    first_segment_++;
    segments_dropped_++;
  }
}

void Queue::SyncLoop() {
  for (;;) {
    wal::Writer* w = nullptr;
    {
      base::MutexLock l(&mu_);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.sync_interval_ms);
      while (!closed_ && sync_cv_.WaitUntil(&mu_, deadline)) {
      }
      if (closed_) return;
      if (end_.offset > 0 && NowMillis() - segment_started_ms_ >= opts_.segment_max_age_ms) {
        Status s = RotateLocked();
        if (!s.ok()) TW_LOG(Error, "remote write queue {}: rotate: {}", opts_.dir, s.ToString());
      }
      w = writer_.get();
    }
    // Close joins this thread before it closes the writer.
    Status s = w->Sync();
    if (!s.ok()) TW_LOG(Error, "remote write queue {}: sync: {}", opts_.dir, s.ToString());
  }
}

Position Queue::End() const {
  base::MutexLock l(&mu_);
  return end_;
}

Position Queue::WaitPast(Position pos, int64_t timeout_ms) const {
  base::MutexLock l(&mu_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!closed_ && end_ == pos && cv_.WaitUntil(&mu_, deadline)) {
  }
  return end_;
}

int Queue::FirstSegment() const {
  base::MutexLock l(&mu_);
  return first_segment_;
}

Status Queue::TruncateBefore(int segment) {
  base::MutexLock l(&mu_);
  if (closed_) return Status::OK();
  segment = std::min(segment, end_.segment);
  if (segment <= first_segment_) return Status::OK();
  RETURN_IF_ERROR(writer_->TruncateBefore(segment));
  first_segment_ = segment;
  cv_.SignalAll();
  return Status::OK();
}

std::string Queue::SegmentPath(int segment) const { return wal::internal::SegmentPath(opts_.dir, segment); }

Status Queue::Close() {
  {
    base::MutexLock l(&mu_);
    if (closed_) return Status::OK();
    closed_ = true;
  }
  cv_.SignalAll();
  sync_cv_.SignalAll();
  if (sync_thread_.joinable()) sync_thread_.join();
  base::MutexLock l(&mu_);
  Status s = writer_->Close();
  writer_.reset();
  return s;
}

uint64_t Queue::SizeBytes() const {
  base::MutexLock l(&mu_);
  return writer_ ? writer_->SizeBytes() : 0;
}

uint64_t Queue::segments_dropped() const {
  base::MutexLock l(&mu_);
  return segments_dropped_;
}

uint64_t Queue::samples_unknown_series() const {
  base::MutexLock l(&mu_);
  return unknown_;
}

uint64_t Queue::series() const {
  base::MutexLock l(&mu_);
  return by_id_.size();
}

// QueueCursor

QueueCursor::QueueCursor(const Queue* q, Position start) : q_(q), pos_(start) {}

QueueCursor::~QueueCursor() {
  if (fd_ >= 0) ::close(fd_);
}

bool QueueCursor::OpenSegment(int segment) {
  if (fd_ >= 0) ::close(fd_);
  buf_.clear();
  buf_start_ = 0;
  fd_ = ::open(q_->SegmentPath(segment).c_str(), O_RDONLY | O_CLOEXEC);
  return fd_ >= 0;
}

// Makes buf_ hold the bytes [pos_.offset, pos_.offset + want), or up to
// limit when that is less; false on a read error.
bool QueueCursor::Fill(uint64_t limit) {
  constexpr uint64_t kMinRead = 1 << 20;
  uint64_t want = std::max<uint64_t>(kMinRead, buf_.size() * 2);
  uint64_t n = std::min(limit - pos_.offset, want);
  buf_.resize(n);
  buf_start_ = pos_.offset;
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd_, buf_.data() + got, n - got, static_cast<off_t>(pos_.offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      status_ = r < 0 ? Status::FromErrno("read " + q_->SegmentPath(pos_.segment), errno)
                      : Status::Corruption("read " + q_->SegmentPath(pos_.segment) + ": shorter than expected");
      buf_.resize(got);
      return false;
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

bool QueueCursor::Next(std::string_view* record, Position* end) {
  for (;;) {
    const Position qend = q_->End();
    const int first = q_->FirstSegment();
    if (pos_.segment < first) {
      skipped_ += static_cast<uint64_t>(first - pos_.segment);
      pos_ = Position{first, 0};
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
    }
    if (pos_ >= qend && pos_.segment == qend.segment) return false;  // caught up
    if (fd_ < 0 && !OpenSegment(pos_.segment)) {
      if (pos_.segment < q_->FirstSegment()) continue;  // dropped under us
      status_ = Status::FromErrno("open " + q_->SegmentPath(pos_.segment), errno);
      return false;
    }
    const bool closed = pos_.segment < qend.segment;
    uint64_t limit = qend.offset;
    if (closed) {
      struct stat st;
      if (::fstat(fd_, &st) != 0) {
        status_ = Status::FromErrno("stat " + q_->SegmentPath(pos_.segment), errno);
        return false;
      }
      limit = static_cast<uint64_t>(st.st_size);
    }
    if (pos_.offset >= limit) {
      if (!closed) return false;
      pos_ = Position{pos_.segment + 1, 0};
      ::close(fd_);
      fd_ = -1;
      continue;
    }
    // The frame at pos_: header first, then the whole frame, in buf_.
    auto in_buf = [&](uint64_t n) {
      return pos_.offset >= buf_start_ && pos_.offset + n <= buf_start_ + buf_.size();
    };
    uint64_t need = std::min<uint64_t>(wal::internal::kFrameHeaderSize, limit - pos_.offset);
    if (!in_buf(need) && !Fill(limit)) return false;
    if (limit - pos_.offset >= wal::internal::kFrameHeaderSize) {
      need = std::min<uint64_t>(limit - pos_.offset,
                                wal::internal::kFrameHeaderSize + DecodeFixed32(buf_.data() + (pos_.offset - buf_start_)));
      while (!in_buf(need)) {
        if (!Fill(limit)) return false;
      }
    }
    const uint64_t avail = std::min(limit, buf_start_ + buf_.size()) - pos_.offset;
    std::string_view rest(buf_.data() + (pos_.offset - buf_start_), avail);
    std::string_view rec;
    size_t frame_size = 0;
    std::string what;
    bool torn = false;
    if (!wal::ParseFrame(rest, &rec, &frame_size, &what, &torn)) {
      status_ = Status::Corruption("remote write queue segment " + wal::internal::SegmentName(pos_.segment) +
                                   " offset " + std::to_string(pos_.offset) + ": " + what);
      if (!closed) return false;  // only ever complete records below End(): wait for the next segment
      TW_LOG(Error, "{}; skipping the rest of the segment", status_.message());
      skipped_++;
      pos_ = Position{pos_.segment + 1, 0};
      ::close(fd_);
      fd_ = -1;
      continue;
    }
    *record = rec;
    pos_.offset += frame_size;
    *end = pos_;
    return true;
  }
}

}  // namespace trainwatch::remote
