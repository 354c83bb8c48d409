#include "tsdb/wal/segment.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>

#include "base/coding.h"
#include "base/crc32c.h"
#include "base/file.h"

namespace trainwatch::wal::internal {

uint32_t FrameCrc(uint8_t type, std::string_view record) {
  char t = static_cast<char>(type);
  return MaskCrc(crc32c::Extend(crc32c::Value(&t, 1), record.data(), record.size()));
}

void EncodeFrameHeader(std::string_view record, char* dst) {
  CHECK(record.size() <= kMaxRecordSize, "BUG: wal record exceeds 4 GiB");
  EncodeFixed32(dst, static_cast<uint32_t>(record.size()));
  EncodeFixed32(dst + 4, FrameCrc(kFrameFull, record));
  dst[8] = static_cast<char>(kFrameFull);
}

std::string SegmentName(int index) {
  CHECK(index >= 0 && index <= 99999999, "BUG: wal segment index out of range");
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08d", index);
  return buf;
}

int ParseSegmentName(std::string_view name) {
  if (name.size() != 8) return -1;
  int v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::string SegmentPath(const std::string& dir, int index) { return dir + "/" + SegmentName(index); }

Result<std::vector<SegmentRef>> ListSegments(const std::string& dir) {
  if (!file::Exists(dir)) return Status::NotFound("wal dir " + dir + ": does not exist");
  ASSIGN_OR_RETURN(auto names, file::ListDir(dir));
  std::vector<SegmentRef> out;
  for (const auto& n : names) {
    int idx = ParseSegmentName(n);
    if (idx < 0) continue;
    std::string path = dir + "/" + n;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("stat " + path, errno);
    if (!S_ISREG(st.st_mode)) continue;
    out.push_back({idx, static_cast<uint64_t>(st.st_size)});
  }
  // ListDir sorts names and all names are 8 digits, so `out` is ascending.
  return out;
}

}  // namespace trainwatch::wal::internal
