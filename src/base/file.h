#pragma once
// Small POSIX file helpers shared by the WAL and the block store. All return
// Status with the path in the message.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace trainwatch::file {

// Read-only memory map of a whole file. Thread-safe for concurrent reads.
class MmapFile {
 public:
  static Result<std::unique_ptr<MmapFile>> Open(const std::string& path);
  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  std::string_view data() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  MmapFile(const char* data, size_t size) : data_(data), size_(size) {}
  const char* data_;
  size_t size_;
};

Status ReadFile(const std::string& path, std::string* out);
// Writes all of `data` to fd at its offset (retried on EINTR and short
// writes); errors name `path` (NoSpace for ENOSPC and EDQUOT).
Status WriteAll(int fd, std::string_view data, const std::string& path);
// The errno a test's write fault (testing::SetWriteFault) gives the next
// write to `path`, or 0: always 0 outside tests. Every writer of data files
// asks it first: WriteAll (blocks, checkpoints' files, atomic files) and the WAL.
int WriteFault(const std::string& path);
enum class Sync { kYes, kNo };
// Writes path.tmp, fsyncs it, renames it over path and fsyncs the directory.
// With Sync::kNo the fsyncs are skipped: a reader sees the old or the new
// contents after a process crash, but after a power loss the file may be
// old, new or empty (for state that is cheap to redo, e.g. a send position).
Status WriteFileAtomic(const std::string& path, std::string_view data, Sync sync = Sync::kYes);
Status SyncDir(const std::string& dir);
// fdatasync(fd): 0, or the errno it failed with (or the fault a test set).
int DataSync(int fd);
Status MkdirAll(const std::string& dir);
// Removes a file or a directory tree; a missing path is not an error.
Status RemoveAll(const std::string& path);
// Names (not paths) of the entries of dir, sorted.
Result<std::vector<std::string>> ListDir(const std::string& dir);
bool Exists(const std::string& path);
// Total bytes of the regular files under path.
uint64_t DiskUsage(const std::string& path);

// A damaged file or directory is set aside, not deleted: renamed
// "<path>.corrupt" (".corrupt.1", ".corrupt.2", ... when taken), each of
// `companions` ("-wal", "-shm" for a SQLite database) renamed to the new
// name plus its suffix, so that the sqlite3 shell still opens the copy (for
// .recover). Nothing serves it after; the operator inspects or removes it.
inline constexpr std::string_view kSetAsideSuffix = ".corrupt";
Result<std::string> SetAside(const std::string& path, const std::vector<std::string_view>& companions = {});
// How many entries of `dir` are set aside copies of `name` ("<name>.corrupt",
// "<name>.corrupt.N"), companions not counted.
size_t CountSetAside(const std::string& dir, std::string_view name);

namespace testing {
// Tests only: while set, every DataSync returns fault(fd) instead of syncing
// when that is non-zero (an errno such as EIO or ENOSPC). Empty: off.
void SetSyncFault(std::function<int(int fd)> fault);
// Tests only: while set, a write to `path` that fault(path) answers with a
// non-zero errno (ENOSPC, EIO) writes the first half of its bytes, as a disk
// filling up would, then fails with it. Empty: off.
void SetWriteFault(std::function<int(const std::string& path)> fault);
}  // namespace testing

}  // namespace trainwatch::file
