#include "base/memory.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <limits>
#include <string_view>

#include "base/clock.h"
#include "base/file.h"
#include "base/units.h"

namespace trainwatch::memory {
namespace {

std::atomic<int64_t> last_query_ns{0};  // MonoNanos of the last NoteQuery; 0: none

// The number after `key` on its line of `text` ("RssAnon:     123 kB"), in
// the line's unit (kB: times 1024); nullopt-like 0 when absent.
uint64_t KbField(std::string_view text, std::string_view key) {
  size_t at = 0;
  while ((at = text.find(key, at)) != std::string_view::npos) {
    if (at == 0 || text[at - 1] == '\n') break;
    at += key.size();
  }
  if (at == std::string_view::npos) return 0;
  size_t p = at + key.size();
  while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) p++;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data() + p, text.data() + text.size(), v);
  if (ec != std::errc()) return 0;
  std::string_view rest = text.substr(static_cast<size_t>(end - text.data()));
  return rest.starts_with(" kB") ? v * 1024 : v;
}

// A cgroup limit file: a byte count, or "max" / a huge v1 value for none (0).
uint64_t LimitFile(const std::string& path) {
  std::string s;
  if (!file::ReadFile(path, &s).ok()) return 0;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc()) return 0;                 // "max"
  return v >= (uint64_t{1} << 60) ? 0 : v;        // v1's "no limit" is about 2^63
}

}  // namespace

uint64_t ProcessAnonRss(const std::string& proc) {
  // "size resident shared text lib data dt", in pages; shared = file + shmem.
  std::string s;
  if (!file::ReadFile(proc + "/self/statm", &s).ok()) return 0;
  uint64_t v[3] = {0, 0, 0};
  const char* p = s.data();
  const char* end = s.data() + s.size();
  for (uint64_t& x : v) {
    while (p < end && *p == ' ') p++;
    auto r = std::from_chars(p, end, x);
    if (r.ec != std::errc()) return 0;
    p = r.ptr;
  }
  static const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return v[1] > v[2] ? (v[1] - v[2]) * kPage : 0;
}

uint64_t Allowed(const std::string& proc, const std::string& cgroup_root) {
  std::string meminfo;
  uint64_t total = file::ReadFile(proc + "/meminfo", &meminfo).ok() ? KbField(meminfo, "MemTotal:") : 0;
  uint64_t limit = 0;
  std::string cg;
  if (file::ReadFile(proc + "/self/cgroup", &cg).ok()) {
    std::string_view rest = cg;
    while (!rest.empty() && limit == 0) {
      size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
      // "hierarchy-id:controllers:path"
      size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
      if (b == std::string_view::npos) continue;
      std::string_view controllers = line.substr(a + 1, b - a - 1);
      std::string path(line.substr(b + 1));
      if (path == "/") path.clear();
      if (line.substr(0, a) == "0" && controllers.empty()) {
        limit = LimitFile(cgroup_root + path + "/memory.max");  // v2
      } else if (controllers == "memory" || controllers.find("memory,") != std::string_view::npos ||
                 controllers.ends_with(",memory")) {
        limit = LimitFile(cgroup_root + "/memory" + path + "/memory.limit_in_bytes");  // v1
      }
    }
  }
  if (total == 0) return limit;
  return limit == 0 ? total : std::min(total, limit);
}

Result<uint64_t> ParseMemoryBound(std::string_view s, uint64_t allowed) {
  if (s.ends_with('%')) {
    uint64_t pct = 0;
    std::string_view n = s.substr(0, s.size() - 1);
    auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), pct);
    if (n.empty() || ec != std::errc() || end != n.data() + n.size() || pct > 100) {
      return Status::InvalidArgument("invalid memory bound \"" + std::string(s) + "\": a percentage is 0% to 100%");
    }
    return allowed / 100 * pct;
  }
  auto b = ParseByteSize(s);
  if (!b.ok()) return Status::InvalidArgument("invalid memory bound \"" + std::string(s) + "\": expected N% or a size such as 8GiB");
  return *b;
}

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
size_t MapBytes(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }
}  // namespace

void* AllocateLarge(size_t bytes) {
  if (bytes < kLargeBlock) return ::operator new(bytes);
  const size_t len = MapBytes(bytes);
  // Over-map by one huge page, then unmap the ends so the block is aligned.
  void* p = ::mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* raw = static_cast<char*>(p);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(raw);
  char* start = raw + (((addr + kHugePage - 1) & ~(kHugePage - 1)) - addr);
  if (start > raw) ::munmap(raw, static_cast<size_t>(start - raw));
  ::munmap(start + len, static_cast<size_t>(raw + kHugePage - start));  // never empty: start < raw + kHugePage
  ::madvise(start, len, MADV_HUGEPAGE);  // best effort: without THP, 4 KiB pages
  return start;
}

void FreeLarge(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kLargeBlock) {
    ::operator delete(p);
    return;
  }
  ::munmap(p, MapBytes(bytes));
}

void NoteQuery() { last_query_ns.store(MonoNanos(), std::memory_order_relaxed); }

int64_t SinceQueryNs() {
  const int64_t at = last_query_ns.load(std::memory_order_relaxed);
  return at == 0 ? std::numeric_limits<int64_t>::max() : MonoNanos() - at;
}

bool ShouldTrim(int64_t since_query_ns, int64_t quiet_ns, uint64_t free_bytes, uint64_t in_use_bytes) {
  return since_query_ns >= quiet_ns || free_bytes > std::max<uint64_t>(kTrimFloor, in_use_bytes / 4);
}

void HeapBytes(uint64_t* free_bytes, uint64_t* in_use_bytes) {
  const struct mallinfo2 mi = ::mallinfo2();
  *free_bytes = mi.fordblks;
  *in_use_bytes = mi.uordblks + mi.hblkhd;
}

}  // namespace trainwatch::memory
