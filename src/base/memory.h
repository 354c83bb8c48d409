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

// When to hand freed heap memory back to the OS (`serve` asks every few
// seconds; app/wiring.cc). malloc_trim(0) returns every free page of every
// arena, and a query after it page-faults its buffers in again: a 90-day
// max_over_time over 400 series took 2.5-3.5 times as long, the sum of an
// avg_over_time 1.2 times (downsample_bench TW_DS_TRIM=1: a trim before
// each query).
// So while users query (NoteQuery within `quiet_ns`) free memory is kept
// unless it is more than kTrimFloor and a quarter of the heap in use
// (ingest's garbage); otherwise it goes at every tick that asks.
inline constexpr uint64_t kTrimFloor = uint64_t{64} << 20;
void NoteQuery();  // a user's query ran (the HTTP query API)
bool ShouldTrim(int64_t since_query_ns, int64_t quiet_ns, uint64_t free_bytes, uint64_t in_use_bytes);
// Nanoseconds since the last NoteQuery (INT64_MAX before the first).
int64_t SinceQueryNs();
// The heap's free and in-use bytes over every malloc arena (mallinfo2).
void HeapBytes(uint64_t* free_bytes, uint64_t* in_use_bytes);

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
