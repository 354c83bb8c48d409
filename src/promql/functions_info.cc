// info(v [, selector]): enriches each series of v with the data labels of
// the info series (target_info by default) that share its identifying labels
// (instance, job), as Prometheus 3.x's experimental info() function does.

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>

#include "promql/eval.h"
#include "promql/functions_internal.h"

namespace trainwatch::promql {

using parser::Expr;
using parser::NodeKind;

namespace {

constexpr std::string_view kIdentifying[] = {"instance", "job"};

// Maps a step time to the time the info series are read at: the @ and offset
// of the first vector selector below the argument, and of the subqueries on
// the way to it, as the base samples are read.
struct RefTime {
  bool fixed = false;
  int64_t at = 0;
  int64_t offset = 0;
  int64_t At(int64_t t) const { return (fixed ? at : t) - offset; }
};

// Applies the accumulated offsets top-down: an @ below resets what is above.
RefTime ResolveRef(const Expr& arg) {
  // Collect the path to the first vector selector.
  std::vector<const Expr*> path;
  std::function<bool(const Expr&)> walk = [&](const Expr& e) {
    path.push_back(&e);
    if (e.kind == NodeKind::kVectorSelector) return true;
    for (const auto& a : e.args) {
      if (walk(*a)) return true;
    }
    path.pop_back();
    return false;
  };
  RefTime ref;
  if (!walk(arg)) return ref;
  for (const Expr* e : path) {
    if (e->kind != NodeKind::kVectorSelector && e->kind != NodeKind::kSubquery) continue;
    if (e->at == parser::AtKind::kValue) {
      ref.fixed = true;
      ref.at = e->at_ms;
      ref.offset = 0;
    }
    ref.offset += e->offset_ms;
  }
  return ref;
}

struct InfoSeries {
  model::Labels labels;
  std::string name;
  std::vector<int64_t> orig_t;  // per step: timestamp of the sample in use, or INT64_MIN
};

}  // namespace

Value EvalInfo(Evaluator& ev, const Expr& e, const StepRange& r) {
  Value base = ev.Eval(*e.args[0], r);
  const size_t steps = r.Steps();
  model::Matchers name_matchers;
  std::map<std::string, std::vector<const model::Matcher*>> data_matchers;
  model::Matchers select;
  if (e.args.size() > 1) {
    const Expr& sel = Unparen(*e.args[1]);
    for (const auto& m : sel.matchers) {
      if (m.name() == model::kMetricName) {
        name_matchers.push_back(m);
      } else {
        data_matchers[m.name()].push_back(&m);
      }
      select.push_back(m);
    }
  }
  if (name_matchers.empty()) {
    auto m = model::Matcher::Make(model::MatchType::kEqual, std::string(model::kMetricName), "target_info");
    name_matchers.push_back(*m);
    select.insert(select.begin(), std::move(*m));
  }
  // A base series is itself an info series (passed through unchanged) when
  // it matches every __name__ matcher, at least one of them positive.
  bool any_positive = false;
  for (const auto& m : name_matchers) {
    if (m.type() == model::MatchType::kEqual || m.type() == model::MatchType::kRegex) any_positive = true;
  }
  if (!any_positive) {
    // Only negative name matchers: they narrow down the *_info metrics.
    auto m = model::Matcher::Make(model::MatchType::kRegex, std::string(model::kMetricName), ".+_info");
    select.push_back(std::move(*m));
  }
  auto is_info = [&](const model::Labels& l) {
    if (!any_positive) return false;
    std::string_view name = l.MetricName();
    for (const auto& m : name_matchers) {
      if (!m.Matches(name)) return false;
    }
    return true;
  };
  std::vector<uint8_t> ignored(base.series.size(), 0);
  std::vector<std::set<std::string>> id_values(std::size(kIdentifying));
  bool any_id = false;
  for (size_t i = 0; i < base.series.size(); ++i) {
    const auto& s = base.series[i];
    if (!s.drop_name && is_info(s.labels)) {
      ignored[i] = 1;
      continue;
    }
    for (size_t k = 0; k < std::size(kIdentifying); ++k) {
      std::string_view v = s.labels.Get(kIdentifying[k]);
      if (!v.empty()) {
        id_values[k].insert(std::string(v));
        any_id = true;
      }
    }
  }

  // Info series, evaluated per step at the reference time with the lookback.
  std::vector<InfoSeries> infos;
  RefTime ref = ResolveRef(*e.args[0]);
  if (any_id) {
    const int64_t lookback = ev.lookback_delta();
    int64_t min_ref = std::min(ref.At(r.start), ref.At(r.end));
    int64_t max_ref = std::max(ref.At(r.start), ref.At(r.end));
    Expr vs(NodeKind::kVectorSelector);
    vs.matchers = select;
    ev.SelectRaw(vs, min_ref - lookback + 1, max_ref, true,
                 [&](const model::Labels& l, bool, std::vector<model::Sample>& smp, const std::vector<int64_t>&,
                     std::vector<HPoint>& hs) {
                   for (size_t k = 0; k < std::size(kIdentifying); ++k) {
                     std::string_view v = l.Get(kIdentifying[k]);
                     if (!v.empty() && id_values[k].count(std::string(v)) == 0) return;
                   }
                   InfoSeries is;
                   is.labels = l;
                   is.name = std::string(l.MetricName());
                   is.orig_t.assign(steps, INT64_MIN);
                   bool any = false;
                   for (size_t i = 0; i < steps; ++i) {
                     int64_t rt = ref.At(r.At(i));
                     auto it = std::upper_bound(smp.begin(), smp.end(), rt,
                                                [](int64_t t, const model::Sample& s) { return t < s.t; });
                     auto hit = std::upper_bound(hs.begin(), hs.end(), rt,
                                                 [](int64_t t, const HPoint& s) { return t < s.t; });
                     // The sample selected here is a histogram: info series hold floats.
                     if (hit != hs.begin() && (hit - 1)->t > rt - lookback && !IsStaleHistogram(*(hit - 1)->h) &&
                         (it == smp.begin() || (it - 1)->t < (hit - 1)->t)) {
                       ThrowEval("info sample should be float");
                     }
                     if (it == smp.begin()) continue;
                     --it;
                     if (it->t <= rt - lookback || model::IsStaleNaN(it->v)) continue;
                     is.orig_t[i] = it->t;
                     any = true;
                   }
                   if (any) infos.push_back(std::move(is));
                 });
  }

  bool drop_unmatched = false;
  for (const auto& [n, ms] : data_matchers) {
    for (const auto* m : ms) {
      if (!m->Matches("")) drop_unmatched = true;
    }
  }

  Value out;
  out.type = parser::Type::kVector;
  // Output series by (labels, drop_name); the last step written guards
  // against two inputs producing the same labels at one step.
  std::map<std::pair<model::Labels, bool>, size_t> index;
  std::vector<int64_t> last_t, last_ht;
  // Adds the float point p, or the histogram point hp when p is null.
  auto emit = [&](model::Labels l, bool drop, const Point* p, const HPoint* hp) {
    auto [it, inserted] = index.try_emplace({l, drop}, out.series.size());
    if (inserted) {
      EvalSeries es;
      es.labels = std::move(l);
      es.drop_name = drop;
      out.series.push_back(std::move(es));
      last_t.push_back(INT64_MIN);
      last_ht.push_back(INT64_MIN);
    }
    size_t o = it->second;
    int64_t& last = p != nullptr ? last_t[o] : last_ht[o];
    int64_t t = p != nullptr ? p->t : hp->t;
    if (last == t) ThrowEval("vector cannot contain metrics with the same labelset");
    last = t;
    if (p != nullptr) {
      out.series[o].points.push_back(*p);
    } else {
      out.series[o].hpoints.push_back(*hp);
    }
  };

  for (size_t i = 0; i < base.series.size(); ++i) {
    ev.CheckDeadline();
    const auto& s = base.series[i];
    if (ignored[i]) {
      for (const auto& p : s.points) emit(s.labels, s.drop_name, &p, nullptr);
      for (const auto& hp : s.hpoints) emit(s.labels, s.drop_name, nullptr, &hp);
      continue;
    }
    // Info series sharing this series' identifying labels.
    std::vector<const InfoSeries*> cands;
    for (const auto& is : infos) {
      bool ok = true;
      for (auto id : kIdentifying) {
        std::string_view v = s.labels.Get(id);
        if (!v.empty() && is.labels.Get(id) != v) ok = false;
      }
      bool shares = false;
      for (auto id : kIdentifying) {
        if (!s.labels.Get(id).empty()) shares = true;
      }
      if (ok && shares) cands.push_back(&is);
    }
    auto each_point = [&](const Point* p, const HPoint* hp) {
      size_t step = r.Index(p != nullptr ? p->t : hp->t);
      // Newest sample per info metric name.
      std::map<std::string_view, const InfoSeries*> chosen;
      for (const InfoSeries* is : cands) {
        int64_t t = is->orig_t[step];
        if (t == INT64_MIN) continue;
        auto [it, inserted] = chosen.try_emplace(is->name, is);
        if (inserted) continue;
        int64_t et = it->second->orig_t[step];
        if (t > et) {
          it->second = is;
        } else if (t == et) {
          ThrowEval("found duplicate series for info metric: existing " + it->second->labels.ToString() + " @ " +
                    std::to_string(et) + ", new " + is->labels.ToString() + " @ " + std::to_string(t));
        }
      }
      std::map<std::string, std::string> add;
      for (const auto& [name, is] : chosen) {
        for (const auto& l : is->labels) {
          if (l.name == model::kMetricName) continue;
          if (!data_matchers.empty() && data_matchers.count(l.name) == 0) continue;
          auto a = add.find(l.name);
          if (a != add.end() && a->second != l.value) ThrowEval("conflicting label: " + l.name);
          if (s.labels.Has(l.name)) continue;
          add[l.name] = l.value;
        }
      }
      if (chosen.empty() && drop_unmatched) return;
      if (add.empty()) {
        emit(s.labels, s.drop_name, p, hp);
        return;
      }
      model::LabelsBuilder b(s.labels);
      for (const auto& [n, v] : add) b.Set(n, v);
      emit(b.Build(), s.drop_name, p, hp);
    };
    for (const auto& p : s.points) each_point(&p, nullptr);
    for (const auto& hp : s.hpoints) each_point(nullptr, &hp);
  }
  return out;
}

}  // namespace trainwatch::promql
