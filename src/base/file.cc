#include "base/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <functional>

#include "base/mutex.h"

namespace trainwatch::file {

Result<std::unique_ptr<MmapFile>> MmapFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno("stat " + path, e);
  }
  size_t size = static_cast<size_t>(st.st_size);
  const char* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Status::FromErrno("mmap " + path, e);
    }
    data = static_cast<const char*>(p);
  }
  ::close(fd);
  return std::unique_ptr<MmapFile>(new MmapFile(data, size));
}

MmapFile::~MmapFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
}

Status ReadFile(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  out->clear();
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return Status::FromErrno("read " + path, e);
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return Status::OK();
}

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  if (int e = WriteFault(path); e != 0) {
    std::string_view half = data.substr(0, data.size() / 2);
    while (!half.empty()) {
      ssize_t n = ::write(fd, half.data(), half.size());
      if (n <= 0) break;
      half.remove_prefix(static_cast<size_t>(n));
    }
    return Status::FromErrno("write " + path, e);
  }
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write " + path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

Status WriteFileAtomic(const std::string& path, std::string_view data, Sync sync) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno("create " + tmp, errno);
  Status s = WriteAll(fd, data, tmp);
  if (s.ok() && sync == Sync::kYes && ::fsync(fd) != 0) s = Status::FromErrno("fsync " + tmp, errno);
  ::close(fd);
  if (!s.ok()) return s;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Status::FromErrno("rename " + tmp, errno);
  if (sync == Sync::kNo) return Status::OK();
  std::string dir = std::filesystem::path(path).parent_path().string();
  return SyncDir(dir.empty() ? "." : dir);
}

namespace {
std::atomic<bool> sync_fault_set{false};
base::Mutex sync_fault_mu;
std::function<int(int)> sync_fault TW_GUARDED_BY(sync_fault_mu);
std::atomic<bool> write_fault_set{false};
base::Mutex write_fault_mu;
std::function<int(const std::string&)> write_fault TW_GUARDED_BY(write_fault_mu);
}  // namespace

int WriteFault(const std::string& path) {
  if (!write_fault_set.load(std::memory_order_acquire)) return 0;
  base::MutexLock l(&write_fault_mu);
  return write_fault ? write_fault(path) : 0;
}

void testing::SetWriteFault(std::function<int(const std::string& path)> fault) {
  base::MutexLock l(&write_fault_mu);
  write_fault = std::move(fault);
  write_fault_set.store(static_cast<bool>(write_fault), std::memory_order_release);
}

void testing::SetSyncFault(std::function<int(int fd)> fault) {
  base::MutexLock l(&sync_fault_mu);
  sync_fault = std::move(fault);
  sync_fault_set.store(static_cast<bool>(sync_fault), std::memory_order_release);
}

int DataSync(int fd) {
  if (sync_fault_set.load(std::memory_order_acquire)) {
    base::MutexLock l(&sync_fault_mu);
    if (sync_fault) {
      if (int e = sync_fault(fd); e != 0) return e;
    }
  }
  return ::fdatasync(fd) != 0 ? errno : 0;
}

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open dir " + dir, errno);
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0) return Status::FromErrno("fsync dir " + dir, e);
  return Status::OK();
}

Status MkdirAll(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("mkdir " + dir + ": " + ec.message());
  return Status::OK();
}

Status RemoveAll(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::IOError("remove " + path + ": " + ec.message());
  return Status::OK();
}

Result<std::string> SetAside(const std::string& path, const std::vector<std::string_view>& companions) {
  std::string to = path + std::string(kSetAsideSuffix);
  for (int i = 1; Exists(to); i++) to = path + std::string(kSetAsideSuffix) + "." + std::to_string(i);
  if (::rename(path.c_str(), to.c_str()) != 0) return Status::FromErrno("set aside " + path, errno);
  for (std::string_view c : companions) {
    std::string from = path + std::string(c);
    if (!Exists(from)) continue;
    std::string dest = to + std::string(c);
    if (::rename(from.c_str(), dest.c_str()) != 0) return Status::FromErrno("set aside " + from, errno);
  }
  size_t slash = path.rfind('/');
  if (Status s = SyncDir(slash == std::string::npos ? "." : path.substr(0, slash)); !s.ok()) return s;
  return to;
}

size_t CountSetAside(const std::string& dir, std::string_view name) {
  auto names = ListDir(dir);
  if (!names.ok()) return 0;
  const std::string base = std::string(name) + std::string(kSetAsideSuffix);
  size_t n = 0;
  for (const auto& e : *names) {
    if (e == base) {
      n++;
    } else if (e.size() > base.size() + 1 && e.starts_with(base) && e[base.size()] == '.' &&
               e.find_first_not_of("0123456789", base.size() + 1) == std::string::npos) {
      n++;
    }
  }
  return n;
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) return Status::IOError("list " + dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t DiskUsage(const std::string& path) {
  std::error_code ec;
  uint64_t total = 0;
  if (std::filesystem::is_regular_file(path, ec)) return std::filesystem::file_size(path, ec);
  for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

}  // namespace trainwatch::file
