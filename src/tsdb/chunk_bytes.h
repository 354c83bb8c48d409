#pragma once
// Closed head chunks' bytes: ChunkBytes (immutable, reference-counted) and
// ChunkSlabs (copies them into shared blocks, and with a spill directory
// moves full blocks into files mapped back in place, as Prometheus maps its
// head chunks: docs/architecture.md, "Closed head chunks").

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/memory.h"

namespace trainwatch::tsdb {

// Immutable chunk bytes in one allocation with an intrusive, atomic
// reference count (a closed head chunk is shared by the head, queriers and
// the block writer). Replaces shared_ptr<const std::string>, which costs
// two extra allocations' worth of headers and 48 bytes of control block.
class ChunkBytes {
 public:
  ChunkBytes() = default;
  static ChunkBytes Copy(std::string_view b);
  ChunkBytes(const ChunkBytes& o) noexcept : p_(o.p_) {
    if (p_ != nullptr) p_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  ChunkBytes(ChunkBytes&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  ChunkBytes& operator=(ChunkBytes o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~ChunkBytes() { Release(); }

  std::string_view view() const {
    if (p_ == nullptr) return {};
    const uint32_t size = p_->size;
    if ((size & kExternal) == 0) return {reinterpret_cast<const char*>(p_ + 1), size};
    return {ExternalData(), size & ~kExternal};
  }
  // Heap bytes of the allocation (0 when empty), not counting bytes in a
  // block mapped from a file (MappedBytes).
  size_t MemoryBytes() const;
  // The bytes that lie in a block mapped from a file (page cache the kernel
  // may reclaim), else 0.
  size_t MappedBytes() const;
  // Identity (the same allocation), not byte equality.
  bool SameAs(const ChunkBytes& o) const { return p_ == o.p_; }

 private:
  // Rep::size's top bit: the bytes are not after the header but where the
  // pointer after it says (a data block of its Slab).
  static constexpr uint32_t kExternal = uint32_t{1} << 31;
  struct Rep {
    std::atomic<uint32_t> refs;
    uint32_t size;
    uint32_t slab_offset;  // bytes back to its Slab; 0: an allocation of its own
    // followed by `size` bytes, or with kExternal by a pointer to them
  };
  struct Slab {
    std::atomic<uint32_t> live;  // chunks not yet released, and its ChunkSlabs while it carves
    uint32_t bytes;              // of the block, for memory::FreeLarge
    // Spill mode: the data block its chunks' bytes are in (an anonymous
    // map of data_bytes), and how many bytes from its start are a map of
    // the file `file` instead (0: none yet).
    char* data = nullptr;
    uint32_t data_bytes = 0;
    std::atomic<uint32_t> mapped{0};
    std::string file;  // removed with the block
  };
  const char* ExternalData() const {
    const char* d;
    __builtin_memcpy(&d, p_ + 1, sizeof d);  // 4-aligned after the header
    return d;
  }
  const Slab* SlabOf() const;  // null for an allocation of its own
  void Release() noexcept;
  Rep* p_ = nullptr;

  friend class ChunkSlabs;
};

// Copies chunks' bytes into shared blocks (slabs), one run of blocks per
// group, each block freed when the last chunk in it is released: for chunks
// that die together, as the chunk log's of one block range do at a head
// cut. A restart loads hundreds of thousands of chunks; a malloc and fresh
// 4 KiB pages for each were a sixth of its time. Blocks grow from 64 KiB
// to `max_block` (4 MiB: huge-page maps, memory::AllocateLarge). The head
// copies the chunks it closes into its own (malloc's header and rounding
// were 16 of a closed chunk's ~200 bytes), with smaller blocks: a block's
// unwritten end is memory held for nothing until the block fills.
//
// With a spill directory, a chunk's header (count, size, a pointer) goes to
// the blocks and its bytes to a data block of `SpillOptions::data_block` bytes, an
// anonymous map. Once a data block is full, it is written to a file of its
// own in the directory and that file is mapped over it (MAP_FIXED: the same
// addresses and bytes, so readers holding pointers into it never notice):
// its pages leave the process's anonymous memory for the page cache, which
// the kernel writes back and may reclaim, and a read maps them again. The
// file is removed when the block's last chunk is released. A reader of
// many chunks drops the pages it mapped (DropMappedPages). Nothing in the
// directory is needed to recover: the chunk log holds every closed chunk.
struct SpillOptions {
  std::string dir;  // empty: no spilling
  size_t data_block = size_t{2} << 20;
  size_t min_bytes = size_t{256} << 10;  // a data block left with less stays in memory
};

class ChunkSlabs {
 public:
  explicit ChunkSlabs(size_t max_block = memory::kLargeBlock, SpillOptions spill = {});
  ~ChunkSlabs();
  ChunkSlabs(const ChunkSlabs&) = delete;
  ChunkSlabs& operator=(const ChunkSlabs&) = delete;
  ChunkBytes Copy(std::string_view b, int64_t group);
  // Stops carving the blocks of groups up to `group`: each is freed once
  // its chunks are (a later Copy to such a group starts a new block).
  void DropGroupsUpTo(int64_t group);
  // Stops carving every group, spilling the data blocks that hold enough
  // (for a loader whose chunks outlive it).
  void SpillAndDropAll();
  // Bytes of the blocks being carved not yet written: held, unused.
  size_t Unused() const;
  // Data blocks written to files so far, and files that could not be
  // written or mapped (their blocks stayed in memory).
  uint64_t SpilledBlocks() const { return spilled_blocks_; }
  uint64_t SpillFailures() const { return spill_failures_; }
  // Of every ChunkSlabs of the process: bytes mapped from files now, and
  // blocks that could not be spilled so far.
  static uint64_t MappedBytesNow();
  static uint64_t SpillFailuresTotal();
  // Unmaps the pages of every spilled block of the process from its memory
  // (they stay in the page cache; a read maps them again), for a reader of
  // many chunks, such as the chunk log's writer, that would otherwise leave
  // them all resident. Returns the bytes advised.
  static size_t DropMappedPages();

 private:
  struct Open {
    char* block = nullptr;  // its Slab first; this holds one of its `live`
    size_t used = 0, cap = 0;
    size_t data_used = 0;   // of the Slab's data block (spill mode)
  };
  static void Drop(char* block) noexcept;
  // A block holds its Slab, then chunks' headers (with their bytes unless
  // spilling), each at the header's alignment.
  static constexpr size_t AlignRep(size_t n) {
    return (n + alignof(ChunkBytes::Rep) - 1) & ~(alignof(ChunkBytes::Rep) - 1);
  }
  static const size_t kHead;  // AlignRep(sizeof(Slab))
  static size_t MaxSpilledBlocks();
  // Starts a new block for o (its data block too in spill mode), spilling
  // and dropping the one it carves.
  void Roll(Open& o, size_t need);
  void SpillData(Open& o);
  const size_t max_block_;
  const SpillOptions spill_;
  const size_t max_spilled_;  // blocks mapped at once, well under vm.max_map_count
  std::unordered_map<int64_t, Open> open_;
  uint64_t spilled_blocks_ = 0, spill_failures_ = 0;

  friend class ChunkBytes;
};

}  // namespace trainwatch::tsdb
