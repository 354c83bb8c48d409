#pragma once
// Process and machine memory, read from /proc and the cgroup filesystem: what
// the ingest gate (http/ingest_gate.h) compares.

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>

#include "base/status.h"

namespace trainwatch::memory {

// Anonymous resident bytes of this process (resident less shared pages of
// <proc>/self/statm: RssAnon, a read of a few microseconds): heap and
// stacks, what the OOM killer weighs. File pages (mmapped blocks) are not
// counted: the kernel drops them under pressure. 0 when unknown.
uint64_t ProcessAnonRss(const std::string& proc = "/proc");

// The memory this process may use: the smaller of MemTotal
// (<proc>/meminfo) and its cgroup's limit (v2 memory.max, v1
// memory.limit_in_bytes, under `cgroup_root`). 0 when unknown.
uint64_t Allowed(const std::string& proc = "/proc", const std::string& cgroup_root = "/sys/fs/cgroup");

// --ingest.max-memory: "N%" of `allowed` (0 when allowed is unknown), a
// byte size ("8GiB", ParseByteSize), or "0" for no bound.
Result<uint64_t> ParseMemoryBound(std::string_view s, uint64_t allowed);

// Blocks of kLargeBlock bytes or more as private anonymous maps aligned to
// 2 MiB that the kernel may back with huge pages (MADV_HUGEPAGE, which the
// default "madvise" THP mode needs): a buffer of hundreds of MiB written once
// (WAL replay's batches) then takes one page fault per 2 MiB, not per 4 KiB,
// and hands its memory back on free. Smaller blocks come from operator new.
// AllocateLarge throws std::bad_alloc when the map fails.
inline constexpr size_t kLargeBlock = size_t{4} << 20;
void* AllocateLarge(size_t bytes);
void FreeLarge(void* p, size_t bytes) noexcept;

// A std allocator over AllocateLarge for big, short-lived vectors.
template <class T>
struct LargeBlockAllocator {
  using value_type = T;
  LargeBlockAllocator() = default;
  template <class U>
  LargeBlockAllocator(const LargeBlockAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
    return static_cast<T*>(AllocateLarge(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { FreeLarge(p, n * sizeof(T)); }
  friend bool operator==(const LargeBlockAllocator&, const LargeBlockAllocator&) { return true; }
};

}  // namespace trainwatch::memory
