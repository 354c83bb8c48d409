#include "tsdb/index/chunks_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "base/coding.h"
#include "base/crc32c.h"
#include "base/file.h"

namespace trainwatch::index {

namespace {

constexpr size_t kFlushThreshold = 1 << 20;

bool ParseSeq(const std::string& name, uint32_t* seq) {
  if (name.size() != 6) return false;
  uint32_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  *seq = v;
  return v > 0;
}

}  // namespace

std::string ChunkSegmentName(uint32_t seq) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%06u", seq);
  return buf;
}

// ---- Writer.

ChunkWriter::ChunkWriter(std::string dir, uint64_t segment_size)
    : dir_(std::move(dir)), segment_size_(segment_size) {}

ChunkWriter::~ChunkWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<ChunkWriter>> ChunkWriter::Create(const std::string& dir,
                                                         uint64_t segment_size) {
  if (segment_size < 64 || segment_size > (1ull << 32)) {
    return Status::InvalidArgument("chunk writer: segment size out of range");
  }
  RETURN_IF_ERROR(file::MkdirAll(dir));
  ASSIGN_OR_RETURN(std::vector<std::string> names, file::ListDir(dir));
  for (const std::string& n : names) {
    uint32_t seq;
    if (ParseSeq(n, &seq)) return Status::InvalidArgument("chunk writer: " + dir + " already has segment " + n);
  }
  return std::unique_ptr<ChunkWriter>(new ChunkWriter(dir, segment_size));
}

Status ChunkWriter::Flush() {
  if (buf_.empty()) return Status::OK();
  RETURN_IF_ERROR(file::WriteAll(fd_, buf_, dir_ + "/" + ChunkSegmentName(seq_)));
  buf_.clear();
  return Status::OK();
}

Status ChunkWriter::CloseSegment(bool sync) {
  if (fd_ < 0) return Status::OK();
  Status st = Flush();
  std::string path = dir_ + "/" + ChunkSegmentName(seq_);
  if (st.ok() && sync) {
    if (int e = file::DataSync(fd_); e != 0) st = Status::FromErrno("fdatasync " + path, e);
  }
  if (::close(fd_) != 0 && st.ok()) st = Status::FromErrno("close " + path, errno);
  fd_ = -1;
  return st;
}

Status ChunkWriter::Cut() {
  RETURN_IF_ERROR(CloseSegment(/*sync=*/true));
  ++seq_;
  std::string path = dir_ + "/" + ChunkSegmentName(seq_);
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::FromErrno("create " + path, errno);
  char hdr[kChunksSegmentHeaderSize] = {};
  EncodeFixed32(hdr, kChunksMagic);
  hdr[4] = static_cast<char>(kChunksFormatV1);
  buf_.assign(hdr, sizeof hdr);
  seg_off_ = sizeof hdr;
  total_bytes_ += sizeof hdr;
  return Status::OK();
}

Result<ChunkRef> ChunkWriter::Write(uint8_t encoding, std::string_view data) {
  if (finished_) return Status::InvalidArgument("chunk writer: write after finish");
  const uint64_t rec = static_cast<uint64_t>(VarintLength(data.size())) + 1 + data.size() + 4;
  if (rec + kChunksSegmentHeaderSize > (1ull << 32)) {
    return Status::InvalidArgument("chunk writer: chunk of " + std::to_string(data.size()) + " bytes too large");
  }
  if (fd_ < 0 || (seg_off_ + rec > segment_size_ && seg_off_ > kChunksSegmentHeaderSize)) {
    RETURN_IF_ERROR(Cut());
  }
  ChunkRef ref = MakeChunkRef(seq_, static_cast<uint32_t>(seg_off_));
  PutVarint64(&buf_, data.size());
  const size_t crc_start = buf_.size();
  buf_.push_back(static_cast<char>(encoding));
  buf_.append(data);
  PutFixed32(&buf_, crc32c::Value(buf_.data() + crc_start, buf_.size() - crc_start));
  seg_off_ += rec;
  total_bytes_ += rec;
  ++num_chunks_;
  if (buf_.size() >= kFlushThreshold) RETURN_IF_ERROR(Flush());
  return ref;
}

Status ChunkWriter::Finish() {
  if (finished_) return Status::OK();
  finished_ = true;
  RETURN_IF_ERROR(CloseSegment(/*sync=*/true));
  return file::SyncDir(dir_);
}

// ---- Reader.

ChunkReader::~ChunkReader() = default;

Result<std::unique_ptr<ChunkReader>> ChunkReader::Open(const std::string& dir, Options opts) {
  if (!file::Exists(dir)) return Status::NotFound("chunks dir " + dir + " does not exist");
  ASSIGN_OR_RETURN(std::vector<std::string> names, file::ListDir(dir));
  std::unique_ptr<ChunkReader> r(new ChunkReader(dir, opts));
  for (const std::string& n : names) {
    uint32_t seq;
    if (!ParseSeq(n, &seq)) continue;
    std::string path = dir + "/" + n;
    ASSIGN_OR_RETURN(std::unique_ptr<file::MmapFile> f, file::MmapFile::Open(path));
    std::string_view d = f->data();
    if (d.size() < kChunksSegmentHeaderSize || DecodeFixed32(d.data()) != kChunksMagic) {
      return Status::Corruption("chunk segment " + path + ": bad header at offset 0");
    }
    if (static_cast<uint8_t>(d[4]) != kChunksFormatV1) {
      return Status::Corruption("chunk segment " + path + ": unknown version " +
                                std::to_string(static_cast<uint8_t>(d[4])) + " at offset 4");
    }
    if (seq >= r->segs_.size()) r->segs_.resize(seq + 1);
    r->segs_[seq] = std::move(f);
  }
  return r;
}

uint64_t ChunkReader::TotalBytes() const {
  uint64_t n = 0;
  for (const auto& s : segs_) {
    if (s) n += s->size();
  }
  return n;
}

Result<ChunkView> ChunkReader::Get(ChunkRef ref) const {
  const uint32_t seq = ChunkRefSegment(ref);
  const uint64_t off = ChunkRefOffset(ref);
  auto corrupt = [&](std::string_view what) {
    return Status::Corruption("chunk segment " + dir_ + "/" + ChunkSegmentName(seq) + ": " +
                              std::string(what) + " at offset " + std::to_string(off));
  };
  if (seq >= segs_.size() || !segs_[seq]) return corrupt("reference to missing segment");
  std::string_view d = segs_[seq]->data();
  if (off < kChunksSegmentHeaderSize || off >= d.size()) return corrupt("chunk reference out of range");
  const char* p = d.data() + off;
  const char* limit = d.data() + d.size();
  uint64_t len;
  p = GetVarint64Ptr(p, limit, &len);
  if (p == nullptr) return corrupt("bad chunk length");
  const uint64_t avail = static_cast<uint64_t>(limit - p);
  if (avail < 5 || len > avail - 5) return corrupt("chunk extends past end of segment");
  ChunkView v;
  v.encoding = static_cast<uint8_t>(*p);
  v.data = std::string_view(p + 1, len);
  if (opts_.verify_checksums) {
    uint32_t want = DecodeFixed32(p + 1 + len);
    if (crc32c::Value(p, len + 1) != want) return corrupt("chunk checksum mismatch");
  }
  return v;
}

}  // namespace trainwatch::index
