// label_replace, label_join, sort_by_label and histogram_quantile over
// classic `le` buckets.

#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_map>

#include "promql/eval.h"
#include "promql/functions_internal.h"

namespace trainwatch::promql {

using parser::Expr;

namespace {

std::string StringArg(const Expr& e) {
  const Expr& a = Unparen(e);
  if (a.kind != parser::NodeKind::kString) ThrowEval("expected string literal argument");
  return a.str;
}

// Go's regexp.Expand template syntax: $1, ${1}, $name, ${name}, $$.
std::string Expand(const std::string& tmpl, const RE2& re, const std::vector<re2::StringPiece>& groups) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c != '$' || i + 1 >= tmpl.size()) {
      out += c;
      continue;
    }
    if (tmpl[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    std::string name;
    size_t j = i + 1;
    if (tmpl[j] == '{') {
      size_t close = tmpl.find('}', j);
      if (close == std::string::npos) {
        out += c;
        continue;
      }
      name = tmpl.substr(j + 1, close - j - 1);
      j = close + 1;
    } else {
      while (j < tmpl.size() && (std::isalnum(static_cast<unsigned char>(tmpl[j])) || tmpl[j] == '_')) ++j;
      name = tmpl.substr(i + 1, j - i - 1);
    }
    if (name.empty()) {
      out += c;
      continue;
    }
    i = j - 1;
    bool numeric = std::all_of(name.begin(), name.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
    int idx = -1;
    if (numeric) {
      idx = std::atoi(name.c_str());
    } else {
      auto it = re.NamedCapturingGroups().find(name);
      if (it != re.NamedCapturingGroups().end()) idx = it->second;
    }
    if (idx >= 0 && idx < static_cast<int>(groups.size()) && groups[idx].data() != nullptr) {
      out.append(groups[idx].data(), groups[idx].size());
    }
  }
  return out;
}

bool NaturalLess(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    bool da = std::isdigit(static_cast<unsigned char>(a[i])), db = std::isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      size_t ie = i, je = j;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      std::string_view na = a.substr(i, ie - i), nb = b.substr(j, je - j);
      while (na.size() > 1 && na[0] == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb[0] == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

struct Bucket {
  double le;
  double count;
};

bool AlmostEqual(double a, double b, double eps) {
  if (a == b) return true;
  constexpr double kMinNormal = 2.2250738585072014e-308;
  double abs_sum = std::fabs(a) + std::fabs(b);
  double diff = std::fabs(a - b);
  if (a == 0 || b == 0 || abs_sum < kMinNormal) return diff < eps * kMinNormal;
  return diff / std::fmin(abs_sum, 1.7976931348623157e308) < eps;
}

// Sets *forced when a bucket count below the one before it had to be raised
// (not for float noise within 1e-12).
double BucketQuantile(double q, std::vector<Bucket>* bp, bool* forced) {
  auto& b = *bp;
  if (std::isnan(q)) return NAN;
  if (q < 0) return -INFINITY;
  if (q > 1) return INFINITY;
  std::sort(b.begin(), b.end(), [](const Bucket& x, const Bucket& y) { return x.le < y.le; });
  if (b.empty() || !std::isinf(b.back().le) || b.back().le < 0) return NAN;
  // Coalesce equal bounds.
  size_t o = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (o > 0 && b[o - 1].le == b[i].le) {
      b[o - 1].count += b[i].count;
    } else {
      b[o++] = b[i];
    }
  }
  b.resize(o);
  double prev = b[0].count;
  for (size_t i = 1; i < b.size(); ++i) {
    double cur = b[i].count;
    if (cur == prev) continue;
    if (AlmostEqual(prev, cur, 1e-12)) {
      b[i].count = prev;
      continue;
    }
    if (cur < prev) {
      b[i].count = prev;
      *forced = true;
      continue;
    }
    prev = cur;
  }
  if (b.size() < 2) return NAN;
  double obs = b.back().count;
  if (obs == 0) return NAN;
  double rank = q * obs;
  size_t idx = 0;
  while (idx < b.size() - 1 && b[idx].count < rank) ++idx;
  if (idx == b.size() - 1) return b[b.size() - 2].le;
  if (idx == 0 && b[0].le <= 0) return b[0].le;
  double start = 0, end = b[idx].le, count = b[idx].count;
  if (idx > 0) {
    start = b[idx - 1].le;
    count -= b[idx - 1].count;
    rank -= b[idx - 1].count;
  }
  return start + (end - start) * (rank / count);
}

}  // namespace

Value EvalLabelReplace(Evaluator& ev, const Expr& e, const StepRange& r) {
  std::string dst = StringArg(*e.args[1]);
  std::string repl = StringArg(*e.args[2]);
  std::string src = StringArg(*e.args[3]);
  std::string regex = StringArg(*e.args[4]);
  RE2::Options opts;
  opts.set_dot_nl(true);
  opts.set_log_errors(false);
  RE2 re("^(?:" + regex + ")$", opts);
  if (!re.ok()) ThrowEval("invalid regular expression in label_replace(): " + regex);
  if (!model::IsValidLabelName(dst) && dst != model::kMetricName) {
    ThrowEval("invalid destination label name in label_replace(): " + dst);
  }
  Value v = ev.Eval(*e.args[0], r);
  std::vector<re2::StringPiece> groups(re.NumberOfCapturingGroups() + 1);
  for (auto& s : v.series) {
    std::string val(s.labels.Get(src));
    if (!re.Match(val, 0, val.size(), RE2::ANCHOR_BOTH, groups.data(), static_cast<int>(groups.size()))) {
      continue;
    }
    std::string res = Expand(repl, re, groups);
    model::LabelsBuilder b(s.labels);
    b.Set(dst, res);
    s.labels = b.Build();
    if (dst == model::kMetricName) s.drop_name = false;
  }
  MergeSameLabels(&v.series);
  return v;
}

Value EvalLabelJoin(Evaluator& ev, const Expr& e, const StepRange& r) {
  std::string dst = StringArg(*e.args[1]);
  std::string sep = StringArg(*e.args[2]);
  std::vector<std::string> srcs;
  for (size_t i = 3; i < e.args.size(); ++i) srcs.push_back(StringArg(*e.args[i]));
  if (!model::IsValidLabelName(dst) && dst != model::kMetricName) {
    ThrowEval("invalid destination label name in label_join(): " + dst);
  }
  Value v = ev.Eval(*e.args[0], r);
  for (auto& s : v.series) {
    std::string res;
    for (size_t i = 0; i < srcs.size(); ++i) {
      if (i > 0) res += sep;
      res += s.labels.Get(srcs[i]);
    }
    model::LabelsBuilder b(s.labels);
    b.Set(dst, res);
    s.labels = b.Build();
    if (dst == model::kMetricName) s.drop_name = false;
  }
  MergeSameLabels(&v.series);
  return v;
}

Value EvalSortByLabel(Evaluator& ev, const Expr& e, const StepRange& r, bool desc) {
  std::vector<std::string> names;
  for (size_t i = 1; i < e.args.size(); ++i) names.push_back(StringArg(*e.args[i]));
  ev.WarnSortInRange(e, r);
  Value v = ev.Eval(*e.args[0], r);
  std::stable_sort(v.series.begin(), v.series.end(), [&](const EvalSeries& a, const EvalSeries& b) {
    for (const auto& n : names) {
      std::string_view x = a.labels.Get(n), y = b.labels.Get(n);
      if (x == y) continue;
      return desc ? NaturalLess(y, x) : NaturalLess(x, y);
    }
    return desc ? b.labels < a.labels : a.labels < b.labels;
  });
  return v;
}

namespace {

// Sorts by le, merges equal bounds; false unless the last bound is +Inf.
bool PrepareBuckets(std::vector<Bucket>* bp) {
  auto& b = *bp;
  std::sort(b.begin(), b.end(), [](const Bucket& x, const Bucket& y) { return x.le < y.le; });
  if (b.empty() || !std::isinf(b.back().le) || b.back().le < 0) return false;
  size_t o = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (o > 0 && b[o - 1].le == b[i].le) {
      b[o - 1].count += b[i].count;
    } else {
      b[o++] = b[i];
    }
  }
  b.resize(o);
  return true;
}

// Estimated number of observations <= x: linear inside finite buckets (the
// first bucket starts at 0 when its bound is positive); no interpolation
// inside a bucket of infinite width.
double BucketRank(double x, const std::vector<Bucket>& b) {
  if (x == -INFINITY) return 0;
  double prev = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    double ub = b[i].le;
    double lb = i > 0 ? b[i - 1].le : (ub > 0 ? 0 : -INFINITY);
    if (x <= lb) return prev;
    if (x <= ub) {
      if (x == ub) return b[i].count;
      if (std::isinf(lb)) return b[i].count;
      if (std::isinf(ub)) return prev;
      return prev + (b[i].count - prev) * (x - lb) / (ub - lb);
    }
    prev = b[i].count;
  }
  return prev;
}

double BucketFraction(double lower, double upper, std::vector<Bucket>* bp) {
  if (!PrepareBuckets(bp)) return NAN;
  const auto& b = *bp;
  double count = b.back().count;
  if (count == 0 || std::isnan(lower) || std::isnan(upper)) return NAN;
  if (lower >= upper) return 0;
  double lo = std::min(BucketRank(lower, b), count), hi = std::min(BucketRank(upper, b), count);
  return (hi - lo) / count;
}

// `le` groups of the classic histogram series in `in` (the value of `arg`);
// calls fn(step, buckets, group labels) for every step where the group has
// buckets.
template <typename Fn>
SeriesList ForEachBucketGroup(Evaluator& ev, const Expr& arg, const Value& in, const StepRange& r, Fn fn) {
  size_t steps = r.Steps();
  struct Group {
    model::Labels labels;
    std::vector<std::pair<size_t, double>> members;  // series index, le
  };
  std::vector<Group> groups;
  std::unordered_map<uint64_t, std::vector<size_t>> by_hash;
  for (size_t i = 0; i < in.series.size(); ++i) {
    const auto& s = in.series[i];
    if (s.points.empty()) continue;  // native histograms only
    std::string les(s.labels.Get("le"));
    char* end = nullptr;
    double le = std::strtod(les.c_str(), &end);
    if (les == "+Inf" || les == "Inf" || les == "inf" || les == "+inf") le = INFINITY;
    else if (end != les.c_str() + les.size() || les.empty()) {
      ev.Warn("bucket label \"le\" is missing or has a malformed value of \"" + les + "\" for metric name \"" +
                  std::string(s.labels.MetricName()) + "\"",
              arg);
      continue;
    }
    model::LabelsBuilder b(s.labels);
    b.Del("le");
    model::Labels key = b.Build();
    uint64_t h = key.Hash();
    size_t gi = SIZE_MAX;
    for (size_t cand : by_hash[h]) {
      if (groups[cand].labels == key) gi = cand;
    }
    if (gi == SIZE_MAX) {
      gi = groups.size();
      groups.push_back({std::move(key), {}});
      by_hash[h].push_back(gi);
    }
    groups[gi].members.push_back({i, le});
  }
  SeriesList out;
  std::vector<size_t> cursor(in.series.size(), 0);
  std::vector<Bucket> buckets;
  for (auto& g : groups) {
    ev.CheckDeadline();
    EvalSeries es;
    es.labels = g.labels;
    es.drop_name = true;
    for (size_t i = 0; i < steps; ++i) {
      int64_t t = r.At(i);
      buckets.clear();
      for (const auto& [si, le] : g.members) {
        const auto& pts = in.series[si].points;
        size_t& c = cursor[si];
        while (c < pts.size() && pts[c].t < t) ++c;
        if (c < pts.size() && pts[c].t == t) buckets.push_back({le, pts[c].v});
      }
      if (buckets.empty()) continue;
      es.points.push_back({t, fn(i, &buckets, g.labels)});
    }
    if (!es.points.empty()) out.push_back(std::move(es));
  }
  return out;
}

// Label value for histogram_quantiles: Go's 'f' formatting with a ".0" for
// whole numbers ("0.0", "0.25", "1.0").
std::string QuantileLabel(double q) {
  std::string s = FormatFloat(q);
  if (std::isfinite(q) && s.find('.') == std::string::npos) s += ".0";
  return s;
}

// histogram_quantile(s) of one group's buckets; an info when they were not
// monotonic.
double QuantileOf(Evaluator& ev, double q, std::vector<Bucket>* b, const model::Labels& group, const Expr& arg) {
  bool forced = false;
  double v = BucketQuantile(q, b, &forced);
  if (forced) {
    ev.Info("input to histogram_quantile needed to be fixed for monotonicity (see "
            "https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile) for metric name \"" +
                std::string(group.MetricName()) + "\"",
            arg);
  }
  return v;
}

}  // namespace

Value EvalHistogramQuantile(Evaluator& ev, const Expr& e, const StepRange& r) {
  std::vector<double> q = ScalarArg(ev, *e.args[0], r);
  for (double x : q) WarnIfInvalidQuantile(ev, x, *e.args[0]);
  Value in = ev.Eval(*e.args[1], r);
  Value out;
  out.type = parser::Type::kVector;
  out.series = ForEachBucketGroup(ev, *e.args[1], in, r, [&](size_t i, std::vector<Bucket>* b, const model::Labels& g) {
    return QuantileOf(ev, q[i], b, g, *e.args[1]);
  });
  SeriesList native = NativeHistogramEstimates(
      ev, in, r, *e.args[1], [&](size_t i, const model::FloatHistogram& h, model::HistogramEstimateNotes* n) {
        return model::HistogramQuantile(q[i], h, n);
      });
  DropMixedClassicNative(ev, &out.series, &native, *e.args[1]);
  for (auto& s : native) out.series.push_back(std::move(s));
  return out;
}

// histogram_quantiles(v, "label", q1, q2, ...): one output series per
// quantile, told apart by the given label.
Value EvalHistogramQuantiles(Evaluator& ev, const Expr& e, const StepRange& r) {
  Value in = ev.Eval(*e.args[0], r);
  std::string label = StringArg(*e.args[1]);
  if (!model::IsValidLabelName(label)) ThrowEval("invalid label name \"" + label + "\"");
  Value out;
  out.type = parser::Type::kVector;
  for (size_t a = 2; a < e.args.size(); ++a) {
    std::vector<double> q = ScalarArg(ev, *e.args[a], r);
    for (double x : q) WarnIfInvalidQuantile(ev, x, *e.args[a]);
    SeriesList part = ForEachBucketGroup(ev, *e.args[0], in, r, [&](size_t i, std::vector<Bucket>* b, const model::Labels& g) {
      return QuantileOf(ev, q[i], b, g, *e.args[0]);
    });
    SeriesList native = NativeHistogramEstimates(
        ev, in, r, *e.args[0], [&](size_t i, const model::FloatHistogram& h, model::HistogramEstimateNotes* n) {
          return model::HistogramQuantile(q[i], h, n);
        });
    DropMixedClassicNative(ev, &part, &native, *e.args[0]);
    for (auto& s : native) part.push_back(std::move(s));
    // The label carries the quantile of the first step (constant in practice).
    std::string v = QuantileLabel(q.empty() ? NAN : q[0]);
    for (auto& s : part) {
      model::LabelsBuilder b(s.labels);
      b.Set(label, v);
      s.labels = b.Build();
      out.series.push_back(std::move(s));
    }
  }
  MergeSameLabels(&out.series);
  return out;
}

Value EvalHistogramFraction(Evaluator& ev, const Expr& e, const StepRange& r) {
  std::vector<double> lo = ScalarArg(ev, *e.args[0], r);
  std::vector<double> hi = ScalarArg(ev, *e.args[1], r);
  Value in = ev.Eval(*e.args[2], r);
  Value out;
  out.type = parser::Type::kVector;
  out.series =
      ForEachBucketGroup(ev, *e.args[2], in, r, [&](size_t i, std::vector<Bucket>* b, const model::Labels&) {
        return BucketFraction(lo[i], hi[i], b);
      });
  SeriesList native = NativeHistogramEstimates(
      ev, in, r, *e.args[2], [&](size_t i, const model::FloatHistogram& h, model::HistogramEstimateNotes* n) {
        return model::HistogramFraction(lo[i], hi[i], h, n);
      });
  DropMixedClassicNative(ev, &out.series, &native, *e.args[2]);
  for (auto& s : native) out.series.push_back(std::move(s));
  return out;
}

}  // namespace trainwatch::promql
