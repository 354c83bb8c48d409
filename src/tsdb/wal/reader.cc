#include "tsdb/wal/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/coding.h"
#include "base/file.h"
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

Reader::~Reader() = default;

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
  map_.reset();
  data_ = {};
  if (next_seg_ == segments_.size()) return false;
  const Seg& seg = segments_[next_seg_];
  if (cur_index_ >= 0 && seg.index != cur_index_ + 1) {
    // A hole: records after it would be replayed out of order with the lost
    // ones, so stop; Repair(dir, missing, 0) drops everything after the hole.
    SetCorruption(cur_index_ + 1, 0, "missing segment (next is " + internal::SegmentName(seg.index) + ")", false);
    return false;
  }
  next_seg_++;
  auto m = file::MmapFile::Open(seg.path);
  if (!m.ok()) {
    status_ = m.status().Annotate("wal read");
    return false;
  }
  map_ = std::move(*m);
  data_ = map_->data();
  cur_index_ = seg.index;
  pos_ = 0;
  return true;
}

bool Reader::Next(std::string_view* record) {
  if (!status_.ok()) return false;
  for (;;) {
    if (map_ == nullptr || pos_ == data_.size()) {
      if (!OpenNextSegment()) return false;
      continue;
    }
    std::string_view rec, rest = data_.substr(pos_);
    size_t frame_size = 0;
    std::string what;
    bool torn = false;
    if (!ParseFrame(rest, &rec, &frame_size, &what, &torn)) {
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

bool ParseFrame(std::string_view data, std::string_view* record, size_t* frame_size, std::string* what, bool* torn) {
  const uint64_t left = data.size();
  const char* p = data.data();
  if (left < kFrameHeaderSize) {
    *what = "truncated frame header";
    *torn = true;
    return false;
  }
  const uint32_t len = DecodeFixed32(p);
  const uint32_t crc = DecodeFixed32(p + 4);
  const auto type = static_cast<uint8_t>(p[8]);
  if (type != internal::kFrameFull) {
    if (type == 0 && len == 0 && crc == 0 && AllZero(data)) {
      *what = "zero-filled tail";
      *torn = true;
    } else {
      *what = "invalid frame type " + std::to_string(type);
      *torn = false;
    }
    return false;
  }
  if (len > left - kFrameHeaderSize) {
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
