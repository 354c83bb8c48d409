#pragma once
// A series' identity: label pairs sorted by name, names unique, including
// __name__. Values are owned strings; the head interns them separately.

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace trainwatch::model {

inline constexpr std::string_view kMetricName = "__name__";

struct Label {
  std::string name;
  std::string value;
  bool operator==(const Label&) const = default;
  auto operator<=>(const Label&) const = default;
};

class Labels {
 public:
  Labels() = default;
  // Sorts by name; REQUIRES: names are unique.
  Labels(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs);
  explicit Labels(std::vector<Label> labels);  // sorts

  // Replaces the pairs with n pairs, pair_at(i) -> {name, value} (string
  // views), reusing this set's strings: no allocation when the previous set
  // held as many pairs at least as long. Sorts only when they come out of
  // order. REQUIRES: names are unique.
  template <typename PairAt>
  void Assign(size_t n, PairAt&& pair_at) {
    labels_.resize(n);
    bool sorted = true;
    for (size_t i = 0; i < n; ++i) {
      auto [name, value] = pair_at(i);
      labels_[i].name.assign(name);
      labels_[i].value.assign(value);
      if (i > 0 && !(labels_[i - 1].name < labels_[i].name)) sorted = false;
    }
    if (!sorted) Sort();
  }

  // Validates and sorts: empty names, duplicate names and empty values are
  // rejected (empty values are dropped, as Prometheus treats them as absent).
  static Result<Labels> FromUnsorted(std::vector<Label> labels);

  const std::vector<Label>& pairs() const { return labels_; }
  size_t size() const { return labels_.size(); }
  bool empty() const { return labels_.empty(); }
  auto begin() const { return labels_.begin(); }
  auto end() const { return labels_.end(); }

  // Value of `name`, or empty when absent.
  std::string_view Get(std::string_view name) const;
  bool Has(std::string_view name) const;
  std::string_view MetricName() const { return Get(kMetricName); }

  uint64_t Hash() const;
  // `name{a="b", c="d"}` with Prometheus escaping.
  std::string ToString() const;

  bool operator==(const Labels&) const = default;
  // Lexicographic over (name, value) pairs, as Prometheus sorts series.
  auto operator<=>(const Labels& o) const { return labels_ <=> o.labels_; }

 private:
  void Sort();
  std::vector<Label> labels_;
};

// Builder for adding, replacing and removing labels before producing a sorted set.
class LabelsBuilder {
 public:
  explicit LabelsBuilder(const Labels& base) : labels_(base.pairs()) {}
  LabelsBuilder() = default;
  void Set(std::string_view name, std::string_view value);  // empty value deletes
  void Del(std::string_view name);
  Labels Build() const;

 private:
  std::vector<Label> labels_;
};

// The compact encoding of a label set: uvarint n, then n x (uvarint len,
// name, uvarint len, value), in the set's order. The WAL's series records
// hold it; caches of many series keep it instead of a Labels (a fifth of the
// memory for typical series) and decode it when they need the set.
void AppendEncodedLabels(const Labels& labels, std::string* out);
// Decodes an AppendEncodedLabels encoding that fills all of `in`. False on
// malformed input (the order of names is not checked).
bool DecodeEncodedLabels(std::string_view in, Labels* out);

// Hash of a label set given as sorted (name, value) views; equal to Labels::Hash.
uint64_t HashLabelPairs(const std::pair<std::string_view, std::string_view>* pairs, size_t n);

// What a block's index can hold of one label set: at least one label, every
// name and value non-empty, names strictly ascending (so none repeats). The
// head checks new series with it and the block writer every series, so
// nothing reaches the head that a block cannot hold.
Status CheckSeriesLabels(const Labels& labels);
// `labels` without its empty-valued labels (Prometheus reads an empty value
// as the label's absence): what every writer's series is stored as.
Labels WithoutEmptyValues(const Labels& labels);

bool IsValidMetricName(std::string_view s);
bool IsValidLabelName(std::string_view s);

// Appends the set as a JSON object in label order: {"__name__":"up","job":"a"}.
void AppendLabelsJson(std::string* out, const Labels& labels);

}  // namespace trainwatch::model
