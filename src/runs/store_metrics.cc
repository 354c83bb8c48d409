// RunStore::ReadMetrics: a run's logged series from the step store, by step
// or by wall time, smoothed, then bucketed.

#include <algorithm>
#include <utility>

#include "runs/downsample.h"
#include "runs/metric_name.h"
#include "runs/store.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {
namespace {

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

Json StepLabelsJson(const StepSeries& s) {
  Json j = Json::object();
  if (s.rank) {
    if (!s.host.empty()) j["host"] = s.host;
    j["rank"] = std::to_string(*s.rank);
  }
  if (TimeViewName tv = TimeViewNameOf(s.metric); !tv.phase.empty()) j["phase"] = std::move(tv.phase);
  return j;
}

Result<Json> RunStore::ReadMetrics(const MetricsQuery& q) const {
  std::vector<Run> runs;
  for (const std::string& id : q.ids) {
    ASSIGN_OR_RETURN(Run r, Get(id));
    runs.push_back(std::move(r));
  }
  StepQuery sq;
  for (const std::string& k : q.keys) {
    auto m = KeyToMetricName(k);
    if (!m.ok()) return Status::InvalidArgument("keys: \"" + k + "\": " + m.error().message());
    sq.metrics.push_back(*m);
  }
  if (q.by_step) {
    sq.start_step = q.start;
    sq.end_step = q.end;
  } else {
    sq.start_ms = q.start;
    sq.end_ms = q.end;
  }
  const bool smooth = q.smoothing > 0;
  Json out = Json::array();
  std::vector<XY> pts;  // reused: a run's series have about the same length
  for (const Run& r : runs) {
    ASSIGN_OR_RETURN(std::vector<StepSeries> series, ReadSteps(r.id, sq));
    for (const StepSeries& s : series) {
      pts.clear();
      pts.reserve(s.points.size());
      for (const StepPoint& p : s.points) pts.push_back({q.by_step ? p.step : p.ts_ms, p.value});
      if (!q.by_step) {
        // By wall time; a step logged again later (a resume) sits at its new time.
        std::stable_sort(pts.begin(), pts.end(), [](const XY& a, const XY& b) { return a.x < b.x; });
      }
      std::vector<double> ema = smooth ? DebiasedEma(pts, q.smoothing) : std::vector<double>();
      Json e = Json::object();
      e["id"] = r.id;
      e["project"] = r.project;
      e["name"] = r.name;
      e["key"] = MetricNameToKey(s.metric);
      e["metric"] = TimeViewNameOf(s.metric).name;
      e["labels"] = StepLabelsJson(s);
      e["total_points"] = pts.size();
      e["points"] = BucketsJson(Downsample(pts, q.points, ema), q.by_step, smooth);
      out.push_back(std::move(e));
    }
  }
  return out;
}

}  // namespace trainwatch::runs
