#include "ingest/import.h"

#include <algorithm>
#include <unordered_map>

#include "base/hash.h"
#include "ingest/clear_bounded.h"
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
  constexpr size_t kKeepEntries = 1u << 16;
  ClearBounded(&series_, kKeepEntries);
  ClearBounded(&samples_, 4 * kKeepEntries);
  refusals_.Clear();
}

Status ImportBatch::Parse(std::string_view body, const ImportOptions& opts) {
  Clear();
  extra_labels_ = opts.extra_labels;
  cache_ = opts.cache;
  uint64_t salt = 0;
  for (const model::Label& l : extra_labels_) salt = HashString(l.value, HashString(l.name, salt + 1));
  // Series text as written -> index in series_, for series not in the cache.
  // Lines repeating a series text (the common case in backfill) cost one
  // hash lookup and no allocation.
  std::unordered_map<std::string_view, uint32_t, ViewHash> by_text;
  samples_.reserve(body.size() / 96);
  series_.reserve(body.size() / 192);
  std::string_view last_text;
  uint32_t last_idx = 0;
  // The cache lookup for a line happens in known_series, before its labels
  // would be parsed: a hit skips them.
  std::string_view looked_up;
  SeriesCache::Key key;
  storage::SeriesRef cached = 0;
  auto lookup = [&](std::string_view text) {
    looked_up = text;
    key = SeriesCache::KeyOf(text, salt);
    cached = cache_->Get(key);
  };
  ParseOptions po{.default_timestamp_ms = opts.default_timestamp_ms};
  po.known_series = [&](std::string_view text) {
    if (!series_.empty() && text == last_text) return true;  // reuses the previous line's series
    if (cache_ == nullptr) return false;
    lookup(text);
    return cached != 0;
  };
  TextParser p(body, std::move(po));
  while (p.Next()) {
    const TextSample& s = p.sample();
    if (series_.empty() || s.series != last_text) {
      if (cache_ != nullptr && looked_up.data() != s.series.data()) lookup(s.series);
      if (cache_ != nullptr && cached != 0) {
        // A known series needs no labels unless its ref went stale.
        series_.push_back(Series{{}, cached, s.series, key});
        last_idx = static_cast<uint32_t>(series_.size() - 1);
      } else {
        auto [it, inserted] = by_text.try_emplace(s.series, static_cast<uint32_t>(series_.size()));
        if (inserted) {
          if (!opts.limits.SeriesOk(by_text.size())) {
            Clear();
            return opts.limits.TooManySeries();
          }
          series_.push_back(Series{BuildLabels(s, opts.extra_labels), 0, s.series, key});
        }
        last_idx = it->second;
      }
      last_text = s.series;
    }
    if (!opts.limits.SamplesOk(samples_.size() + 1)) {
      Clear();
      return opts.limits.TooManySamples();
    }
    samples_.push_back({last_idx, static_cast<uint32_t>(s.line), s.timestamp_ms, s.value});
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
    if (!ref.ok() && refusals_.Take(ref.error())) continue;
    if (!ref.ok()) return ref.error().Annotate("line " + std::to_string(e.line));
    s.ref = *ref;
    if (cache_ != nullptr && s.ref != 0) cache_->Put(s.key, s.ref);
  }
  return Status::OK();
}

Status AppendAndCommit(storage::Appendable& db, const std::function<Status(storage::Appender*)>& append) {
  std::unique_ptr<storage::Appender> app = db.NewAppender();
  Status s = append(app.get());
  if (!s.ok()) {
    app->Rollback();
    return s;
  }
  return app->Commit();  // durable per the WAL sync policy when it returns
}

Result<ImportStats> ImportText(std::string_view body, const ImportOptions& opts, storage::Appendable& db) {
  ImportBatch batch;
  RETURN_IF_ERROR(batch.Parse(body, opts));
  if (batch.stats().samples == 0) return batch.stats();
  RETURN_IF_ERROR(AppendAndCommit(db, [&](storage::Appender* app) { return batch.AppendTo(app); }));
  RETURN_IF_ERROR(batch.refusals().After(batch.stats().samples));
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
