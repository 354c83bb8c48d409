#pragma once
// Interned strings for the head: every distinct label name and value is stored
// once and referred to by a 32-bit id. Ids are never reused.
// Thread-safe: Intern takes a mutex; Get is lock-free for any id returned by
// Intern that was published to the reader through a synchronizing operation.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace trainwatch::tsdb {

class SymbolTable {
 public:
  SymbolTable();
  ~SymbolTable();
  SymbolTable(const SymbolTable&) = delete;
  SymbolTable& operator=(const SymbolTable&) = delete;

  uint32_t Intern(std::string_view s);
  std::string_view Get(uint32_t id) const {
    return pages_[id >> kPageBits].load(std::memory_order_acquire)[id & (kPageSize - 1)];
  }
  size_t size() const { return count_.load(std::memory_order_relaxed); }
  size_t MemoryBytes() const;

 private:
  static constexpr uint32_t kPageBits = 14;
  static constexpr uint32_t kPageSize = 1u << kPageBits;
  static constexpr uint32_t kMaxPages = 1u << 18;  // 4 G symbols

  mutable std::mutex mu_;
  std::unordered_map<std::string_view, uint32_t> ids_;  // GUARDED_BY(mu_); keys point into arena_
  std::vector<std::unique_ptr<char[]>> arena_;          // GUARDED_BY(mu_)
  size_t arena_left_ = 0;                               // GUARDED_BY(mu_)
  char* arena_pos_ = nullptr;                           // GUARDED_BY(mu_)
  size_t arena_bytes_ = 0;                              // GUARDED_BY(mu_)
  std::unique_ptr<std::atomic<std::string_view*>[]> pages_;
  std::atomic<uint32_t> count_{0};
};

}  // namespace trainwatch::tsdb
