#include "tsdb/index/postings.h"

#include <algorithm>

#include "base/check.h"

namespace trainwatch::index {

namespace {

// First index i in [lo, a.size()) with a[i] >= v, by exponential then binary search.
template <typename T>
size_t Gallop(std::span<const T> a, size_t lo, SeriesRef v) {
  size_t step = 1, hi = lo;
  while (hi < a.size() && a[hi] < v) {
    lo = hi + 1;
    hi += step;
    step <<= 1;
  }
  if (hi > a.size()) hi = a.size();
  return static_cast<size_t>(std::lower_bound(a.begin() + static_cast<std::ptrdiff_t>(lo),
                                              a.begin() + static_cast<std::ptrdiff_t>(hi), v) -
                             a.begin());
}

// a ∩ b, a the shorter; the lists may hold different widths (the head's are
// 32-bit). Gallops through b when it is more than 16 times longer.
template <typename A, typename B>
Postings IntersectSorted(std::span<const A> a, std::span<const B> b) {
  Postings out;
  if (a.empty() || b.empty()) return out;
  if (a.back() < b.front() || b.back() < a.front()) return out;
  out.reserve(a.size());
  if (b.size() / 16 > a.size()) {
    size_t j = 0;
    for (SeriesRef v : a) {
      j = Gallop(b, j, v);
      if (j == b.size()) break;
      if (b[j] == v) out.push_back(v);
    }
    return out;
  }
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    SeriesRef x = a[i], y = b[j];
    if (x == y) {
      out.push_back(x);
      ++i;
      ++j;
    } else {
      i += x < y;
      j += y < x;
    }
  }
  return out;
}

}  // namespace

Postings Intersect(PostingsSpan a, PostingsSpan b) {
  if (a.size() > b.size()) std::swap(a, b);
  return IntersectSorted(a, b);
}

Postings Intersect(std::span<const PostingsSpan> lists) {
  if (lists.empty()) return {};
  std::vector<PostingsSpan> order(lists.begin(), lists.end());
  std::sort(order.begin(), order.end(),
            [](PostingsSpan x, PostingsSpan y) { return x.size() < y.size(); });
  if (order.size() == 1) return Postings(order[0].begin(), order[0].end());
  Postings acc = Intersect(order[0], order[1]);
  for (size_t k = 2; k < order.size() && !acc.empty(); ++k) acc = Intersect(acc, order[k]);
  return acc;
}

Postings Intersect(const std::vector<Postings>& lists) {
  std::vector<PostingsSpan> spans(lists.begin(), lists.end());
  return Intersect(std::span<const PostingsSpan>(spans));
}

Postings Union(PostingsSpan a, PostingsSpan b) {
  Postings out;
  out.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    SeriesRef x = a[i], y = b[j];
    if (x < y) {
      out.push_back(x);
      ++i;
    } else if (y < x) {
      out.push_back(y);
      ++j;
    } else {
      out.push_back(x);
      ++i;
      ++j;
    }
  }
  out.insert(out.end(), a.begin() + static_cast<ptrdiff_t>(i), a.end());
  out.insert(out.end(), b.begin() + static_cast<ptrdiff_t>(j), b.end());
  return out;
}

Postings Union(std::span<const PostingsSpan> lists) {
  std::vector<Postings> level;
  level.reserve(lists.size() / 2 + 1);
  size_t k = 0;
  for (; k + 1 < lists.size(); k += 2) level.push_back(Union(lists[k], lists[k + 1]));
  if (k < lists.size()) level.emplace_back(lists[k].begin(), lists[k].end());
  while (level.size() > 1) {
    std::vector<Postings> next;
    next.reserve(level.size() / 2 + 1);
    size_t i = 0;
    for (; i + 1 < level.size(); i += 2) next.push_back(Union(level[i], level[i + 1]));
    if (i < level.size()) next.push_back(std::move(level[i]));
    level = std::move(next);
  }
  if (level.empty()) return {};
  return std::move(level[0]);
}

Postings Union(const std::vector<Postings>& lists) {
  std::vector<PostingsSpan> spans(lists.begin(), lists.end());
  return Union(std::span<const PostingsSpan>(spans));
}

Postings Without(PostingsSpan a, PostingsSpan b) {
  Postings out;
  if (b.empty() || a.empty() || a.back() < b.front() || b.back() < a.front()) {
    return Postings(a.begin(), a.end());
  }
  out.reserve(a.size());
  size_t j = 0;
  const bool gallop = b.size() / 16 > a.size();
  for (SeriesRef v : a) {
    if (gallop) {
      j = Gallop(b, j, v);
    } else {
      while (j < b.size() && b[j] < v) ++j;
    }
    if (j == b.size() || b[j] != v) out.push_back(v);
  }
  return out;
}

namespace {

template <typename L, typename V>
void AddSorted(L* list, V ref) {
  if (list->empty() || list->back() < ref) {
    list->push_back(ref);
    return;
  }
  auto it = std::lower_bound(list->begin(), list->end(), ref);
  if (it != list->end() && *it == ref) return;
  list->insert(it, ref);
}

Postings Widen(std::span<const uint32_t> l) { return Postings(l.begin(), l.end()); }

}  // namespace

void AddToPostings(Postings* list, SeriesRef ref) { AddSorted(list, ref); }

// ---- PostingsProvider defaults.

Result<index::Postings> PostingsProvider::PostingsForValues(std::string_view name,
                                                     std::span<const std::string> values) const {
  std::vector<index::Postings> lists;
  lists.reserve(values.size());
  for (const std::string& v : values) {
    ASSIGN_OR_RETURN(index::Postings p, this->Postings(name, v));
    if (!p.empty()) lists.push_back(std::move(p));
  }
  return Union(lists);
}

Result<index::Postings> PostingsProvider::PostingsForLabelMatching(
    std::string_view name, const std::function<bool(std::string_view)>& match) const {
  ASSIGN_OR_RETURN(std::vector<std::string> values, LabelValues(name));
  std::vector<std::string> sel;
  for (std::string& v : values) {
    if (match(v)) sel.push_back(std::move(v));
  }
  return PostingsForValues(name, sel);
}

Result<uint64_t> PostingsProvider::PostingsCount(std::string_view name, std::string_view value) const {
  ASSIGN_OR_RETURN(index::Postings p, this->Postings(name, value));
  return static_cast<uint64_t>(p.size());
}

Result<index::Postings> PostingsProvider::PostingsIntersecting(std::string_view name, std::string_view value,
                                                               PostingsSpan with) const {
  if (with.empty()) return index::Postings();
  ASSIGN_OR_RETURN(index::Postings p, this->Postings(name, value));
  return Intersect(p, with);
}

// ---- PostingsForMatchers.

namespace {

// Union of postings over the values v of m.name() for which m.Matches(v) == want.
Result<Postings> PostingsWhere(const PostingsProvider& ix, const model::Matcher& m, bool want) {
  // Fast paths: values that are literal sets.
  const bool positive_set = (m.type() == model::MatchType::kEqual && want) ||
                            (m.type() == model::MatchType::kNotEqual && !want);
  if (positive_set) return ix.Postings(m.name(), m.value());
  const bool regex_set = (m.type() == model::MatchType::kRegex && want) ||
                         (m.type() == model::MatchType::kNotRegex && !want);
  if (regex_set && !m.SetMatches().empty()) return ix.PostingsForValues(m.name(), m.SetMatches());
  return ix.PostingsForLabelMatching(
      m.name(), [&m, want](std::string_view v) { return m.Matches(v) == want; });
}

}  // namespace

Result<Postings> PostingsForMatchers(const PostingsProvider& ix, const model::Matchers& ms) {
  if (ms.empty()) return Postings();
  std::vector<Postings> its, not_its;
  bool has_intersecting = false;
  for (const model::Matcher& m : ms) {
    if (!m.MatchesEmpty()) has_intersecting = true;
  }
  if (!has_intersecting) {
    ASSIGN_OR_RETURN(Postings all, ix.AllPostings());
    its.push_back(std::move(all));
  }
  // Equality matchers wait: the shortest list of all is read whole, and a
  // long equality list is then asked only about the ids still in the running
  // (an index with skips reads a fraction of it: a metric name's list of
  // 100 k ids against one host's few hundred).
  struct Eq {
    const model::Matcher* m;
    uint64_t count;
  };
  std::vector<Eq> eqs;
  for (const model::Matcher& m : ms) {
    if (m.type() == model::MatchType::kRegex && m.value() == ".*") continue;  // matches all
    if (m.type() == model::MatchType::kEqual && !m.MatchesEmpty()) {
      ASSIGN_OR_RETURN(uint64_t count, ix.PostingsCount(m.name(), m.value()));
      if (count == 0) return Postings();
      eqs.push_back({&m, count});
      continue;
    }
    if (m.MatchesEmpty()) {
      // Selects series lacking the label too: subtract the series whose value
      // does not match. {a!="x"} subtracts a="x"; {a=""} subtracts all of a.
      ASSIGN_OR_RETURN(Postings p, PostingsWhere(ix, m, /*want=*/false));
      if (!p.empty()) not_its.push_back(std::move(p));
    } else {
      ASSIGN_OR_RETURN(Postings p, PostingsWhere(ix, m, /*want=*/true));
      if (p.empty()) return Postings();
      its.push_back(std::move(p));
    }
  }
  std::sort(eqs.begin(), eqs.end(), [](const Eq& a, const Eq& b) { return a.count < b.count; });
  size_t next_eq = 0;
  if (!eqs.empty()) {
    size_t shortest = SIZE_MAX;
    for (const Postings& p : its) shortest = std::min(shortest, p.size());
    if (eqs[0].count < shortest) {
      ASSIGN_OR_RETURN(Postings p, ix.Postings(eqs[0].m->name(), eqs[0].m->value()));
      its.push_back(std::move(p));
      next_eq = 1;
    }
  }
  Postings res = Intersect(its);
  for (size_t i = next_eq; i < eqs.size() && !res.empty(); i++) {
    ASSIGN_OR_RETURN(res, ix.PostingsIntersecting(eqs[i].m->name(), eqs[i].m->value(), res));
  }
  if (res.empty() || not_its.empty()) return res;
  Postings sub = not_its.size() == 1 ? std::move(not_its[0]) : Union(not_its);
  return Without(res, sub);
}

// ---- MemPostings.

namespace {

// The head's lists grow by a quarter, not twofold: they hold one ref a
// series for each of its labels, and doubling left them 30 % unused on
// average (about 18 bytes a series of 8 labels). Six refs fit malloc's
// smallest chunk.
void AddToList(MemPostings::List* list, uint32_t ref) {
  if (list->size() == list->capacity()) list->reserve(list->size() < 6 ? 6 : list->size() + list->size() / 4);
  AddSorted(list, ref);
}

}  // namespace

void MemPostings::Add(SeriesRef ref, const model::Labels& labels) {
  CHECK(ref <= UINT32_MAX, "BUG: head series ref over 32 bits");
  const auto r = static_cast<uint32_t>(ref);
  for (const model::Label& l : labels) {
    auto nit = m_.find(std::string_view(l.name));
    if (nit == m_.end()) nit = m_.emplace(l.name, ValueMap()).first;
    auto vit = nit->second.find(std::string_view(l.value));
    if (vit == nit->second.end()) vit = nit->second.emplace(l.value, List()).first;
    AddToList(&vit->second, r);
  }
  AddToList(&all_, r);
}

void MemPostings::Delete(std::span<const SeriesRef> deleted, std::span<const Pair> affected) {
  if (deleted.empty()) return;
  // A bitmap of the deleted refs: one test per list entry, however many go.
  std::vector<uint64_t> gone(deleted.back() / 64 + 1, 0);
  for (SeriesRef r : deleted) gone[r / 64] |= uint64_t{1} << (r % 64);
  auto drop = [&gone](List* p) {
    std::erase_if(*p, [&gone](uint32_t r) { return r / 64 < gone.size() && (gone[r / 64] >> (r % 64) & 1) != 0; });
  };
  // Each list once: the series going together share most of their label
  // pairs (a name, a job), whose lists are long. Dropping them once per
  // series cost the number of series times those lists' length, which made
  // a head cut after churn quadratic.
  for (const auto& [name, value] : affected) {
    auto nit = m_.find(name);
    if (nit == m_.end()) continue;
    auto vit = nit->second.find(value);
    if (vit == nit->second.end()) continue;
    drop(&vit->second);
    if (vit->second.empty()) nit->second.erase(vit);
    if (nit->second.empty()) m_.erase(nit);
  }
  drop(&all_);
}

MemPostings::ListSpan MemPostings::Get(std::string_view name, std::string_view value) const {
  auto nit = m_.find(name);
  if (nit == m_.end()) return {};
  auto vit = nit->second.find(value);
  if (vit == nit->second.end()) return {};
  return vit->second;
}

std::vector<std::string> MemPostings::LabelNames() const {
  std::vector<std::string> out;
  out.reserve(m_.size());
  for (const auto& [n, _] : m_) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> MemPostings::SortedLabelValues(std::string_view name) const {
  std::vector<std::string> out;
  auto nit = m_.find(name);
  if (nit == m_.end()) return out;
  out.reserve(nit->second.size());
  for (const auto& [v, _] : nit->second) out.push_back(v);
  std::sort(out.begin(), out.end());
  return out;
}

size_t MemPostings::NumPairs() const {
  size_t n = 0;
  for (const auto& [_, vm] : m_) n += vm.size();
  return n;
}

namespace {

// The `limit` largest (count, then name) of a stream of candidates, the
// name built only for those that get in.
class TopK {
 public:
  explicit TopK(size_t limit) : limit_(limit) {}
  template <typename MakeName>
  void Offer(uint64_t count, std::string_view key, MakeName&& make) {
    if (limit_ == 0) return;
    if (heap_.size() == limit_ && !Better(count, key, heap_.front())) return;
    std::string name = make();
    if (heap_.size() == limit_) {
      std::pop_heap(heap_.begin(), heap_.end(), Cmp);
      heap_.back() = {std::move(name), count};
    } else {
      heap_.emplace_back(std::move(name), count);
    }
    std::push_heap(heap_.begin(), heap_.end(), Cmp);
  }
  MemPostings::Cardinality::Top Take() {
    std::sort(heap_.begin(), heap_.end(), Cmp);
    return std::move(heap_);
  }

 private:
  using Entry = std::pair<std::string, uint64_t>;
  // Heap order: the worst entry (smallest count, then largest name) on top.
  static bool Cmp(const Entry& a, const Entry& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; }
  static bool Better(uint64_t count, std::string_view key, const Entry& worst) {
    return count != worst.second ? count > worst.second : key < worst.first;
  }
  size_t limit_;
  std::vector<Entry> heap_;
};

}  // namespace

MemPostings::Cardinality MemPostings::Stats(std::string_view metric_label, size_t limit) const {
  Cardinality c;
  TopK metrics(limit), values(limit), memory(limit), pairs(limit);
  std::string pair;
  // Plain references, not structured bindings: clang 14 cannot capture those.
  for (const auto& name_values : m_) {
    const std::string& name = name_values.first;
    uint64_t n_values = 0, bytes = 0;
    for (const auto& value_list : name_values.second) {
      const std::string& value = value_list.first;
      const List& list = value_list.second;
      if (list.empty()) continue;
      n_values++;
      bytes += value.size() * list.size();
      if (name == metric_label) metrics.Offer(list.size(), value, [&] { return value; });
      pair.assign(name).append("=").append(value);
      pairs.Offer(list.size(), pair, [&] { return pair; });
    }
    if (n_values == 0) continue;
    c.num_label_pairs += n_values;
    values.Offer(n_values, name, [&] { return name; });
    memory.Offer(bytes, name, [&] { return name; });
  }
  c.series_by_metric_name = metrics.Take();
  c.label_value_count_by_name = values.Take();
  c.memory_by_label_name = memory.Take();
  c.series_by_label_pair = pairs.Take();
  return c;
}

size_t MemPostings::MemoryBytes() const {
  // A map node: next pointer, key string (+ heap beyond 15 bytes), list.
  auto str = [](const std::string& x) { return x.size() > 15 ? x.capacity() + 1 : 0; };
  size_t n = all_.capacity() * sizeof(uint32_t);
  for (const auto& [name, vm] : m_) {
    n += 8 + sizeof(std::string) + sizeof(ValueMap) + str(name) + vm.bucket_count() * sizeof(void*);
    for (const auto& [v, list] : vm) n += 8 + sizeof(std::string) + sizeof(List) + str(v) + list.capacity() * sizeof(uint32_t);
  }
  return n;
}

Result<std::vector<std::string>> MemPostings::LabelValues(std::string_view name) const {
  return SortedLabelValues(name);
}

Result<index::Postings> MemPostings::Postings(std::string_view name, std::string_view value) const {
  return Widen(Get(name, value));
}

Result<index::Postings> MemPostings::AllPostings() const { return Widen(all_); }

Result<uint64_t> MemPostings::PostingsCount(std::string_view name, std::string_view value) const {
  return static_cast<uint64_t>(Get(name, value).size());
}

Result<index::Postings> MemPostings::PostingsIntersecting(std::string_view name, std::string_view value,
                                                          PostingsSpan with) const {
  const ListSpan list = Get(name, value);
  return with.size() <= list.size() ? IntersectSorted(with, list) : IntersectSorted(list, with);
}

Result<index::Postings> MemPostings::PostingsForLabelMatching(
    std::string_view name, const std::function<bool(std::string_view)>& match) const {
  auto nit = m_.find(name);
  if (nit == m_.end()) return index::Postings();
  std::vector<index::Postings> sel;
  for (const auto& [v, p] : nit->second) {
    if (match(v)) sel.push_back(Widen(p));
  }
  return Union(sel);
}

}  // namespace trainwatch::index
