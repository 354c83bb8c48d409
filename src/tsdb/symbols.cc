#include "tsdb/symbols.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "base/mutex.h"

namespace trainwatch::tsdb {

SymbolTable::SymbolTable() : pages_(new std::atomic<std::string_view*>[kMaxPages]) {
  for (uint32_t i = 0; i < kMaxPages; i++) pages_[i].store(nullptr, std::memory_order_relaxed);
}

SymbolTable::~SymbolTable() {
  for (uint32_t i = 0; i < kMaxPages; i++) delete[] pages_[i].load(std::memory_order_relaxed);
}

std::string_view SymbolTable::Store(std::string_view s) {
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
  return std::string_view(p, s.size());
}

void SymbolTable::SetSlot(uint32_t id, std::string_view s) {
  uint32_t page = id >> kPageBits;
  std::string_view* pg = pages_[page].load(std::memory_order_relaxed);
  if (pg == nullptr) {
    pg = new std::string_view[kPageSize];
    // Readers that obtain an id through a synchronizing operation also see
    // the page pointer and the slot (written before the id is published).
    pages_[page].store(pg, std::memory_order_release);
  }
  pg[id & (kPageSize - 1)] = s;
}

uint32_t SymbolTable::Intern(std::string_view s) {
  base::MutexLock lock(&mu_);
  auto it = ids_.find(s);
  if (it != ids_.end()) {
    refs_[it->second]++;
    return it->second;
  }
  std::string_view stored = Store(s);
  uint32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else {
    CHECK((count_ >> kPageBits) < kMaxPages, "BUG: symbol ids exhausted");
    id = count_++;
    refs_.push_back(0);
  }
  SetSlot(id, stored);
  refs_[id] = 1;
  ids_.emplace(stored, id);
  live_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void SymbolTable::Release(const uint32_t* ids, size_t n) {
  base::MutexLock lock(&mu_);
  for (size_t i = 0; i < n; i++) {
    const uint32_t id = ids[i];
    CHECK(id < count_ && refs_[id] > 0, "BUG: release of a symbol without references");
    if (--refs_[id] != 0) continue;
    const std::string_view s = Get(id);
    ids_.erase(s);
    dead_bytes_ += s.size();
    SetSlot(id, std::string_view());
    free_.push_back(id);
    live_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void SymbolTable::Compact() {
  base::MutexLock lock(&mu_);
  if (dead_bytes_ < (64u << 10) || dead_bytes_ * 2 < arena_bytes_) return;
  std::vector<std::unique_ptr<char[]>> old;
  old.swap(arena_);
  arena_left_ = 0;
  arena_pos_ = nullptr;
  arena_bytes_ = 0;
  dead_bytes_ = 0;
  ids_.clear();
  for (uint32_t id = 0; id < count_; id++) {
    if (refs_[id] == 0) continue;
    std::string_view s = Store(Get(id));
    SetSlot(id, s);
    ids_.emplace(s, id);
  }
  // `old` (and every view into it) goes here; no reader holds one.
}

size_t SymbolTable::MemoryBytes() const {
  base::MutexLock lock(&mu_);
  const size_t pages = (count_ + kPageSize - 1) / kPageSize;
  return pages * kPageSize * sizeof(std::string_view) + live_.load(std::memory_order_relaxed) * 48 +
         refs_.capacity() * sizeof(uint32_t) + free_.capacity() * sizeof(uint32_t) + arena_bytes_;
}

}  // namespace trainwatch::tsdb
