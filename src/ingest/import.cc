#include "ingest/import.h"

#include <algorithm>
#include <unordered_map>

#include "base/hash.h"
#include "ingest/text_parser.h"

namespace trainwatch::ingest {
namespace {

struct ViewHash {
  size_t operator()(std::string_view s) const { return HashString(s); }
};

model::Labels BuildLabels(const TextSample& s, const std::vector<model::Label>& extra) {
  std::vector<model::Label> v;
  v.reserve(s.num_labels + 1 + extra.size());
  v.push_back({std::string(model::kMetricName), std::string(s.name)});
  for (size_t i = 0; i < s.num_labels; i++) {
    // Prometheus treats an empty label value as an absent label.
    if (!s.labels[i].value.empty()) v.push_back({std::string(s.labels[i].name), std::string(s.labels[i].value)});
  }
  for (const model::Label& e : extra) {
    std::erase_if(v, [&](const model::Label& l) { return l.name == e.name; });
    if (!e.value.empty()) v.push_back(e);
  }
  return model::Labels(std::move(v));
}

}  // namespace

void ImportBatch::Clear() {
  series_.clear();
  samples_.clear();
}

Status ImportBatch::Parse(std::string_view body, const ImportOptions& opts) {
  Clear();
  extra_labels_ = opts.extra_labels;
  cache_ = opts.cache;
  uint64_t salt = 0;
  for (const model::Label& l : extra_labels_) salt = HashString(l.value, HashString(l.name, salt + 1));
  // Series text as written -> index in series_. Lines repeating a series text
  // (the common case in backfill) cost one hash lookup and no allocation.
  std::unordered_map<std::string_view, uint32_t, ViewHash> by_text;
  samples_.reserve(body.size() / 64);
  series_.reserve(body.size() / 128);
  TextParser p(body, ParseOptions{.default_timestamp_ms = opts.default_timestamp_ms});
  std::string_view last_text;
  uint32_t last_idx = 0;
  while (p.Next()) {
    const TextSample& s = p.sample();
    uint32_t idx;
    if (!series_.empty() && s.series == last_text) {
      idx = last_idx;
    } else {
      // A cached series needs no labels (unless its ref went stale); only
      // unknown ones are deduplicated by text and get labels built.
      storage::SeriesRef ref = 0;
      SeriesCache::Key key;
      if (cache_ != nullptr) {
        key = SeriesCache::KeyOf(s.series, salt);
        ref = cache_->Get(key);
      }
      if (ref != 0) {
        series_.push_back(Series{{}, ref, s.series, key});
        last_text = s.series;
        last_idx = static_cast<uint32_t>(series_.size() - 1);
        samples_.push_back({last_idx, static_cast<uint32_t>(s.line), s.timestamp_ms, s.value});
        continue;
      }
      auto [it, inserted] = by_text.try_emplace(s.series, static_cast<uint32_t>(series_.size()));
      if (inserted) series_.push_back(Series{BuildLabels(s, opts.extra_labels), 0, s.series, key});
      idx = it->second;
      last_text = s.series;
      last_idx = idx;
    }
    samples_.push_back({idx, static_cast<uint32_t>(s.line), s.timestamp_ms, s.value});
  }
  if (!p.status().ok()) {
    Clear();
    return p.status();
  }
  return Status::OK();
}

Status ImportBatch::ResolveLabels(Series* s) {
  // Re-parse the series text alone; it parsed before, so this succeeds.
  std::string line(s->text);
  line += " 0\n";
  TextParser p(line, ParseOptions{});
  if (!p.Next()) return Status::InvalidArgument("series " + std::string(s->text) + ": " + p.status().message());
  s->labels = BuildLabels(p.sample(), extra_labels_);
  return Status::OK();
}

Status ImportBatch::AppendTo(storage::Appender* app) {
  for (const Entry& e : samples_) {
    Series& s = series_[e.series];
    if (s.ref != 0 && app->AppendByRef(s.ref, e.t, e.v)) continue;
    if (s.labels.empty()) RETURN_IF_ERROR(ResolveLabels(&s));
    auto ref = app->Append(0, s.labels, e.t, e.v);
    if (!ref.ok()) return ref.error().Annotate("line " + std::to_string(e.line));
    s.ref = *ref;
    if (cache_ != nullptr && s.ref != 0) cache_->Put(s.key, s.ref);
  }
  return Status::OK();
}

Result<ImportStats> ImportText(std::string_view body, const ImportOptions& opts, storage::Appendable& db) {
  ImportBatch batch;
  RETURN_IF_ERROR(batch.Parse(body, opts));
  if (batch.stats().samples == 0) return batch.stats();
  std::unique_ptr<storage::Appender> app = db.NewAppender();
  Status s = batch.AppendTo(app.get());
  if (!s.ok()) {
    app->Rollback();
    return s;
  }
  RETURN_IF_ERROR(app->Commit());
  return batch.stats();
}

Result<model::Label> ParseExtraLabel(std::string_view s) {
  size_t eq = s.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument("invalid extra_label \"" + std::string(s) + "\": expected name=value");
  }
  std::string_view name = s.substr(0, eq);
  if (!model::IsValidLabelName(name)) {
    return Status::InvalidArgument("invalid extra_label \"" + std::string(s) + "\": invalid label name");
  }
  return model::Label{std::string(name), std::string(s.substr(eq + 1))};
}

}  // namespace trainwatch::ingest
