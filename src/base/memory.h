#pragma once
// Process and machine memory, read from /proc and the cgroup filesystem: what
// the ingest gate (http/ingest_gate.h) compares.

#include <cstdint>
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

}  // namespace trainwatch::memory
