// Aggregation operators. Group keys are computed once per input series; the
// per-step work only touches dense accumulators.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "promql/eval.h"
#include "promql/functions_internal.h"
#include "promql/functions_range_histogram.h"
#include "promql/parser/functions.h"
#include "promql/parser/parse.h"

namespace trainwatch::promql {

using parser::AggOp;
using parser::Expr;

namespace {

struct Acc {
  double value = 0;
  double c = 0;     // Kahan compensation
  double mean = 0;  // avg (incremental), stddev/stdvar
  double count = 0;
  bool incremental = false;
};

// Inlined where op is a constant (AddAll): the switch folds away.
[[gnu::always_inline]] inline void AccAddInline(AggOp op, Acc& a, double f) {
  if (a.count == 0) {
    a.count = 1;
    a.value = f;
    a.mean = f;
    a.c = 0;
    // Like Prometheus: a NaN or ±Inf first value makes the deviation NaN.
    if (op == AggOp::kStddev || op == AggOp::kStdvar) a.value = std::isnan(f) || std::isinf(f) ? NAN : 0;
    if (op == AggOp::kGroup) a.value = 1;
    return;
  }
  switch (op) {
    case AggOp::kSum:
      a.value = KahanSumInc(f, a.value, &a.c);
      break;
    case AggOp::kAvg: {
      a.count++;
      if (!a.incremental) {
        double nc = a.c;
        double nv = KahanSumInc(f, a.value, &nc);
        if (!std::isinf(nv)) {
          a.value = nv;
          a.c = nc;
          break;
        }
        a.incremental = true;
        a.mean = a.value / (a.count - 1);
        a.c /= a.count - 1;
      }
      if (std::isinf(a.mean)) {
        if (std::isinf(f) && (a.mean > 0) == (f > 0)) break;
        if (!std::isinf(f) && !std::isnan(f)) break;
      }
      double cur = a.mean + a.c;
      a.mean = KahanSumInc(f / a.count - cur / a.count, a.mean, &a.c);
      break;
    }
    case AggOp::kCount:
      a.count++;
      break;
    case AggOp::kGroup:
      break;
    case AggOp::kMin:
      if (a.value > f || std::isnan(a.value)) a.value = f;
      break;
    case AggOp::kMax:
      if (a.value < f || std::isnan(a.value)) a.value = f;
      break;
    case AggOp::kStddev:
    case AggOp::kStdvar: {
      a.count++;
      double delta = f - a.mean;
      a.mean += delta / a.count;
      a.value += delta * (f - a.mean);
      break;
    }
    default:
      break;
  }
}

void AccAdd(AggOp op, Acc& a, double f) { AccAddInline(op, a, f); }

// Each step value into its step's cell of `row`.
template <AggOp kOp>
void AddAll(Acc* row, std::span<const StepValue> vals) {
  for (const StepValue& sv : vals) AccAddInline(kOp, row[sv.step], sv.v);
}

void AddAll(AggOp op, Acc* row, std::span<const StepValue> vals) {
  switch (op) {
    case AggOp::kSum: return AddAll<AggOp::kSum>(row, vals);
    case AggOp::kAvg: return AddAll<AggOp::kAvg>(row, vals);
    case AggOp::kMin: return AddAll<AggOp::kMin>(row, vals);
    case AggOp::kMax: return AddAll<AggOp::kMax>(row, vals);
    case AggOp::kCount: return AddAll<AggOp::kCount>(row, vals);
    default:
      for (const StepValue& sv : vals) AccAdd(op, row[sv.step], sv.v);
  }
}

double AccResult(AggOp op, const Acc& a) {
  switch (op) {
    case AggOp::kSum: return std::isinf(a.value) ? a.value : a.value + a.c;
    case AggOp::kAvg:
      if (a.incremental) return a.mean + a.c;
      return (a.value + a.c) / a.count;
    case AggOp::kCount: return a.count;
    case AggOp::kStdvar: return a.value / a.count;
    case AggOp::kStddev: return std::sqrt(a.value / a.count);
    default: return a.value;
  }
}

// Assigns series to groups. The key is hashed straight from the series'
// labels (no allocation); a group's Labels are built once, when it is created.
class GroupIndex {
 public:
  GroupIndex(const std::vector<std::string>& grouping, bool without) : grouping_(grouping), without_(without) {}

  // Group of a series (created when new), keyed like Prometheus: `by` keeps the
  // listed labels, `without` drops them and __name__. A __name__ awaiting
  // delayed removal still partitions `by (__name__)`; the group then drops
  // its name at the end if any member does.
  size_t Find(const model::Labels& l, bool drop_name) {
    key_.clear();
    bool pending_name = false;
    for (const auto& p : l) {
      bool listed = std::find(grouping_.begin(), grouping_.end(), p.name) != grouping_.end();
      if (without_) {
        if (listed || p.name == model::kMetricName) continue;
      } else if (!listed) {
        continue;
      }
      if (drop_name && p.name == model::kMetricName) pending_name = true;
      key_.emplace_back(p.name, p.value);
    }
    uint64_t h = model::HashLabelPairs(key_.data(), key_.size());
    auto [it, inserted] = index_.try_emplace(h, labels_.size());
    if (!inserted) {
      for (size_t c = it->second; c != SIZE_MAX; c = next_[c]) {
        if (KeyEquals(labels_[c])) {
          drop_name_[c] = drop_name_[c] || pending_name;
          return c;
        }
      }
    }
    size_t g = labels_.size();
    std::vector<model::Label> ls;
    ls.reserve(key_.size());
    for (const auto& [n, v] : key_) ls.push_back({std::string(n), std::string(v)});
    labels_.emplace_back(std::move(ls));
    drop_name_.push_back(pending_name);
    // Collisions chain through next_; the map points at the newest group.
    next_.push_back(inserted ? SIZE_MAX : it->second);
    it->second = g;
    return g;
  }
  std::vector<model::Labels>& labels() { return labels_; }
  bool drop_name(size_t g) const { return drop_name_[g]; }

 private:
  bool KeyEquals(const model::Labels& g) const {
    if (g.size() != key_.size()) return false;
    size_t i = 0;
    for (const auto& p : g) {
      if (p.name != key_[i].first || p.value != key_[i].second) return false;
      ++i;
    }
    return true;
  }

  const std::vector<std::string>& grouping_;
  const bool without_;
  std::vector<std::pair<std::string_view, std::string_view>> key_;
  std::unordered_map<uint64_t, size_t> index_;  // hash -> newest group with it
  std::vector<size_t> next_;                    // group -> older group with the same hash
  std::vector<model::Labels> labels_;
  std::vector<bool> drop_name_;  // group -> its __name__ is to be dropped
};

bool IsAccumulating(AggOp op) {
  switch (op) {
    case AggOp::kSum: case AggOp::kAvg: case AggOp::kCount: case AggOp::kGroup: case AggOp::kMin:
    case AggOp::kMax: case AggOp::kStddev: case AggOp::kStdvar:
      return true;
    default:
      return false;
  }
}

// A group's accumulators, one a step, in a row of its own: a group added
// moves no other, and no one block grows by reallocation (which glibc mapped
// afresh, page fault by page fault, at every query once past 128 KiB: 7 %
// of a 90-day query's time at a 3 h step).
using AccRows = std::vector<std::vector<Acc>>;

// Turns per-group accumulator rows into output series (groups without any
// value are left out).
void EmitAccumulated(AggOp op, const AccRows& acc, GroupIndex& groups, const StepRange& r, Value* out) {
  size_t steps = r.Steps();
  std::vector<model::Labels>& group_labels = groups.labels();
  out->series.reserve(group_labels.size());
  for (size_t g = 0; g < group_labels.size() && g < acc.size(); ++g) {
    if (acc[g].size() < steps) continue;
    EvalSeries es;
    const Acc* row = acc[g].data();
    for (size_t s = 0; s < steps; ++s) {
      if (row[s].count > 0) es.points.push_back({r.At(s), AccResult(op, row[s])});
    }
    if (es.points.empty()) continue;
    es.labels = std::move(group_labels[g]);
    es.drop_name = groups.drop_name(g);
    out->series.push_back(std::move(es));
  }
}

int64_t KParam(double k) {
  if (std::isnan(k)) ThrowEval("Parameter value is NaN");
  if (k >= 9.2e18 || k <= -9.2e18) ThrowEval("Scalar value " + FormatFloat(k) + " overflows int64");
  return static_cast<int64_t>(k);
}

// XXH64 (seed 0), the hash Prometheus's labels.Hash() uses; limit_ratio must
// pick the same series as Prometheus for the same ratio.
uint64_t XXH64(std::string_view in) {
  constexpr uint64_t P1 = 11400714785074694791ULL, P2 = 14029467366897019727ULL, P3 = 1609587929392839161ULL,
                     P4 = 9650029242287828579ULL, P5 = 2870177450012600261ULL;
  auto rotl = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  auto read64 = [](const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  auto read32 = [](const unsigned char* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return static_cast<uint64_t>(v);
  };
  auto round = [&](uint64_t acc, uint64_t x) { return rotl(acc + x * P2, 31) * P1; };
  auto merge = [&](uint64_t acc, uint64_t v) { return (acc ^ round(0, v)) * P1 + P4; };
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  const auto* end = p + in.size();
  uint64_t h;
  if (in.size() >= 32) {
    uint64_t v1 = P1 + P2, v2 = P2, v3 = 0, v4 = 0 - P1;
    while (p + 32 <= end) {
      v1 = round(v1, read64(p));
      v2 = round(v2, read64(p + 8));
      v3 = round(v3, read64(p + 16));
      v4 = round(v4, read64(p + 24));
      p += 32;
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = P5;
  }
  h += static_cast<uint64_t>(in.size());
  while (p + 8 <= end) {
    h ^= round(0, read64(p));
    h = rotl(h, 27) * P1 + P4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= read32(p) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * P5;
    h = rotl(h, 11) * P1;
    ++p;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

uint64_t PrometheusLabelsHash(const model::Labels& l) {
  std::string b;
  for (const auto& p : l) {
    b += p.name;
    b += '\xff';
    b += p.value;
    b += '\xff';
  }
  return XXH64(b);
}

bool IsSelecting(AggOp op) {
  return op == AggOp::kTopk || op == AggOp::kBottomk || op == AggOp::kLimitk || op == AggOp::kLimitRatio;
}

// limit_ratio's ratios: NaN is an error, values outside [-1, 1] are capped
// with a warning.
void CheckRatios(Evaluator& ev, const Expr& param, std::vector<double>* ratios) {
  for (double& p : *ratios) {
    if (std::isnan(p)) ThrowEval("Ratio value is NaN");
    if (p < -1 || p > 1) {
      ev.Warn("ratio value should be between -1 and 1, got " + FormatFloat(p) + ", capping to " + (p < 0 ? "-1" : "1"),
              param);
      p = p < 0 ? -1 : 1;
    }
  }
}

// Picks, per group and step, the series topk, bottomk, limitk and
// limit_ratio keep. Series are offered one at a time, in input order, with
// increasing ids; a cell (group, step) holds at most k entries, for
// topk/bottomk as a heap whose front is the worst one kept. That makes the
// same choice as sorting all candidates stably and taking the first k: a later
// series displaces a kept one only when strictly better. Only ids are held,
// so a caller streaming series need keep the labels of those that placed.
class KSelection {
 public:
  KSelection(AggOp op, const std::vector<double>& param, size_t steps) : op_(op), steps_(steps) {
    if (op == AggOp::kLimitRatio) {
      ratio_ = param;
    } else {
      k_.reserve(steps);
      for (double k : param) k_.push_back(KParam(k));
    }
  }

  size_t groups() const { return cells_.size() / steps_; }
  void AddGroups(size_t n) { cells_.resize(n * steps_); }

  // Starts the offers of the next series. REQUIRES: ids never decrease; an
  // id is reused only after a series that did not place.
  void Begin(uint32_t id, const model::Labels& labels) {
    id_ = id;
    placed_ = false;
    if (op_ == AggOp::kLimitRatio) offset_ = static_cast<double>(PrometheusLabelsHash(labels)) / 18446744073709551615.0;
  }

  // REQUIRES: group < groups(). A histogram (h set, limitk and limit_ratio
  // only) is kept or not like a float.
  void Offer(size_t group, size_t step, double v, const HistogramPtr& h = nullptr) {
    std::vector<Entry>& c = cells_[group * steps_ + step];
    const Entry e{v, id_, h};
    if (op_ == AggOp::kLimitRatio) {
      double ratio = ratio_[step];
      if ((ratio >= 0 && offset_ < ratio) || (ratio < 0 && offset_ >= 1.0 + ratio)) Keep(c, e);
      return;
    }
    const int64_t k = k_[step];
    if (k < 1) return;
    if (c.size() < static_cast<uint64_t>(k)) {
      Keep(c, e);
      if (op_ != AggOp::kLimitk) std::push_heap(c.begin(), c.end(), RanksBefore());
    } else if (op_ != AggOp::kLimitk && Better(v, c.front().v)) {
      std::pop_heap(c.begin(), c.end(), RanksBefore());
      c.pop_back();
      Keep(c, e);
      std::push_heap(c.begin(), c.end(), RanksBefore());
    }
  }

  // Whether the series begun last holds a place in some cell.
  bool Placed() const { return placed_; }

  // Calls emit(id, points, hpoints) once per series that holds a place: for
  // an instant query by group and then rank, otherwise by id, points in step
  // order.
  template <typename Fn>
  void Emit(const StepRange& r, Fn&& emit) {
    if (cells_.empty()) return;
    const bool ranked = op_ == AggOp::kTopk || op_ == AggOp::kBottomk;
    if (steps_ == 1) {
      for (std::vector<Entry>& c : cells_) {
        if (ranked) std::sort(c.begin(), c.end(), RanksBefore());
        for (const Entry& e : c) {
          if (e.h != nullptr) {
            emit(e.id, std::vector<Point>{}, std::vector<HPoint>{{r.At(0), e.h}});
          } else {
            emit(e.id, std::vector<Point>{{r.At(0), e.v}}, std::vector<HPoint>{});
          }
        }
      }
      return;
    }
    std::vector<std::vector<Point>> points(static_cast<size_t>(max_id_) + 1);
    std::vector<std::vector<HPoint>> hpoints(points.size());
    for (size_t s = 0; s < steps_; ++s) {
      for (size_t g = 0; g < groups(); ++g) {
        for (const Entry& e : cells_[g * steps_ + s]) {
          if (e.h != nullptr) {
            hpoints[e.id].push_back({r.At(s), e.h});
          } else {
            points[e.id].push_back({r.At(s), e.v});
          }
        }
      }
    }
    for (size_t id = 0; id < points.size(); ++id) {
      if (!points[id].empty() || !hpoints[id].empty()) {
        emit(static_cast<uint32_t>(id), std::move(points[id]), std::move(hpoints[id]));
      }
    }
  }

 private:
  struct Entry {
    double v;
    uint32_t id;
    HistogramPtr h;  // limitk / limit_ratio: a histogram value
  };
  // topk: larger first, NaN last; bottomk: smaller first, NaN last.
  static bool Better(bool top, double a, double b) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
    return top ? a > b : a < b;
  }
  bool Better(double a, double b) const { return Better(op_ == AggOp::kTopk, a, b); }
  // The output order within a cell: better first, then earlier input first.
  struct Ranks {
    bool top;
    bool operator()(const Entry& a, const Entry& b) const {
      if (Better(top, a.v, b.v)) return true;
      if (Better(top, b.v, a.v)) return false;
      return a.id < b.id;
    }
  };
  Ranks RanksBefore() const { return Ranks{op_ == AggOp::kTopk}; }
  void Keep(std::vector<Entry>& c, const Entry& e) {
    c.push_back(e);
    placed_ = true;
    max_id_ = e.id;
  }

  const AggOp op_;
  const size_t steps_;
  std::vector<int64_t> k_;      // per step (topk, bottomk, limitk)
  std::vector<double> ratio_;   // per step (limit_ratio)
  std::vector<std::vector<Entry>> cells_;  // group-major
  uint32_t id_ = 0;       // the series being offered
  bool placed_ = false;   // it holds a place
  uint32_t max_id_ = 0;   // largest id that placed
  double offset_ = 0;     // limit_ratio: its hash in [0, 1]
};

// sum and avg over series that hold native histograms, as Prometheus: per
// group and step, floats and histograms are summed apart (histograms with
// Kahan compensation; avg switches to an incremental mean when the sum
// would overflow), and a group that mixed both yields nothing but a warning.
class HistogramSumAvg {
 public:
  HistogramSumAvg(Evaluator& ev, const Expr& e, size_t cells) : ev_(ev), e_(e), avg_(e.agg == AggOp::kAvg), cells_(cells) {}

  void AddFloat(size_t cell, double f) {
    Cell& c = cells_[cell];
    Acc& a = c.floats;
    if (!c.seen) {
      c.seen = true;
      c.count = 1;
    } else {
      if (c.incompatible) return;
      c.count++;
    }
    c.has_float = true;
    AccAdd(e_.agg, a, f);
  }

  void AddHistogram(size_t cell, const model::FloatHistogram& h, std::string_view metric) {
    Cell& c = cells_[cell];
    if (!c.seen) {
      c.seen = true;
      c.count = 1;
      c.has_hist = true;
      c.value = h;
      c.value_set = true;
      NoteHint(c, h);
      return;
    }
    if (c.incompatible) return;
    c.count++;
    c.has_hist = true;
    if (!c.value_set) return;  // floats came first: the group is void anyway
    NoteHint(c, h);
    if (!avg_) {
      Kahan(c, &c.value, h, metric);
      return;
    }
    if (!c.incremental) {
      model::FloatHistogram v = c.value;
      model::FloatHistogram comp = c.c;
      bool had_c = c.has_c;
      auto r = v.KahanAdd(h, &comp);
      if (!r.ok()) {
        Incompatible(c, metric);
        return;
      }
      if (r->nhcb_bounds_reconciled) ReconciledInfo();
      if (!v.HasOverflow()) {
        c.value = std::move(v);
        c.c = std::move(comp);
        c.has_c = true;
        return;
      }
      c.incremental = true;
      c.mean = c.value;
      c.mean.Div(c.count - 1);
      if (had_c) c.c.Div(c.count - 1);
    }
    double q = (c.count - 1) / c.count;
    if (c.has_c) c.c.Mul(q);
    model::FloatHistogram add = h;
    add.Div(c.count);
    c.mean.Mul(q);
    Kahan(c, &c.mean, add, metric);
  }

  // Appends the group's series to out (g: group, labels from `groups`).
  void Emit(GroupIndex& groups, const StepRange& r, Value* out) {
    size_t steps = r.Steps();
    std::vector<model::Labels>& group_labels = groups.labels();
    for (size_t g = 0; g < group_labels.size(); ++g) {
      EvalSeries es;
      for (size_t s = 0; s < steps; ++s) {
        Cell& c = cells_[g * steps + s];
        if (!c.seen) continue;
        if (c.has_float && c.has_hist) {
          ev_.Warn("encountered a mix of histograms and floats for aggregation", *e_.args[0]);
          continue;
        }
        if (c.incompatible) continue;
        if (c.has_float) {
          es.points.push_back({r.At(s), AccResult(e_.agg, c.floats)});
          continue;
        }
        model::FloatHistogram v;
        if (avg_ && c.incremental) {
          v = std::move(c.mean);
          if (c.has_c) (void)v.Add(c.c);
        } else {
          v = std::move(c.value);
          if (avg_) {
            v.Div(c.count);
            if (c.has_c) c.c.Div(c.count);
          }
          if (c.has_c) (void)v.Add(c.c);
        }
        v.Compact(0);
        if (c.reset_seen && c.not_reset_seen) {
          ev_.Warn("conflicting counter resets during histogram aggregation", *e_.args[0]);
        }
        es.hpoints.push_back({r.At(s), std::make_shared<model::FloatHistogram>(std::move(v))});
      }
      if (es.points.empty() && es.hpoints.empty()) continue;
      es.labels = std::move(group_labels[g]);
      es.drop_name = groups.drop_name(g);
      out->series.push_back(std::move(es));
    }
  }

 private:
  struct Cell {
    Acc floats;
    model::FloatHistogram value;  // sum (avg: the direct sum)
    model::FloatHistogram c;      // Kahan compensation, valid when has_c
    model::FloatHistogram mean;   // avg's incremental mean
    double count = 0;             // samples of either kind (avg's divisor)
    bool seen = false, value_set = false, has_float = false, has_hist = false, has_c = false;
    bool incremental = false, incompatible = false, reset_seen = false, not_reset_seen = false;
  };

  static void NoteHint(Cell& c, const model::FloatHistogram& h) {
    if (h.counter_reset_hint == model::CounterResetHint::kCounterReset) c.reset_seen = true;
    if (h.counter_reset_hint == model::CounterResetHint::kNotCounterReset) c.not_reset_seen = true;
  }
  void Kahan(Cell& c, model::FloatHistogram* into, const model::FloatHistogram& h, std::string_view metric) {
    auto r = into->KahanAdd(h, &c.c);
    if (!r.ok()) {
      Incompatible(c, metric);
      return;
    }
    c.has_c = true;
    if (r->nhcb_bounds_reconciled) ReconciledInfo();
  }
  void Incompatible(Cell& c, std::string_view metric) {
    c.incompatible = true;
    ev_.Warn("vector contains a mix of histograms with exponential and custom buckets schemas for metric name \"" +
                 std::string(metric) + "\"",
             *e_.args[0]);
  }
  void ReconciledInfo() { ev_.Info("mismatched custom buckets were reconciled during aggregation", *e_.args[0]); }

  Evaluator& ev_;
  const Expr& e_;
  const bool avg_;
  std::vector<Cell> cells_;
};

// Thrown by a streaming aggregation that meets a histogram value.
struct HistogramsInStream {};

const char* AggName(AggOp op) {
  switch (op) {
    case AggOp::kMin: return "min";
    case AggOp::kMax: return "max";
    case AggOp::kStddev: return "stddev";
    case AggOp::kStdvar: return "stdvar";
    case AggOp::kQuantile: return "quantile";
    case AggOp::kTopk: return "topk";
    case AggOp::kBottomk: return "bottomk";
    default: return "";
  }
}

}  // namespace

Value Evaluator::EvalAggregate(const Expr& e, const StepRange& r) {
  AggOp op = e.agg;
  size_t steps = r.Steps();
  std::vector<double> param;
  std::string label_param;
  if (e.args.size() > 1) {
    if (op == AggOp::kCountValues) {
      const Expr& p = Unparen(*e.args[1]);
      if (p.kind != parser::NodeKind::kString) ThrowEval("expected string parameter");
      label_param = p.str;
      if (!model::IsValidLabelName(label_param)) ThrowEval("invalid label name " + parser::Quote(label_param));
    } else {
      param = ScalarArg(*this, *e.args[1], r);
    }
  }
  // sum/avg/... over a range function (`sum by (x) (rate(m[5m]))`): stream
  // each series' values into its group's accumulators instead of
  // materializing every input series first. Same groups in the same order and
  // the same order of additions as the general path below, so same results.
  // The streaming paths below hold floats only: a range function that
  // yields a histogram sends the aggregation to the general path instead.
  try {
    const Expr& arg = Unparen(*e.args[0]);
    if (IsAccumulating(op) && arg.kind == parser::NodeKind::kCall) {
      if (const RangeFnDef* def = LookupRangeFn(arg.func->name)) {
        CheckDeadline();
        GroupIndex groups(e.grouping, e.without);
        AccRows acc;
        ForEachRangeFnSeriesWithHistograms(*this, arg, *def, r,
                             [&](const model::Labels& l, bool drop_name, std::span<const StepValue> vals,
                                 std::span<const StepHistogram> hvals) {
                               if (!hvals.empty()) throw HistogramsInStream{};
                               size_t g = groups.Find(l, drop_name);
                               if (acc.size() <= g) {
                                 CheckCells((g + 1) * steps);
                                 acc.resize(g + 1);
                               }
                               if (acc[g].empty()) acc[g].resize(steps);
                               Acc* row = acc[g].data();
                               AddAll(op, row, vals);
                             });
        Value out;
        out.type = parser::Type::kVector;
        EmitAccumulated(op, acc, groups, r, &out);
        return out;
      }
    }
    // topk/bottomk/limitk/limit_ratio over a range function likewise: only the
    // series that place keep their labels (`topk(10, avg_over_time(m[1h]))`
    // over 2,000 series copies a few dozen label sets, not 2,000).
    if (IsSelecting(op) && arg.kind == parser::NodeKind::kCall) {
      if (const RangeFnDef* def = LookupRangeFn(arg.func->name)) {
        CheckDeadline();
        if (op == AggOp::kLimitRatio) CheckRatios(*this, *e.args[1], &param);
        KSelection sel(op, param, steps);
        GroupIndex groups(e.grouping, e.without);
        SeriesList placed;  // labels of series that hold a place, by id
        ForEachRangeFnSeriesWithHistograms(*this, arg, *def, r,
                             [&](const model::Labels& l, bool drop_name, std::span<const StepValue> vals,
                                 std::span<const StepHistogram> hvals) {
                               if (!hvals.empty()) throw HistogramsInStream{};
                               size_t g = groups.Find(l, drop_name);
                               if (g >= sel.groups()) {
                                 CheckCells((g + 1) * steps);
                                 sel.AddGroups(g + 1);
                               }
                               sel.Begin(static_cast<uint32_t>(placed.size()), l);
                               for (const StepValue& sv : vals) sel.Offer(g, sv.step, sv.v);
                               if (sel.Placed()) placed.push_back(EvalSeries{l, {}, {}, drop_name});
                             });
        Value out;
        out.type = parser::Type::kVector;
        sel.Emit(r, [&](uint32_t id, std::vector<Point>&& points, std::vector<HPoint>&& hpoints) {
          placed[id].points = std::move(points);
          placed[id].hpoints = std::move(hpoints);
          out.series.push_back(std::move(placed[id]));
        });
        return out;
      }
    }
  } catch (const HistogramsInStream&) {
  }
  Value in = Eval(*e.args[0], r);
  // Group assignment, once per series.
  GroupIndex groups(e.grouping, e.without);
  std::vector<size_t> group_of(in.series.size());
  for (size_t i = 0; i < in.series.size(); ++i) {
    CheckDeadline();
    group_of[i] = groups.Find(in.series[i].labels, in.series[i].drop_name);
  }
  std::vector<model::Labels>& group_labels = groups.labels();
  size_t ngroups = group_labels.size();
  CheckCells(ngroups * steps);
  Value out;
  out.type = parser::Type::kVector;

  bool any_hist = false;
  for (const auto& s : in.series) any_hist = any_hist || !s.hpoints.empty();
  if (any_hist) {
    if (op == AggOp::kSum || op == AggOp::kAvg) {
      HistogramSumAvg agg(*this, e, ngroups * steps);
      for (size_t i = 0; i < in.series.size(); ++i) {
        const EvalSeries& s = in.series[i];
        size_t base = group_of[i] * steps;
        // Floats and histograms of one series never share a step, so the
        // order within a cell stays the order of the series.
        for (const auto& p : s.points) agg.AddFloat(base + r.Index(p.t), p.v);
        for (const auto& p : s.hpoints) agg.AddHistogram(base + r.Index(p.t), *p.h, s.labels.MetricName());
      }
      agg.Emit(groups, r, &out);
      return out;
    }
    // Histograms are ignored by these, with an info.
    const char* name = AggName(op);
    if (*name != 0) Info(std::string("ignored histogram in ") + name + " aggregation", op == AggOp::kTopk || op == AggOp::kBottomk ? e : *e.args[0]);
  }

  switch (op) {
    case AggOp::kSum: case AggOp::kAvg: case AggOp::kCount: case AggOp::kGroup: case AggOp::kMin:
    case AggOp::kMax: case AggOp::kStddev: case AggOp::kStdvar: {
      AccRows acc(ngroups, std::vector<Acc>(steps));
      for (size_t i = 0; i < in.series.size(); ++i) {
        Acc* row = acc[group_of[i]].data();
        for (const auto& p : in.series[i].points) AccAdd(op, row[r.Index(p.t)], p.v);
        // count and group count histograms too.
        if (op == AggOp::kCount || op == AggOp::kGroup) {
          for (const auto& p : in.series[i].hpoints) AccAdd(op, row[r.Index(p.t)], 0);
        }
      }
      EmitAccumulated(op, acc, groups, r, &out);
      return out;
    }
    case AggOp::kQuantile: {
      std::vector<std::vector<double>> vals(ngroups * steps);
      for (size_t i = 0; i < in.series.size(); ++i) {
        auto* row = &vals[group_of[i] * steps];
        for (const auto& p : in.series[i].points) row[r.Index(p.t)].push_back(p.v);
      }
      for (size_t g = 0; g < ngroups; ++g) {
        EvalSeries es;
        for (size_t s = 0; s < steps; ++s) {
          auto& v = vals[g * steps + s];
          if (v.empty()) continue;
          WarnIfInvalidQuantile(*this, param[s], *e.args[1]);
          es.points.push_back({r.At(s), Quantile(param[s], &v)});
        }
        if (es.points.empty()) continue;
        es.labels = std::move(group_labels[g]);
        es.drop_name = groups.drop_name(g);
        out.series.push_back(std::move(es));
      }
      return out;
    }
    case AggOp::kCountValues: {
      // As Prometheus: the value label is set first and the groups are
      // formed after, so the value can overwrite a label (by() also keeps
      // the value label).
      std::vector<std::string> grouping = e.grouping;
      if (!e.without) grouping.push_back(label_param);
      GroupIndex vgroups(grouping, e.without);
      std::vector<std::vector<double>> counts;
      for (size_t i = 0; i < in.series.size(); ++i) {
        const EvalSeries& s = in.series[i];
        auto count = [&](int64_t t, const std::string& vs) {
          model::LabelsBuilder b(s.labels);
          b.Set(label_param, vs);
          size_t g = vgroups.Find(b.Build(), false);
          if (g >= counts.size()) {
            CheckCells((g + 1) * steps);
            counts.resize(g + 1, std::vector<double>(steps, 0.0));
          }
          counts[g][r.Index(t)] += 1;
        };
        for (const auto& p : s.points) count(p.t, FormatFloat(p.v));
        // Histograms count by their text form.
        for (const auto& p : s.hpoints) count(p.t, p.h->String());
      }
      std::vector<model::Labels>& vlabels = vgroups.labels();
      for (size_t g = 0; g < counts.size(); ++g) {
        EvalSeries es;
        es.labels = std::move(vlabels[g]);
        for (size_t st = 0; st < steps; ++st) {
          if (counts[g][st] > 0) es.points.push_back({r.At(st), counts[g][st]});
        }
        out.series.push_back(std::move(es));
      }
      return out;
    }
    case AggOp::kTopk: case AggOp::kBottomk: case AggOp::kLimitk: case AggOp::kLimitRatio: {
      if (op == AggOp::kLimitRatio) CheckRatios(*this, *e.args[1], &param);
      KSelection sel(op, param, steps);
      sel.AddGroups(ngroups);
      for (size_t i = 0; i < in.series.size(); ++i) {
        sel.Begin(static_cast<uint32_t>(i), in.series[i].labels);
        for (const auto& p : in.series[i].points) sel.Offer(group_of[i], r.Index(p.t), p.v);
        if (op == AggOp::kLimitk || op == AggOp::kLimitRatio) {
          for (const auto& p : in.series[i].hpoints) sel.Offer(group_of[i], r.Index(p.t), 0, p.h);
        }
      }
      sel.Emit(r, [&](uint32_t id, std::vector<Point>&& points, std::vector<HPoint>&& hpoints) {
        EvalSeries& es = in.series[id];
        es.points = std::move(points);
        es.hpoints = std::move(hpoints);
        out.series.push_back(std::move(es));
      });
      return out;
    }
  }
  ThrowEval("unknown aggregation");
}

}  // namespace trainwatch::promql
