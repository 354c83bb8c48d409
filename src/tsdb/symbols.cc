#include "tsdb/symbols.h"

#include <algorithm>
#include <cstring>

namespace trainwatch::tsdb {

SymbolTable::SymbolTable() : pages_(new std::atomic<std::string_view*>[kMaxPages]) {
  for (uint32_t i = 0; i < kMaxPages; i++) pages_[i].store(nullptr, std::memory_order_relaxed);
}

SymbolTable::~SymbolTable() {
  for (uint32_t i = 0; i < kMaxPages; i++) delete[] pages_[i].load(std::memory_order_relaxed);
}

uint32_t SymbolTable::Intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  if (arena_left_ < s.size()) {
    size_t n = std::max<size_t>(64 << 10, s.size());
    arena_.emplace_back(new char[n]);
    arena_pos_ = arena_.back().get();
    arena_left_ = n;
    arena_bytes_ += n;
  }
  char* p = arena_pos_;
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  arena_pos_ += s.size();
  arena_left_ -= s.size();
  std::string_view stored(p, s.size());
  uint32_t id = count_.load(std::memory_order_relaxed);
  uint32_t page = id >> kPageBits;
  std::string_view* pg = pages_[page].load(std::memory_order_relaxed);
  if (pg == nullptr) {
    pg = new std::string_view[kPageSize];
    pages_[page].store(pg, std::memory_order_release);
  }
  pg[id & (kPageSize - 1)] = stored;
  // Publish: readers that obtained `id` through a synchronizing operation
  // also see the page pointer (release on the page store / this count).
  count_.store(id + 1, std::memory_order_release);
  ids_.emplace(stored, id);
  return id;
}

size_t SymbolTable::MemoryBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = count_.load(std::memory_order_relaxed);
  return n * (sizeof(std::string_view) + 48) + arena_bytes_;
}

}  // namespace trainwatch::tsdb
