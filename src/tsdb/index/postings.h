#pragma once
// Postings: sorted, duplicate-free lists of series refs, and the set algebra
// over them. MemPostings is the head's in-memory inverted index;
// PostingsProvider abstracts "an inverted index" so that one resolver,
// PostingsForMatchers, serves both the head and persisted block indexes.
//
// Refs are uint64 everywhere (a block's series ids are dense 0..n-1 and fit
// in 32 bits, but are widened so head and block share one type).

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "model/labels.h"
#include "model/matcher.h"

namespace trainwatch::index {

using SeriesRef = uint64_t;
// Sorted ascending, no duplicates.
using Postings = std::vector<SeriesRef>;
using PostingsSpan = std::span<const SeriesRef>;

// ---- Set algebra. All inputs must be sorted ascending without duplicates;
// outputs are too. Empty inputs are fine.

// a ∩ b. Gallops (exponential search) through the longer list when the
// sizes differ by more than ~16x, else a linear merge.
Postings Intersect(PostingsSpan a, PostingsSpan b);
// ∩ of all lists (smallest first). Intersect({}) is empty.
Postings Intersect(std::span<const PostingsSpan> lists);
Postings Intersect(const std::vector<Postings>& lists);
// a ∪ b.
Postings Union(PostingsSpan a, PostingsSpan b);
// ∪ of all lists (pairwise tree merge, O(N log k)). Union({}) is empty.
Postings Union(std::span<const PostingsSpan> lists);
Postings Union(const std::vector<Postings>& lists);
// a \ b.
Postings Without(PostingsSpan a, PostingsSpan b);

// ---- Inverted index interface used by PostingsForMatchers.
class PostingsProvider {
 public:
  virtual ~PostingsProvider() = default;
  // Sorted distinct values of label `name`; empty when no series has it.
  virtual Result<std::vector<std::string>> LabelValues(std::string_view name) const = 0;
  // Series with label name=value; empty when none.
  virtual Result<index::Postings> Postings(std::string_view name, std::string_view value) const = 0;
  // Every series.
  virtual Result<index::Postings> AllPostings() const = 0;

  // The number of series with name=value (0 when none), where the index
  // knows it without the list. Default: Postings(name, value).size().
  virtual Result<uint64_t> PostingsCount(std::string_view name, std::string_view value) const;
  // Postings(name, value) ∩ `with` (sorted, unique). Default: the list, then
  // Intersect. Indexes override it to read of a long list only what a short
  // `with` can meet.
  virtual Result<index::Postings> PostingsIntersecting(std::string_view name, std::string_view value,
                                                       PostingsSpan with) const;

  // Union of the postings of `name`=v for every v in `values` (any order,
  // duplicates and absent values allowed). Default: one Postings() per value.
  virtual Result<index::Postings> PostingsForValues(std::string_view name,
                                                    std::span<const std::string> values) const;
  // Union of the postings of `name`=v for every value v with match(v).
  // Default: LabelValues + PostingsForValues. Implementations may override
  // to avoid materializing value strings.
  virtual Result<index::Postings> PostingsForLabelMatching(
      std::string_view name, const std::function<bool(std::string_view)>& match) const;
};

// Series matching all matchers, with Prometheus semantics
// (tsdb/querier.go PostingsForMatchers):
//  - a matcher that matches "" also selects series lacking the label:
//    {a=""} = series without a; {a!="x"} includes series without a;
//    {a=~"x|"} = series with a="x" or without a.
//  - {a!=""} / {a=~".+"} select series having a.
//  - when every matcher matches "", the result starts from AllPostings().
//  - an empty matcher list selects nothing.
// Literal alternations (Matcher::SetMatches) are looked up directly.
Result<Postings> PostingsForMatchers(const PostingsProvider& ix, const model::Matchers& ms);

// ---- In-memory inverted index for the head.
//
// Lists hold 32-bit refs (the head's refs are dense and below 2^32): half
// the memory of 64-bit lists, which are the bulk of the head's index.
//
// Thread-safety: none. All methods must be externally synchronized; the head
// guards it with a base::SharedMutex (shared for const methods, exclusive for
// Add/Delete). Const methods do not mutate, so concurrent readers are safe.
class MemPostings final : public PostingsProvider {
 public:
  MemPostings() = default;
  MemPostings(const MemPostings&) = delete;
  MemPostings& operator=(const MemPostings&) = delete;

  using List = std::vector<uint32_t>;
  using ListSpan = std::span<const uint32_t>;

  // Adds `ref` (REQUIRES: < 2^32) under every label of `labels` and to the
  // all-postings list.
  // Refs usually arrive increasing (O(1) append); an out-of-order ref is
  // inserted in place (O(list) worst case). Adding a ref twice is a no-op.
  void Add(SeriesRef ref, const model::Labels& labels);
  // Removes every ref in `deleted` (sorted, unique) from the lists of the
  // label pairs `affected` (those of the deleted series, each once) and from
  // the all-postings list; empty lists and names are dropped. Costs the
  // length of those lists, however many series go.
  using Pair = std::pair<std::string_view, std::string_view>;
  void Delete(std::span<const SeriesRef> deleted, std::span<const Pair> affected);

  // Series with name=value, or an empty span. Valid until the next mutation.
  ListSpan Get(std::string_view name, std::string_view value) const;
  ListSpan All() const { return all_; }
  // Sorted label names / values.
  std::vector<std::string> LabelNames() const;
  std::vector<std::string> SortedLabelValues(std::string_view name) const;
  size_t NumSeries() const { return all_.size(); }
  // Number of (name, value) pairs.
  size_t NumPairs() const;
  // Prometheus's head cardinality statistics (MemPostings.Stats): each list
  // the `limit` largest, by count then name. Lists emptied by Delete count
  // for nothing.
  struct Cardinality {
    using Top = std::vector<std::pair<std::string, uint64_t>>;
    Top series_by_metric_name;       // values of `metric_label`: their series
    Top label_value_count_by_name;   // label names: their distinct values
    Top memory_by_label_name;        // label names: bytes of values over their series
    Top series_by_label_pair;        // "name=value": its series
    uint64_t num_label_pairs = 0;
  };
  Cardinality Stats(std::string_view metric_label, size_t limit) const;
  // Bytes held by the lists (capacity), plus an estimate for map nodes.
  size_t MemoryBytes() const;

  // PostingsProvider (copies the lists).
  Result<std::vector<std::string>> LabelValues(std::string_view name) const override;
  Result<index::Postings> Postings(std::string_view name, std::string_view value) const override;
  Result<index::Postings> AllPostings() const override;
  Result<index::Postings> PostingsForLabelMatching(
      std::string_view name, const std::function<bool(std::string_view)>& match) const override;
  Result<uint64_t> PostingsCount(std::string_view name, std::string_view value) const override;
  // Gallops through the list: copies nothing of it.
  Result<index::Postings> PostingsIntersecting(std::string_view name, std::string_view value,
                                               PostingsSpan with) const override;

 private:
  struct StrHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using ValueMap = std::unordered_map<std::string, List, StrHash, std::equal_to<>>;
  std::unordered_map<std::string, ValueMap, StrHash, std::equal_to<>> m_;
  List all_;
};

// Inserts ref into a sorted list (append fast path); no-op when present.
void AddToPostings(Postings* list, SeriesRef ref);

}  // namespace trainwatch::index
