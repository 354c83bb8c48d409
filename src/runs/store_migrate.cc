// RunStore::MigrateFromTsdb: data dirs from before the step store kept a
// run's logged values only in the TSDB, each value beside a
// trainwatch_run_step sample of the same labels and timestamp. On the first
// open by this version every run's values are read back that way and
// written to the step store, in time order, so a step logged twice keeps
// its later value, as the step store's own rule has it.

#include <algorithm>
#include <charconv>
#include <map>

#include "base/log.h"
#include "runs/metric_name.h"
#include "runs/store.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {
namespace {

Result<model::Matchers> Equal(std::initializer_list<std::pair<std::string_view, std::string_view>> pairs) {
  model::Matchers m;
  for (auto [n, v] : pairs) {
    ASSIGN_OR_RETURN(model::Matcher x, model::Matcher::Make(model::MatchType::kEqual, std::string(n), std::string(v)));
    m.push_back(std::move(x));
  }
  return m;
}

Status ReadAll(const storage::Series& s, std::vector<model::Sample>* out) {
  auto it = s.Iterator();
  while (it->Next()) {
    if (!it->AtIsHistogram()) out->push_back(it->At());  // steps are floats; a histogram is not one
  }
  return it->Err();
}

model::Labels WithoutName(const model::Labels& ls) {
  model::LabelsBuilder b(ls);
  b.Del(model::kMetricName);
  return b.Build();
}

}  // namespace

Status RunStore::MigrateFromTsdb() {
  RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
  size_t values = 0;
  Status st = [&]() -> Status {
    mu_.AssertHeld();  // run in place, under the lock
    ASSIGN_OR_RETURN(auto querier, queryable_->NewQuerier(model::kMinTime, model::kMaxTime));
    storage::SelectHints hints;
    for (const auto& [id, r] : runs_) {
      ASSIGN_OR_RETURN(auto run_m, Equal({{"project", r.project}, {"run", r.name}}));
      ASSIGN_OR_RETURN(auto names, querier->LabelValues(model::kMetricName, run_m));
      // The step of every timestamp, per label set (ranks logged separately).
      std::map<model::Labels, std::vector<model::Sample>> steps;
      {
        ASSIGN_OR_RETURN(auto m, Equal({{model::kMetricName, kStepSeries}, {"project", r.project}, {"run", r.name}}));
        auto set = querier->Select(false, hints, m);
        while (set->Next()) RETURN_IF_ERROR(ReadAll(set->At(), &steps[WithoutName(set->At().labels())]));
        RETURN_IF_ERROR(set->Err());
      }
      for (const std::string& metric : names) {
        if (IsRunSeriesName(metric)) continue;
        ASSIGN_OR_RETURN(auto m, Equal({{model::kMetricName, metric}, {"project", r.project}, {"run", r.name}}));
        auto set = querier->Select(false, hints, m);
        while (set->Next()) {
          const storage::Series& series = set->At();
          auto st_it = steps.find(WithoutName(series.labels()));
          if (st_it == steps.end()) continue;  // not a logged series (no steps beside it)
          const std::vector<model::Sample>& ss = st_it->second;
          std::vector<model::Sample> samples;
          RETURN_IF_ERROR(ReadAll(series, &samples));
          std::vector<StepPoint> pts;
          size_t j = 0;
          for (const model::Sample& s : samples) {
            while (j < ss.size() && ss[j].t < s.t) j++;
            if (j < ss.size() && ss[j].t == s.t) pts.push_back({static_cast<int64_t>(ss[j].v), s.t, s.v});
          }
          if (pts.empty()) continue;
          int64_t rank = -1;
          std::string host;
          if (std::string_view rk = series.labels().Get("rank"); !rk.empty()) {
            int64_t v = 0;
            auto [p, ec] = std::from_chars(rk.data(), rk.data() + rk.size(), v);
            if (ec != std::errc() || p != rk.data() + rk.size() || v < 0) continue;  // not a rank the API wrote
            rank = v;
            host = std::string(series.labels().Get("host"));
          }
          SortLastWins(&pts);  // time order in, so the later log of a step wins
          Stmt ins(db_, "INSERT INTO step_series(run_id, rank, host, metric) VALUES(?1, ?2, ?3, ?4) "
                        "ON CONFLICT(run_id, rank, metric) DO UPDATE SET host=excluded.host RETURNING id");
          ins.Bind(1, id).Bind(2, rank).Bind(3, host).Bind(4, metric);
          if (!ins.Step()) {
            RETURN_IF_ERROR(ins.status());
            return Status::IOError("runs.db: no id for a step series");
          }
          int64_t sid = ins.Int(0);
          RETURN_IF_ERROR(ins.Run());
          RETURN_IF_ERROR(InsertStepChunks(db_, sid, pts, {}).status());
          values += pts.size();
        }
        RETURN_IF_ERROR(set->Err());
      }
    }
    return Status::OK();
  }();
  if (!st.ok()) {
    (void)Exec(db_, "ROLLBACK");
    return st.Annotate("copy the runs' logged values from the TSDB into the step store");
  }
  RETURN_IF_ERROR(Exec(db_, "COMMIT"));
  TW_LOG(Info, "runs: step store: copied {} logged values of {} runs from the TSDB", values, runs_.size());
  return Status::OK();
}

}  // namespace trainwatch::runs
