#pragma once
// Interned strings for the head: every distinct label name and value is stored
// once and referred to by a 32-bit id. Each Intern takes a reference, each
// Release drops one; a string no series uses any more is dropped and its id
// reused, so a head whose series come and go (pods, runs) keeps only the
// strings of its live series.
// Thread-safety: Intern and Release take a mutex. Get is lock-free for an id
// the caller holds a reference to, published to it through a synchronizing
// operation. Compact moves the strings: REQUIRES no concurrent Get (the head
// calls it while readers and appenders are excluded).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"

namespace trainwatch::tsdb {

class SymbolTable {
 public:
  SymbolTable();
  ~SymbolTable();
  SymbolTable(const SymbolTable&) = delete;
  SymbolTable& operator=(const SymbolTable&) = delete;

  // The id of s, with one more reference to it.
  uint32_t Intern(std::string_view s);
  // Drops one reference to each id; a string left without any is dropped
  // and its id freed for reuse. REQUIRES: no Get of these ids follows
  // unless they are interned again.
  void Release(const uint32_t* ids, size_t n);
  // Copies the live strings into fresh blocks once dropped ones take more
  // than half of the blocks (and 64 KiB), freeing the old blocks.
  // REQUIRES: no concurrent Get.
  void Compact();
  std::string_view Get(uint32_t id) const {
    return pages_[id >> kPageBits].load(std::memory_order_acquire)[id & (kPageSize - 1)];
  }
  size_t size() const { return live_.load(std::memory_order_relaxed); }  // live strings
  size_t MemoryBytes() const;

 private:
  static constexpr uint32_t kPageBits = 14;
  static constexpr uint32_t kPageSize = 1u << kPageBits;
  static constexpr uint32_t kMaxPages = 1u << 18;  // 4 G symbols

  // Copies s into the current block (a new one when it does not fit).
  std::string_view Store(std::string_view s) TW_REQUIRES(mu_);
  void SetSlot(uint32_t id, std::string_view s) TW_REQUIRES(mu_);

  mutable base::Mutex mu_;
  std::unordered_map<std::string_view, uint32_t> ids_ TW_GUARDED_BY(mu_);  // keys point into arena_
  std::vector<uint32_t> refs_ TW_GUARDED_BY(mu_);  // by id, 0: free
  std::vector<uint32_t> free_ TW_GUARDED_BY(mu_);  // ids to reuse
  std::vector<std::unique_ptr<char[]>> arena_ TW_GUARDED_BY(mu_);
  size_t arena_left_ TW_GUARDED_BY(mu_) = 0;
  char* arena_pos_ TW_GUARDED_BY(mu_) = nullptr;
  size_t arena_bytes_ TW_GUARDED_BY(mu_) = 0;
  size_t dead_bytes_ TW_GUARDED_BY(mu_) = 0;  // of dropped strings in arena_
  std::unique_ptr<std::atomic<std::string_view*>[]> pages_;
  uint32_t count_ TW_GUARDED_BY(mu_) = 0;  // ids ever handed out (the slots in use)
  std::atomic<size_t> live_{0};
};

}  // namespace trainwatch::tsdb
