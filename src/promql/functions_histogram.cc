// Functions over native histograms: histogram_count, _sum, _avg, _stddev,
// _stdvar, and the native half of histogram_quantile(s) and
// histogram_fraction (the classic half is in functions_label.cc).

#include <algorithm>
#include <cmath>

#include "model/histogram_estimate.h"
#include "promql/functions_internal.h"

namespace trainwatch::promql {

namespace {

double Statistic(HistogramStat stat, const model::FloatHistogram& h) {
  switch (stat) {
    case HistogramStat::kCount:
      return h.count;
    case HistogramStat::kSum:
      return h.sum;
    case HistogramStat::kAvg:
      return h.sum / h.count;
    case HistogramStat::kStdDev:
      return std::sqrt(model::HistogramVariance(h));
    case HistogramStat::kStdVar:
      return model::HistogramVariance(h);
  }
  return NAN;
}

// Annotations of the per-histogram estimates, about `arg`.
void Annotate(Evaluator& ev, const model::HistogramEstimateNotes& n, std::string_view metric, const parser::Expr& arg) {
  std::string suffix = metric.empty() ? "" : " for metric name \"" + std::string(metric) + "\"";
  if (n.quantile_nan_result) ev.Info("input to histogram_quantile has NaN observations, result is NaN" + suffix, arg);
  if (n.quantile_nan_skew) {
    ev.Info("input to histogram_quantile has NaN observations, result is skewed higher" + suffix, arg);
  }
  if (n.fraction_nans) {
    ev.Info("input to histogram_fraction has NaN observations, which are excluded from all fractions" + suffix, arg);
  }
}

}  // namespace

Value EvalHistogramStat(Evaluator& ev, const parser::Expr& e, const StepRange& r, HistogramStat stat) {
  Value in = ev.Eval(*e.args[0], r);
  Value out;
  out.type = parser::Type::kVector;
  for (auto& s : in.series) {
    if (s.hpoints.empty()) continue;
    EvalSeries es;
    es.labels = std::move(s.labels);
    es.drop_name = true;
    es.points.reserve(s.hpoints.size());
    for (const HPoint& p : s.hpoints) es.points.push_back({p.t, Statistic(stat, *p.h)});
    out.series.push_back(std::move(es));
  }
  return out;
}

SeriesList NativeHistogramEstimates(Evaluator& ev, const Value& in, const StepRange& r, const parser::Expr& arg,
                                    const std::function<double(size_t step, const model::FloatHistogram& h,
                                                               model::HistogramEstimateNotes* notes)>& fn) {
  SeriesList out;
  for (const auto& s : in.series) {
    if (s.hpoints.empty()) continue;
    EvalSeries es;
    es.labels = s.labels;
    es.drop_name = true;
    for (const HPoint& p : s.hpoints) {
      model::HistogramEstimateNotes notes;
      es.points.push_back({p.t, fn(r.Index(p.t), *p.h, &notes)});
      Annotate(ev, notes, s.labels.MetricName(), arg);
    }
    out.push_back(std::move(es));
  }
  return out;
}

void DropMixedClassicNative(Evaluator& ev, SeriesList* classic, SeriesList* native, const parser::Expr& arg) {
  if (classic->empty() || native->empty()) return;
  for (auto& n : *native) {
    for (auto& c : *classic) {
      if (c.labels != n.labels) continue;
      // Steps where both have a value yield nothing, with a warning.
      std::vector<int64_t> both;
      size_t a = 0, b = 0;
      while (a < c.points.size() && b < n.points.size()) {
        if (c.points[a].t == n.points[b].t) {
          both.push_back(c.points[a].t);
          ++a;
          ++b;
        } else if (c.points[a].t < n.points[b].t) {
          ++a;
        } else {
          ++b;
        }
      }
      if (both.empty()) continue;
      ev.Warn("vector contains a mix of classic and native histograms for metric name \"" +
                  std::string(n.labels.MetricName()) + "\"",
              arg);
      auto in_both = [&](const Point& p) { return std::binary_search(both.begin(), both.end(), p.t); };
      std::erase_if(c.points, in_both);
      std::erase_if(n.points, in_both);
    }
  }
  auto empty = [](const EvalSeries& s) { return s.points.empty(); };
  std::erase_if(*classic, empty);
  std::erase_if(*native, empty);
}

}  // namespace trainwatch::promql
