// RunStore::ReadMetrics: a run's logged series from the TSDB, joined with
// trainwatch_run_step on timestamp for x=step, smoothed, then bucketed.

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "runs/downsample.h"
#include "runs/metric_name.h"
#include "runs/store.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {
namespace {

// A series' labels other than __name__, project and run, as a JSON object.
Json ExtraLabels(const model::Labels& ls) {
  Json j = Json::object();
  for (const model::Label& l : ls) {
    if (l.name == model::kMetricName || l.name == "project" || l.name == "run") continue;
    j[l.name] = l.value;
  }
  return j;
}

model::Labels WithoutName(const model::Labels& ls) {
  model::LabelsBuilder b(ls);
  b.Del(model::kMetricName);
  return b.Build();
}

Result<model::Matchers> RunMatchers(const Run& r, std::string_view name) {
  model::Matchers m;
  for (auto [n, v] : {std::pair<std::string_view, std::string_view>{model::kMetricName, name},
                      {"project", r.project}, {"run", r.name}}) {
    ASSIGN_OR_RETURN(model::Matcher x, model::Matcher::Make(model::MatchType::kEqual, std::string(n), std::string(v)));
    m.push_back(std::move(x));
  }
  return m;
}

Status ReadSamples(const storage::Series& s, std::vector<model::Sample>* out) {
  auto it = s.Iterator();
  while (it->Next()) out->push_back(it->At());
  return it->Err();
}

// Appends the samples with mint <= t <= maxt, seeking past the chunks before
// mint and stopping at maxt, so a zoomed read decodes only its time range.
Status ReadSamples(const storage::Series& s, int64_t mint, int64_t maxt, std::vector<model::Sample>* out) {
  auto it = s.Iterator();
  for (bool ok = it->Seek(mint); ok; ok = it->Next()) {
    model::Sample smp = it->At();
    if (smp.t > maxt) break;
    out->push_back(smp);
  }
  return it->Err();
}

// The time range of the steps in [start, end], or nullopt when no step is:
// x=step reads of a zoomed range read only the values logged at those times.
// A step logged twice (a resume) widens the range to both logs.
std::optional<std::pair<int64_t, int64_t>> StepTimeRange(const std::vector<model::Sample>& steps,
                                                         std::optional<int64_t> start, std::optional<int64_t> end) {
  int64_t lo = model::kMaxTime, hi = model::kMinTime;
  for (const model::Sample& s : steps) {
    if ((start && s.v < static_cast<double>(*start)) || (end && s.v > static_cast<double>(*end))) continue;
    lo = std::min(lo, s.t);
    hi = std::max(hi, s.t);
  }
  if (lo > hi) return std::nullopt;
  return std::pair{lo, hi};
}

Json BucketsJson(const std::vector<Bucket>& buckets, bool by_step, bool ema) {
  Json a = Json::array();
  for (const Bucket& b : buckets) {
    Json p = Json::object();
    if (by_step) p["x"] = b.x;
    else p["x"] = static_cast<double>(b.x) / 1000.0;
    p["min"] = NumberJson(b.min);
    p["max"] = NumberJson(b.max);
    p["last"] = NumberJson(b.last);
    if (ema) p["ema"] = NumberJson(b.ema);
    p["count"] = b.count;
    if (b.nan > 0) p["nan"] = b.nan;
    a.push_back(std::move(p));
  }
  return a;
}

}  // namespace

Result<Json> RunStore::ReadMetrics(const MetricsQuery& q) const {
  std::vector<Run> runs;
  for (const std::string& id : q.ids) {
    ASSIGN_OR_RETURN(Run r, Get(id));
    runs.push_back(std::move(r));
  }
  const bool smooth = q.smoothing > 0;
  int64_t mint = model::kMinTime, maxt = model::kMaxTime;
  if (!q.by_step) {
    if (q.start) mint = *q.start;
    if (q.end) maxt = *q.end;
  }
  ASSIGN_OR_RETURN(auto querier, queryable_->NewQuerier(mint, maxt));
  storage::SelectHints hints{mint, maxt};
  Json out = Json::array();
  // Reused across series: a run's series have about the same length.
  std::vector<model::Sample> samples;
  std::vector<XY> pts;
  for (const Run& r : runs) {
    std::vector<std::string> metrics;
    if (q.keys.empty()) {
      model::Matchers m;
      for (auto [n, v] : {std::pair<std::string, std::string>{"project", r.project}, {"run", r.name}}) {
        ASSIGN_OR_RETURN(model::Matcher x, model::Matcher::Make(model::MatchType::kEqual, n, v));
        m.push_back(std::move(x));
      }
      ASSIGN_OR_RETURN(auto names, querier->LabelValues(model::kMetricName, m));
      for (std::string& n : names) {
        if (!IsRunSeriesName(n)) metrics.push_back(std::move(n));
      }
    } else {
      for (const std::string& k : q.keys) {
        auto m = KeyToMetricName(k);
        if (!m.ok()) return Status::InvalidArgument("keys: \"" + k + "\": " + m.error().message());
        metrics.push_back(*m);
      }
    }
    // The step of every timestamp, per label set (ranks log separately).
    std::map<model::Labels, std::vector<model::Sample>> steps;
    if (q.by_step) {
      ASSIGN_OR_RETURN(auto m, RunMatchers(r, kStepSeries));
      auto set = querier->Select(false, hints, m);
      while (set->Next()) RETURN_IF_ERROR(ReadSamples(set->At(), &steps[WithoutName(set->At().labels())]));
      RETURN_IF_ERROR(set->Err());
    }
    for (const std::string& metric : metrics) {
      ASSIGN_OR_RETURN(auto m, RunMatchers(r, metric));
      auto set = querier->Select(true, hints, m);
      while (set->Next()) {
        const storage::Series& series = set->At();
        samples.clear();
        pts.clear();
        if (q.by_step) {
          auto st = steps.find(WithoutName(series.labels()));
          if (st == steps.end()) continue;  // not a logged series (no steps beside it)
          const std::vector<model::Sample>& ss = st->second;
          if (q.start || q.end) {
            auto tr = StepTimeRange(ss, q.start, q.end);
            if (tr) RETURN_IF_ERROR(ReadSamples(series, tr->first, tr->second, &samples));
          } else {
            RETURN_IF_ERROR(ReadSamples(series, &samples));
          }
          pts.reserve(samples.size());
          size_t j = 0;
          for (const model::Sample& s : samples) {
            while (j < ss.size() && ss[j].t < s.t) j++;
            if (j < ss.size() && ss[j].t == s.t) pts.push_back({static_cast<int64_t>(ss[j].v), s.v});
          }
          // A run resumed from a checkpoint logs some steps again: order by
          // step, the later log of a step last. Most series are in order.
          auto by_x = [](const XY& a, const XY& b) { return a.x < b.x; };
          if (!std::is_sorted(pts.begin(), pts.end(), by_x)) std::stable_sort(pts.begin(), pts.end(), by_x);
        } else {
          RETURN_IF_ERROR(ReadSamples(series, &samples));
          pts.reserve(samples.size());
          for (const model::Sample& s : samples) pts.push_back({s.t, s.v});
        }
        if (q.by_step && (q.start || q.end)) {
          // Sorted by step: the range is one slice (the time range read
          // above can hold steps outside it after a resume).
          auto first = q.start ? std::partition_point(pts.begin(), pts.end(), [&](const XY& p) { return p.x < *q.start; })
                               : pts.begin();
          auto last = q.end ? std::partition_point(first, pts.end(), [&](const XY& p) { return p.x <= *q.end; })
                            : pts.end();
          pts.erase(last, pts.end());
          pts.erase(pts.begin(), first);
        }
        std::vector<double> ema = smooth ? DebiasedEma(pts, q.smoothing) : std::vector<double>();
        Json e = Json::object();
        e["id"] = r.id;
        e["project"] = r.project;
        e["name"] = r.name;
        e["key"] = MetricNameToKey(metric);
        e["metric"] = metric;
        e["labels"] = ExtraLabels(series.labels());
        e["total_points"] = pts.size();
        e["points"] = BucketsJson(Downsample(pts, q.points, ema), q.by_step, smooth);
        out.push_back(std::move(e));
      }
      RETURN_IF_ERROR(set->Err());
    }
  }
  return out;
}

}  // namespace trainwatch::runs
