#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "base/file.h"
#include "base/mutex.h"
#include "tsdb/wal/segment.h"
#include "tsdb/wal/wal.h"

namespace trainwatch::wal {

using internal::kFrameHeaderSize;

struct Writer::Segment {
  Segment(int i, int f, std::string p) : index(i), fd(f), path(std::move(p)) {}
  ~Segment() { ::close(fd); }
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  Status DataSync() const {
    if (int e = file::DataSync(fd); e != 0) return Status::FromErrno("fdatasync " + path, e);
    return Status::OK();
  }

  const int index;
  const int fd;
  const std::string path;
};

namespace {

constexpr int kMaxSegmentIndex = 99999999;

// Writes iov[0, iovcnt) fully at `offset`, retrying short writes and EINTR.
// Positional, so a failed write that was cut off leaves no gap behind.
Status WriteAllV(int fd, const std::string& path, struct iovec* iov, int iovcnt, uint64_t offset) {
  if (int e = file::WriteFault(path); e != 0) {
    // A test's full disk: half of the frames' bytes land, then the error.
    std::string half;
    for (int i = 0; i < iovcnt; i++) half.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    half.resize(half.size() / 2);
    [[maybe_unused]] ssize_t n = ::pwrite(fd, half.data(), half.size(), static_cast<off_t>(offset));
    return Status::FromErrno("write " + path, e);
  }
  while (iovcnt > 0) {
    ssize_t n = ::pwritev(fd, iov, std::min(iovcnt, IOV_MAX), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write " + path, errno);
    }
    offset += static_cast<uint64_t>(n);
    auto left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      iov++;
      iovcnt--;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Status::OK();
}

}  // namespace

Result<std::shared_ptr<Writer::Segment>> Writer::CreateSegment(const std::string& dir, int index) {
  if (index > kMaxSegmentIndex) return Status::ResourceExhausted("wal " + dir + ": segment index space exhausted");
  std::string path = internal::SegmentPath(dir, index);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("create wal segment " + path, errno);
  return std::make_shared<Writer::Segment>(index, fd, std::move(path));
}

Result<std::unique_ptr<Writer>> Writer::Open(const Options& options) {
  if (options.dir.empty()) return Status::InvalidArgument("open wal: empty dir");
  if (options.segment_bytes < 1024) return Status::InvalidArgument("open wal: segment_bytes below 1024");
  RETURN_IF_ERROR(file::MkdirAll(options.dir));
  ASSIGN_OR_RETURN(auto segments, internal::ListSegments(options.dir));
  std::map<int, uint64_t> sizes;
  for (const auto& s : segments) sizes[s.index] = s.size;
  int next = segments.empty() ? 0 : segments.back().index + 1;
  std::unique_ptr<Writer> w(new Writer(options, std::move(sizes)));
  ASSIGN_OR_RETURN(auto seg, CreateSegment(options.dir, next));
  {
    base::MutexLock l(&w->mu_);  // not shared yet; for the analysis
    w->cur_ = std::move(seg);
    w->cur_index_ = next;
  }
  RETURN_IF_ERROR(file::SyncDir(options.dir));
  return w;
}

Writer::Writer(Options options, std::map<int, uint64_t> closed_sizes)
    : opts_(std::move(options)), closed_sizes_(std::move(closed_sizes)) {}

Writer::~Writer() { (void)Close(); }

Status Writer::Health() const {
  base::MutexLock l(&mu_);
  return err_;
}

Status Writer::CheckUsableLocked() const {
  if (closed_) return Status::Unavailable("wal " + opts_.dir + ": writer closed");
  return err_;
}

Status Writer::Log(std::string_view record) { return WriteFrames(&record, 1); }

Status Writer::Log(const std::vector<std::string>& records) {
  if (records.size() == 1) return Log(records[0]);
  std::vector<std::string_view> views(records.begin(), records.end());
  return WriteFrames(views.data(), views.size());
}

Status Writer::WriteFrames(const std::string_view* records, size_t n) {
  if (n == 0) return Status::OK();
  // Frame headers are computed outside the lock; concurrent loggers only
  // serialize on the write itself.
  char one_header[kFrameHeaderSize];
  std::vector<char> many_headers;
  char* headers = one_header;
  if (n > 1) {
    many_headers.resize(n * kFrameHeaderSize);
    headers = many_headers.data();
  }
  for (size_t i = 0; i < n; i++) {
    if (records[i].size() > internal::kMaxRecordSize) {
      return Status::InvalidArgument("wal log: record of " + std::to_string(records[i].size()) + " bytes exceeds 4 GiB");
    }
    internal::EncodeFrameHeader(records[i], headers + i * kFrameHeaderSize);
  }
  struct iovec stack_iov[2];
  std::vector<struct iovec> heap_iov;
  struct iovec* iov = stack_iov;
  if (n > 1) {
    heap_iov.resize(2 * n);
    iov = heap_iov.data();
  }

  base::MutexLock l(&mu_);
  RETURN_IF_ERROR(CheckUsableLocked());
  size_t i = 0;
  while (i < n) {
    // Take the longest run of records that fits the current segment; a
    // record that does not fit even an empty segment goes alone.
    size_t j = i;
    uint64_t run = 0;
    while (j < n) {
      uint64_t frame = kFrameHeaderSize + records[j].size();
      if (cur_bytes_ + run + frame > opts_.segment_bytes && (cur_bytes_ + run) > 0) break;
      iov[2 * (j - i)] = {headers + j * kFrameHeaderSize, kFrameHeaderSize};
      iov[2 * (j - i) + 1] = {const_cast<char*>(records[j].data()), records[j].size()};
      run += frame;
      j++;
    }
    if (j == i) {
      RETURN_IF_ERROR(RollLocked(/*sync_old=*/false));
      continue;
    }
    Status s = WriteAllV(cur_->fd, cur_->path, iov, static_cast<int>(2 * (j - i)), cur_bytes_);
    if (!s.ok()) {
      // Cut the partial frames so later records stay readable; if even that
      // fails the segment is unusable.
      if (::ftruncate(cur_->fd, static_cast<off_t>(cur_bytes_)) != 0) {
        err_ = Status::FromErrno("truncate " + cur_->path + " after failed write", errno);
      }
      return s;
    }
    cur_bytes_ += run;
    logged_ += run;
    i = j;
  }
  return Status::OK();
}

Status Writer::RollLocked(bool sync_old) {
  ASSIGN_OR_RETURN(auto next, CreateSegment(opts_.dir, cur_->index + 1));
  if (sync_old) {
    Status s = cur_->DataSync();
    if (!s.ok()) {
      err_ = s;
      return s;
    }
  } else {
    unsynced_.push_back(cur_);
  }
  closed_sizes_[cur_->index] = cur_bytes_;
  cur_ = std::move(next);
  cur_index_ = cur_->index;
  cur_bytes_ = 0;
  dir_dirty_ = true;
  return Status::OK();
}

Result<uint64_t> Writer::SyncRound() {
  std::vector<std::shared_ptr<Segment>> segs;
  bool dir = false;
  uint64_t pos = 0;
  {
    base::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckUsableLocked());
    segs.swap(unsynced_);
    segs.push_back(cur_);
    std::swap(dir, dir_dirty_);
    pos = logged_;
  }
  sync_rounds_.fetch_add(1, std::memory_order_relaxed);
  // fdatasync outside mu_ so Log keeps going; the shared_ptrs keep the fds
  // open even if the segment is rolled meanwhile.
  Status s;
  for (const auto& seg : segs) {
    s = seg->DataSync();
    if (!s.ok()) break;
  }
  if (s.ok() && dir) s = file::SyncDir(opts_.dir);
  if (!s.ok()) {
    // After a failed fsync the kernel may have dropped the dirty pages; the
    // only safe answer is to stop accepting writes.
    base::MutexLock l(&mu_);
    if (err_.ok()) err_ = s;
    return s;
  }
  return pos;
}

Status Writer::Sync() {
  uint64_t target;
  {
    base::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckUsableLocked());
    target = logged_;
  }
  base::MutexLock l(&sync_mu_);
  while (synced_ < target) {
    if (syncing_) {
      // A leader is syncing; it may or may not cover our target.
      sync_cv_.Wait(&sync_mu_);
      continue;
    }
    syncing_ = true;
    l.Unlock();
    Result<uint64_t> r = SyncRound();
    l.Lock();
    syncing_ = false;
    if (r.ok()) synced_ = std::max(synced_, *r);
    sync_cv_.SignalAll();
    if (!r.ok()) return r.status();
  }
  return Status::OK();
}

Result<int> Writer::NextSegment() {
  base::MutexLock l(&mu_);
  RETURN_IF_ERROR(CheckUsableLocked());
  RETURN_IF_ERROR(RollLocked(/*sync_old=*/true));
  return cur_index_;
}

Status Writer::TruncateBefore(int segment) {
  std::vector<int> victims;
  {
    base::MutexLock l(&mu_);
    RETURN_IF_ERROR(CheckUsableLocked());
    if (segment > cur_index_) {
      return Status::InvalidArgument("wal truncate before " + std::to_string(segment) + ": current segment is " +
                                     std::to_string(cur_index_));
    }
    for (auto it = closed_sizes_.begin(); it != closed_sizes_.end() && it->first < segment;) {
      victims.push_back(it->first);
      it = closed_sizes_.erase(it);
    }
  }
  // Oldest first, so a crash midway never leaves a hole in the sequence.
  for (int idx : victims) {
    std::string path = internal::SegmentPath(opts_.dir, idx);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("delete " + path, errno);
  }
  if (victims.empty()) return Status::OK();
  return file::SyncDir(opts_.dir);
}

int Writer::CurrentSegment() const {
  base::MutexLock l(&mu_);
  return cur_index_;
}

uint64_t Writer::SizeBytes() const {
  base::MutexLock l(&mu_);
  uint64_t total = cur_bytes_;
  for (const auto& [idx, size] : closed_sizes_) total += size;
  return total;
}

Status Writer::Close() {
  {
    base::MutexLock l(&mu_);
    if (closed_) return Status::OK();
  }
  Status s = Sync();
  base::MutexLock l(&mu_);
  closed_ = true;
  unsynced_.clear();
  cur_.reset();
  return s;
}

}  // namespace trainwatch::wal
