#include "tsdb/wal/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/coding.h"
#include "base/file.h"
#include "base/memory.h"
#include "tsdb/wal/segment.h"

namespace trainwatch::wal {

using internal::kFrameHeaderSize;

namespace {

bool AllZero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

}  // namespace

Result<std::unique_ptr<Reader>> Reader::Open(const std::string& dir, int first_segment) {
  ASSIGN_OR_RETURN(auto listed, internal::ListSegments(dir));
  std::vector<Seg> segs;
  for (const auto& s : listed) {
    if (s.index >= first_segment) segs.push_back({s.index, internal::SegmentPath(dir, s.index)});
  }
  return std::unique_ptr<Reader>(new Reader(dir, std::move(segs)));
}

Reader::~Reader() { CloseSegment(); }

void Reader::CloseSegment() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buf_len_ = 0;
}

void Reader::SetCorruption(int segment, uint64_t offset, std::string_view what, bool torn_candidate) {
  CorruptionInfo c;
  c.segment = segment;
  c.offset = offset;
  c.torn_tail = torn_candidate && LaterSegmentsEmpty();
  std::string msg = "wal segment " + internal::SegmentName(segment) + " offset " + std::to_string(offset) + ": ";
  msg += what;
  if (c.torn_tail) msg += " (torn tail)";
  status_ = Status::Corruption(std::move(msg));
  corruption_ = c;
}

bool Reader::LaterSegmentsEmpty() const {
  for (size_t i = next_seg_; i < segments_.size(); i++) {
    struct stat st;
    if (::stat(segments_[i].path.c_str(), &st) == 0 && st.st_size > 0) return false;
  }
  return true;
}

bool Reader::OpenNextSegment() {
  CloseSegment();
  if (next_seg_ == segments_.size()) return false;
  const Seg& seg = segments_[next_seg_];
  if (cur_index_ >= 0 && seg.index != cur_index_ + 1) {
    // A hole: records after it would be replayed out of order with the lost
    // ones, so stop; Repair(dir, missing, 0) drops everything after the hole.
    SetCorruption(cur_index_ + 1, 0, "missing segment (next is " + internal::SegmentName(seg.index) + ")", false);
    return false;
  }
  next_seg_++;
  int fd = ::open(seg.path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    status_ = Status::FromErrno((fd < 0 ? "open " : "stat ") + seg.path, errno).Annotate("wal read");
    if (fd >= 0) ::close(fd);
    return false;
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  fd_ = fd;
  cur_path_ = seg.path;
  seg_size_ = static_cast<uint64_t>(st.st_size);
  cur_index_ = seg.index;
  pos_ = 0;
  buf_off_ = 0;
  buf_len_ = 0;
  return true;
}

std::string_view Reader::Window(uint64_t off, size_t n) {
  n = static_cast<size_t>(std::min<uint64_t>(n, seg_size_ - std::min(off, seg_size_)));
  if (off >= buf_off_ && off + n <= buf_off_ + buf_len_) return {buf_.data() + (off - buf_off_), n};
  // Keep what is buffered from `off` on, then read after it: at least n
  // bytes and as much more as fills the buffer.
  if (off >= buf_off_ && off < buf_off_ + buf_len_) {
    const size_t keep = static_cast<size_t>(buf_off_ + buf_len_ - off);
    std::memmove(buf_.data(), buf_.data() + (off - buf_off_), keep);
    buf_len_ = keep;
  } else {
    buf_len_ = 0;
  }
  buf_off_ = off;
  if (buf_.size() < std::max(n, kReadSize)) buf_.resize(std::max(n, kReadSize));
  while (buf_len_ < n) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf_.size() - buf_len_, seg_size_ - (off + buf_len_)));
    ssize_t got = ::pread(fd_, buf_.data() + buf_len_, want, static_cast<off_t>(off + buf_len_));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      status_ = Status::FromErrno("read " + cur_path_, errno).Annotate("wal read");
      return {};
    }
    if (got == 0) break;  // shrunk since it was opened: what is there
    buf_len_ += static_cast<size_t>(got);
  }
  return {buf_.data(), std::min(n, buf_len_)};
}

namespace {

// ParseFrame's rules on the bytes the reader has: `avail` is the start of
// the rest of the segment (at least the frame, where the segment holds it),
// `left` the rest's size, and rest_zero tells whether the whole rest is
// zeros (asked only of a zero header).
template <class RestZero>
bool ParseFrameIn(std::string_view avail, uint64_t left, const RestZero& rest_zero, std::string_view* record,
                  size_t* frame_size, std::string* what, bool* torn) {
  const char* p = avail.data();
  if (left < kFrameHeaderSize || avail.size() < kFrameHeaderSize) {
    *what = "truncated frame header";
    *torn = true;
    return false;
  }
  const uint32_t len = DecodeFixed32(p);
  const uint32_t crc = DecodeFixed32(p + 4);
  const auto type = static_cast<uint8_t>(p[8]);
  if (type != internal::kFrameFull) {
    if (type == 0 && len == 0 && crc == 0 && rest_zero()) {
      *what = "zero-filled tail";
      *torn = true;
    } else {
      *what = "invalid frame type " + std::to_string(type);
      *torn = false;
    }
    return false;
  }
  if (len > left - kFrameHeaderSize || len > avail.size() - kFrameHeaderSize) {
    *what = "frame of " + std::to_string(len) + " bytes runs past segment end (" +
            std::to_string(left - kFrameHeaderSize) + " left)";
    *torn = true;
    return false;
  }
  std::string_view rec(p + kFrameHeaderSize, len);
  if (internal::FrameCrc(type, rec) != crc) {
    // A crash can leave a full-length last frame whose pages did not all
    // reach the disk; only then is a checksum mismatch a torn tail.
    *what = "checksum mismatch";
    *torn = len == left - kFrameHeaderSize;
    return false;
  }
  *record = rec;
  *frame_size = kFrameHeaderSize + len;
  return true;
}

}  // namespace

bool ParseFrame(std::string_view data, std::string_view* record, size_t* frame_size, std::string* what, bool* torn) {
  return ParseFrameIn(data, data.size(), [&] { return AllZero(data); }, record, frame_size, what, torn);
}

bool Reader::Next(std::string_view* record) {
  if (!status_.ok()) return false;
  for (;;) {
    if (fd_ < 0 || pos_ >= seg_size_) {
      if (!OpenNextSegment()) return false;
      continue;
    }
    // The frame alone, by its header's length (Window stops at the
    // segment's end); a zero header is a torn tail only if zeros fill the
    // rest, which is read through the buffer piece by piece.
    const uint64_t left = seg_size_ - pos_;
    std::string_view avail = Window(pos_, kFrameHeaderSize);
    if (avail.size() == kFrameHeaderSize) {
      avail = Window(pos_, kFrameHeaderSize + size_t{DecodeFixed32(avail.data())});
    }
    if (!status_.ok()) return false;
    auto rest_zero = [&] {
      for (uint64_t off = pos_; off < seg_size_;) {
        std::string_view w = Window(off, static_cast<size_t>(std::min<uint64_t>(seg_size_ - off, kReadSize)));
        if (w.empty() || !AllZero(w)) return false;
        off += w.size();
      }
      return true;
    };
    std::string_view rec;
    size_t frame_size = 0;
    std::string what;
    bool torn = false;
    if (!ParseFrameIn(avail, left, rest_zero, &rec, &frame_size, &what, &torn)) {
      if (!status_.ok()) return false;  // a read error while looking at the rest
      SetCorruption(cur_index_, pos_, what, torn);
      return false;
    }
    rec_segment_ = cur_index_;
    rec_offset_ = pos_;
    pos_ += frame_size;
    *record = rec;
    return true;
  }
}

Status Repair(const std::string& dir, int segment, uint64_t offset, bool keep_later) {
  ASSIGN_OR_RETURN(auto segs, internal::ListSegments(dir));
  // Newest first: a crash midway leaves the bad frame in place for the next
  // replay to find, never a cleanly cut segment followed by stale ones.
  for (auto it = segs.rbegin(); !keep_later && it != segs.rend() && it->index > segment; ++it) {
    std::string path = internal::SegmentPath(dir, it->index);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("wal repair: delete " + path, errno);
  }
  auto target = std::find_if(segs.begin(), segs.end(), [&](const auto& s) { return s.index == segment; });
  if (target != segs.end()) {
    std::string path = internal::SegmentPath(dir, segment);
    if (offset > target->size) {
      return Status::InvalidArgument("wal repair: offset " + std::to_string(offset) + " beyond end of " + path);
    }
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno("wal repair: open " + path, errno);
    Status s;
    if (::ftruncate(fd, static_cast<off_t>(offset)) != 0) {
      s = Status::FromErrno("wal repair: truncate " + path, errno);
    } else if (::fsync(fd) != 0) {
      s = Status::FromErrno("wal repair: fsync " + path, errno);
    }
    ::close(fd);
    RETURN_IF_ERROR(s);
  }
  return file::SyncDir(dir);
}

}  // namespace trainwatch::wal
