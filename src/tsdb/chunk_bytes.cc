#include "tsdb/chunk_bytes.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#include "base/check.h"
#include "base/log.h"

namespace trainwatch::tsdb {
namespace {

constexpr size_t kPage = 4096;

// Data blocks mapped from files, process-wide: each is a map (two with the
// unwritten anonymous rest), and vm.max_map_count (65530 by default) bounds
// a process's maps. Spilling stops at a quarter of it.
std::atomic<uint32_t> mapped_blocks{0};
std::atomic<uint64_t> mapped_bytes{0}, failures{0};
std::atomic<uint64_t> next_file{0};

// The mapped part of every spilled data block alive, for DropMappedPages
// (a block leaves it before its unmap). Never destroyed: blocks may die in
// static destructors.
std::mutex& MappedMu() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}
std::unordered_map<char*, size_t>& Mapped() {
  static auto* m = new std::unordered_map<char*, size_t>;
  return *m;
}

size_t ReadMaxSpilledBlocks() {
  long limit = 65530;
  if (FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    if (std::fscanf(f, "%ld", &limit) != 1) limit = 65530;
    std::fclose(f);
  }
  return static_cast<size_t>(std::max(limit, 1024L) / 4);
}

bool WriteAll(int fd, const char* p, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t w = ::pwrite(fd, p + off, n - off, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

ChunkBytes ChunkBytes::Copy(std::string_view b) {
  CHECK(b.size() < kExternal, "BUG: chunk over 2 GiB");
  void* mem = std::malloc(sizeof(Rep) + b.size());
  CHECK(mem != nullptr, "out of memory");
  ChunkBytes out;
  out.p_ = new (mem) Rep{{1}, static_cast<uint32_t>(b.size()), 0};
  if (!b.empty()) std::memcpy(reinterpret_cast<char*>(out.p_ + 1), b.data(), b.size());
  return out;
}

const ChunkBytes::Slab* ChunkBytes::SlabOf() const {
  if (p_ == nullptr || p_->slab_offset == 0) return nullptr;
  return reinterpret_cast<const Slab*>(reinterpret_cast<const char*>(p_) - p_->slab_offset);
}

size_t ChunkBytes::MemoryBytes() const {
  if (p_ == nullptr) return 0;
  if (p_->slab_offset == 0) return ::malloc_usable_size(p_);
  if ((p_->size & kExternal) == 0) return sizeof(Rep) + p_->size;
  return sizeof(Rep) + sizeof(const char*) + (MappedBytes() == 0 ? (p_->size & ~kExternal) : 0);
}

size_t ChunkBytes::MappedBytes() const {
  if (p_ == nullptr || (p_->size & kExternal) == 0) return 0;
  const Slab* slab = SlabOf();
  const char* d = ExternalData();
  const size_t size = p_->size & ~kExternal;
  return d + size <= slab->data + slab->mapped.load(std::memory_order_acquire) ? size : 0;
}

void ChunkBytes::Release() noexcept {
  if (p_ != nullptr && p_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    const uint32_t slab_offset = p_->slab_offset;
    char* at = reinterpret_cast<char*>(p_);
    p_->~Rep();
    if (slab_offset == 0) {
      std::free(at);
    } else {
      ChunkSlabs::Drop(at - slab_offset);
    }
  }
  p_ = nullptr;
}

constexpr size_t ChunkSlabs::kHead = AlignRep(sizeof(ChunkBytes::Slab));

ChunkSlabs::ChunkSlabs(size_t max_block, SpillOptions spill)
    : max_block_(spill.dir.empty() ? max_block : std::min(max_block, spill.data_block / 8)),
      spill_(std::move(spill)),
      max_spilled_(spill_.dir.empty() ? 0 : MaxSpilledBlocks()) {}

size_t ChunkSlabs::MaxSpilledBlocks() {
  static const size_t max = ReadMaxSpilledBlocks();  // a sysctl: read once
  return max;
}

ChunkSlabs::~ChunkSlabs() {
  for (auto& [group, o] : open_) Drop(o.block);
}

void ChunkSlabs::Drop(char* block) noexcept {
  if (block == nullptr) return;
  auto* slab = reinterpret_cast<ChunkBytes::Slab*>(block);
  if (slab->live.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    if (slab->data != nullptr) {
      if (!slab->file.empty()) {
        // Out of the registry before the unmap: DropMappedPages must never
        // advise a range the kernel may have handed to another map.
        {
          std::lock_guard<std::mutex> lock(MappedMu());
          Mapped().erase(slab->data);
        }
        ::unlink(slab->file.c_str());
        mapped_blocks.fetch_sub(1, std::memory_order_relaxed);
        mapped_bytes.fetch_sub(slab->mapped.load(std::memory_order_relaxed), std::memory_order_relaxed);
      }
      ::munmap(slab->data, slab->data_bytes);
    }
    const uint32_t bytes = slab->bytes;
    slab->~Slab();
    memory::FreeLarge(block, bytes);
  }
}

void ChunkSlabs::Roll(Open& o, size_t need) {
  const size_t min_block = std::min(size_t{64} << 10, max_block_);
  size_t cap = o.block == nullptr ? min_block : std::min(o.cap * 2, max_block_);
  while (cap < kHead + need) cap *= 2;
  if (o.block != nullptr) {
    SpillData(o);
    Drop(o.block);
    o.block = nullptr;
  }
  o.block = static_cast<char*>(memory::AllocateLarge(cap));
  auto* slab = new (o.block) ChunkBytes::Slab{{1}, static_cast<uint32_t>(cap)};
  o.used = kHead;
  o.cap = cap;
  o.data_used = 0;
  if (!spill_.dir.empty()) {
    void* d = ::mmap(nullptr, spill_.data_block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (d == MAP_FAILED) {
      Drop(o.block);
      o.block = nullptr;
      throw std::bad_alloc();
    }
    // Small pages: a huge page would make the whole block resident at the
    // first write, and the file map splits it anyway.
    ::madvise(d, spill_.data_block, MADV_NOHUGEPAGE);
    slab->data = static_cast<char*>(d);
    slab->data_bytes = static_cast<uint32_t>(spill_.data_block);
  }
}

void ChunkSlabs::SpillData(Open& o) {
  auto* slab = reinterpret_cast<ChunkBytes::Slab*>(o.block);
  if (slab->data == nullptr || o.data_used < spill_.min_bytes) return;
  if (mapped_blocks.load(std::memory_order_relaxed) >= max_spilled_) return;
  const size_t len = (o.data_used + kPage - 1) & ~(kPage - 1);
  std::string path = spill_.dir + "/" + std::to_string(next_file.fetch_add(1, std::memory_order_relaxed));
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || !WriteAll(fd, slab->data, len)) {
    failures.fetch_add(1, std::memory_order_relaxed);
    if (spill_failures_++ == 0) {
      TW_LOG(Warn, "closed head chunks stay in memory: cannot write {}: {}", path, std::strerror(errno));
    }
    if (fd >= 0) {
      ::close(fd);
      ::unlink(path.c_str());
    }
    return;
  }
  // The file's bytes equal the block's, and nothing writes the block any
  // more: the map replaces its pages in one step (mmap_lock held for
  // writing; a concurrent read faults and waits), so a reader sees the same
  // bytes before and after. A failure here has unmapped nothing (the
  // kernel checks its limits first): the block stays as it was.
  void* m = ::mmap(slab->data, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (m == MAP_FAILED) {
    failures.fetch_add(1, std::memory_order_relaxed);
    if (spill_failures_++ == 0) {
      TW_LOG(Warn, "closed head chunks stay in memory: cannot map {}: {}", path, std::strerror(map_errno));
    }
    ::unlink(path.c_str());
    return;
  }
  CHECK(m == slab->data, "BUG: MAP_FIXED moved a data block");
  slab->file = std::move(path);
  slab->mapped.store(static_cast<uint32_t>(len), std::memory_order_release);
  mapped_blocks.fetch_add(1, std::memory_order_relaxed);
  mapped_bytes.fetch_add(len, std::memory_order_relaxed);
  spilled_blocks_++;
  std::lock_guard<std::mutex> lock(MappedMu());
  Mapped().emplace(slab->data, len);
}

size_t ChunkSlabs::DropMappedPages() {
  std::lock_guard<std::mutex> lock(MappedMu());
  size_t n = 0;
  for (const auto& [data, len] : Mapped()) {
    // The pages stay in the page cache (dirty ones too); a read maps them again.
    if (::madvise(data, len, MADV_DONTNEED) == 0) n += len;
  }
  return n;
}

uint64_t ChunkSlabs::MappedBytesNow() { return mapped_bytes.load(std::memory_order_relaxed); }
uint64_t ChunkSlabs::SpillFailuresTotal() { return failures.load(std::memory_order_relaxed); }

ChunkBytes ChunkSlabs::Copy(std::string_view b, int64_t group) {
  using Rep = ChunkBytes::Rep;
  const bool spill = !spill_.dir.empty();
  const size_t need = AlignRep(sizeof(Rep) + (spill ? sizeof(const char*) : b.size()));
  if (spill ? b.size() > spill_.data_block / 4 : kHead + need > max_block_ / 4) {
    return ChunkBytes::Copy(b);  // a chunk that large is rare: its own
  }
  Open& o = open_[group];
  if (o.block == nullptr || o.used + need > o.cap || (spill && o.data_used + b.size() > spill_.data_block)) {
    Roll(o, need);
  }
  auto* slab = reinterpret_cast<ChunkBytes::Slab*>(o.block);
  slab->live.fetch_add(1, std::memory_order_relaxed);
  ChunkBytes c;
  if (!spill) {
    c.p_ = new (o.block + o.used) Rep{{1}, static_cast<uint32_t>(b.size()), static_cast<uint32_t>(o.used)};
    if (!b.empty()) std::memcpy(reinterpret_cast<char*>(c.p_ + 1), b.data(), b.size());
  } else {
    char* d = slab->data + o.data_used;
    if (!b.empty()) std::memcpy(d, b.data(), b.size());
    o.data_used += b.size();
    c.p_ = new (o.block + o.used)
        Rep{{1}, static_cast<uint32_t>(b.size()) | ChunkBytes::kExternal, static_cast<uint32_t>(o.used)};
    std::memcpy(reinterpret_cast<char*>(c.p_ + 1), &d, sizeof d);
  }
  o.used += need;
  return c;
}

void ChunkSlabs::DropGroupsUpTo(int64_t group) {
  std::erase_if(open_, [group](const auto& g) {
    if (g.first > group) return false;
    Drop(g.second.block);
    return true;
  });
}

void ChunkSlabs::SpillAndDropAll() {
  for (auto& [group, o] : open_) {
    SpillData(o);
    Drop(o.block);
  }
  open_.clear();
}

size_t ChunkSlabs::Unused() const {
  size_t n = 0;
  for (const auto& [group, o] : open_) n += o.cap - o.used;
  return n;
}

}  // namespace trainwatch::tsdb
