#include "scrape/nhcb_collector.h"

#include <algorithm>
#include <cmath>

#include "model/labels.h"

namespace trainwatch::scrape {
namespace {

enum class Suffix { kNone, kBucket, kSum, kCount, kCreated };

// Prometheus's convertnhcb.GetHistogramMetricBaseName, plus _created.
Suffix SplitSuffix(std::string_view name, std::string_view* base) {
  for (auto [suffix, kind] : {std::pair<std::string_view, Suffix>{"_bucket", Suffix::kBucket},
                              {"_sum", Suffix::kSum},
                              {"_count", Suffix::kCount},
                              {"_created", Suffix::kCreated}}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      *base = name.substr(0, name.size() - suffix.size());
      return kind;
    }
  }
  *base = name;
  return Suffix::kNone;
}

}  // namespace

void NhcbCollector::OnMetadata(const ingest::MetadataLine& m) {
  md_seq_++;
  if (m.kind != ingest::MetadataLine::Kind::kType) return;
  if (m.text == "histogram") {
    family_.assign(m.family);
  } else {
    family_.clear();
  }
}

bool NhcbCollector::NeedsLabels(std::string_view series) const {
  return !family_.empty() && series.starts_with(family_);
}

std::string_view NhcbCollector::NameOf(const ingest::TextSample& s) {
  if (!s.name.empty()) return s.name;
  for (size_t i = 0; i < s.num_labels; i++) {
    if (s.labels[i].name == model::kMetricName) return s.labels[i].value;
  }
  return {};
}

const std::string& NhcbCollector::KeyOf(const ingest::TextSample& s) {
  if (key_line_ == s.line && s.line != 0) return scratch_key_;
  sorted_.clear();
  for (size_t i = 0; i < s.num_labels; i++) {
    const ingest::LabelRef& l = s.labels[i];
    if (l.name == model::kMetricName || l.name == "le") continue;
    sorted_.emplace_back(l.name, l.value);
  }
  std::sort(sorted_.begin(), sorted_.end());
  scratch_key_.clear();
  for (const auto& [n, v] : sorted_) {
    // 0xff never occurs in UTF-8, so the join is unambiguous.
    scratch_key_.append(n);
    scratch_key_ += '\xff';
    scratch_key_.append(v);
    scratch_key_ += '\xff';
  }
  key_line_ = s.line;
  return scratch_key_;
}

bool NhcbCollector::Ends(const ingest::TextSample& s) {
  if (!active_) return false;
  if (md_seq_ != start_md_seq_ || family_.empty()) return true;
  std::string_view base;
  SplitSuffix(NameOf(s), &base);
  return base != base_ || KeyOf(s) != key_;
}

bool NhcbCollector::Add(const ingest::TextSample& s) {
  if (family_.empty()) return false;
  std::string_view base;
  const Suffix suffix = SplitSuffix(NameOf(s), &base);
  if (base != family_ || suffix == Suffix::kNone || suffix == Suffix::kCreated) return false;
  double le = 0;
  if (suffix == Suffix::kBucket) {
    bool found = false;
    for (size_t i = 0; i < s.num_labels && !found; i++) {
      if (s.labels[i].name != "le") continue;
      found = ingest::ParseGoFloat(s.labels[i].value, &le) && !std::isnan(le);
    }
    // As Prometheus: a bucket without a usable bound is an ordinary series.
    if (!found) return false;
  }
  if (!active_) {
    active_ = true;
    start_md_seq_ = md_seq_;
    base_.assign(base);
    key_ = KeyOf(s);
    labels_.clear();
    for (size_t i = 0; i < s.num_labels; i++) {
      const ingest::LabelRef& l = s.labels[i];
      if (l.name == model::kMetricName || l.name == "le") continue;
      labels_.emplace_back(std::string(l.name), std::string(l.value));
    }
    first_ = s;
    first_.labels = nullptr;
    first_.num_labels = 0;
    first_.series = {};
    first_.name = {};
    builder_.Reset();
  }
  // Errors are sticky in the builder and reported by Finish.
  switch (suffix) {
    case Suffix::kBucket: (void)builder_.SetBucketCount(le, s.value); break;
    case Suffix::kCount: (void)builder_.SetCount(s.value); break;
    case Suffix::kSum: (void)builder_.SetSum(s.value); break;
    default: break;
  }
  return true;
}

const NhcbCollector::Ready* NhcbCollector::Finish(std::string* why) {
  why->clear();
  if (!active_) return nullptr;
  active_ = false;
  auto h = builder_.Convert();
  // Prometheus's NHCBParser also drops one that fails Validate (a bucket
  // above the +Inf one's count leaves a negative bucket).
  Status st = h.ok() ? h->Validate() : h.error();
  if (!st.ok()) {
    *why = base_ + ": " + st.message();
    return nullptr;
  }
  ready_.histogram = std::move(*h);
  display_ = base_;
  refs_.clear();
  if (!labels_.empty()) {
    display_ += '{';
    for (const auto& [n, v] : labels_) {
      if (display_.back() != '{') display_ += ',';
      display_ += n + "=\"" + v + "\"";
      refs_.push_back({n, v});
    }
    display_ += '}';
  }
  // A leading 0x01 never starts a line's series text (nor a protobuf key).
  cache_key_.assign("\x01nhcb\xff");
  cache_key_ += base_;
  cache_key_ += '\xff';
  cache_key_ += key_;
  ready_.cache_key = cache_key_;
  ready_.sample = first_;
  ready_.sample.name = base_;
  ready_.sample.series = display_;
  ready_.sample.labels = refs_.data();
  ready_.sample.num_labels = refs_.size();
  ready_.sample.labels_skipped = false;
  return &ready_;
}

}  // namespace trainwatch::scrape
