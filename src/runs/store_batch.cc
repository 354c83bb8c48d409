// RunStore::WriteBatch: a batch's time view into the TSDB, then its id, its
// points in the step store and the run's new state into SQLite in one
// transaction (see store.h on durability).

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "base/log.h"
#include "base/mutex.h"
#include "ingest/import.h"
#include "runs/metric_name.h"
#include "runs/store.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {
namespace {

constexpr int64_t kRateWindowMs = 5 * 60 * 1000;  // ETA: step rate over the last 5 minutes of points
constexpr int64_t kWindowSpacingMs = 1000;        // keep at most one window entry per second
constexpr int64_t kBatchIdsKept = 10000;
constexpr uint64_t kTrimEvery = 100;

// Adds rank-0 points to the rate window; returns the ETA in seconds.
std::optional<double> UpdateRate(RunStore::Live* live, const std::vector<BatchPoint>& points,
                                 std::optional<int64_t> total_steps) {
  for (const BatchPoint& p : points) {
    if (live->last && (p.ts_ms <= live->last->first)) continue;  // replayed or out of order: not a rate sample
    if (live->last && p.step < live->last->second) live->window.clear();  // restarted from a checkpoint
    live->last = {p.ts_ms, p.step};
    if (live->window.empty() || p.ts_ms - live->window.back().first >= kWindowSpacingMs) {
      live->window.emplace_back(p.ts_ms, p.step);
    }
  }
  if (!live->last) return std::nullopt;
  while (live->window.size() > 1 && live->window.front().first < live->last->first - kRateWindowMs) {
    live->window.pop_front();
  }
  if (!total_steps || live->window.empty()) return std::nullopt;
  int64_t remaining = std::max<int64_t>(0, *total_steps - live->last->second);
  if (remaining == 0) return 0.0;
  const auto& [t0, s0] = live->window.front();
  double dt = static_cast<double>(live->last->first - t0) / 1000.0;
  double ds = static_cast<double>(live->last->second - s0);
  if (dt <= 0 || ds <= 0) return std::nullopt;
  return static_cast<double>(remaining) / (ds / dt);
}

}  // namespace

Result<BatchResult> RunStore::WriteBatch(std::string_view id, const BatchRequest& b) {
  return RetryOnDamage([&] { return DoWriteBatch(id, b); });
}

Result<BatchResult> RunStore::DoWriteBatch(std::string_view id_view, const BatchRequest& b) {
  std::string id(id_view);
  base::MutexLock l(&mu_);
  if (!runs_.contains(id)) return Status::NotFound("run \"" + id + "\" not found");
  Live& live = LiveOf(id);
  l.Unlock();
  base::MutexLock w(&live.write_mu);
  l.Lock();
  {
    Stmt q(db_, "SELECT 1 FROM batches WHERE run_id=?1 AND batch_id=?2");
    q.Bind(1, id).Bind(2, b.batch_id);
    bool dup = q.Step();
    RETURN_IF_ERROR(q.status());
    if (dup) return BatchResult{0, true, {}};
  }
  Run r = runs_.at(id);
  l.Unlock();

  const bool owner = !b.rank || *b.rank == 0;
  std::string rank = b.rank ? std::to_string(*b.rank) : std::string();
  std::string host = b.rank ? (b.host.empty() ? r.host : b.host) : std::string();
  // The newest point by timestamp (one ahead of the server's clock counts as
  // now) sets the run's step.
  int64_t now = Now();
  const BatchPoint* newest = nullptr;
  for (const BatchPoint& p : b.points) {
    if (newest == nullptr || std::min(p.ts_ms, now) >= std::min(newest->ts_ms, now)) newest = &p;
  }

  Run next = r;
  next.heartbeat_time_ms = now;
  if (next.status == kCrashed) {  // a client that was only silent
    next.status = std::string(kRunning);
    next.end_time_ms.reset();
  }
  Live rate;  // the window as it will be once the batch is durable
  rate.window = live.window;
  rate.last = live.last;
  if (owner && newest != nullptr) {
    next.step = newest->step;
    if (next.status == kRunning) {
      std::vector<BatchPoint> by_ts(b.points);
      std::stable_sort(by_ts.begin(), by_ts.end(), [](const BatchPoint& x, const BatchPoint& y) { return x.ts_ms < y.ts_ms; });
      next.eta_seconds = UpdateRate(&rate, by_ts, next.total_steps);
    }
    // The summary holds each key's last logged value unless the batch sets it.
    for (const BatchPoint& p : b.points) {
      for (const auto& [key, v] : p.keyed) next.summary[key] = NumberJson(v);
    }
  }
  for (const auto& [k, v] : b.summary.items()) next.summary[k] = v;

  // The time view (docs/training-metrics.md): per second of the points' wall
  // time, one sample per key, the last value (a NaN or Inf of that second
  // wins, so the rules see it), and the step, at the second's last point's
  // time, never later than now. A second older than the retention is left
  // to the step store.
  size_t accepted = 0;
  // The run series at now; a second batch of the same millisecond leaves
  // them be rather than stamp them ahead of the clock.
  const bool run_series_due = now > live.last_series_ts;
  // (time clamped to now, point), in time order: points stamped ahead of
  // the server's clock all fall into its current second.
  std::vector<std::pair<int64_t, const BatchPoint*>> by_ts;
  by_ts.reserve(b.points.size());
  for (const BatchPoint& p : b.points) {
    by_ts.emplace_back(std::min(p.ts_ms, now), &p);
    accepted += p.values.size();
  }
  std::stable_sort(by_ts.begin(), by_ts.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  auto second_of = [](int64_t t) { return t / 1000 - (t % 1000 < 0 ? 1 : 0); };  // floor
  const int64_t rank_no = b.rank ? *b.rank : -1;
  int64_t view_ts = live.view_ts[rank_no];
  Status s = ingest::AppendAndCommit(*app_, [&](storage::Appender* app) -> Status {
    std::unordered_map<std::string, storage::SeriesRef> refs;
    auto add = [&](const std::string& metric, int64_t t, double v) -> Status {
      storage::SeriesRef& ref = refs[metric];
      if (ref != 0 && app->AppendByRef(ref, t, v)) return Status::OK();
      const TimeViewName tv = TimeViewNameOf(metric);
      auto res = app->Append(0, RunLabels(tv.name, r, {{"rank", rank}, {"host", host}, {"phase", tv.phase}}), t, v);
      // At the TSDB's series limit the point is still in the step store.
      if (!res.ok() && SkippedAtSeriesLimit(res.error())) return Status::OK();
      if (!res.ok()) return res.error().Annotate(metric);
      ref = *res;
      return Status::OK();
    };
    const std::string step_name(kStepSeries);
    std::vector<std::pair<const std::string*, double>> last;  // per key of the second
    for (size_t i = 0; i < by_ts.size();) {
      size_t j = i;
      int64_t sec = second_of(by_ts[i].first);
      last.clear();
      for (; j < by_ts.size() && second_of(by_ts[j].first) == sec; j++) {
        for (const BatchValue& v : by_ts[j].second->values) {
          auto it = std::find_if(last.begin(), last.end(), [&](const auto& e) { return *e.first == v.metric; });
          if (it == last.end()) last.emplace_back(&v.metric, v.value);
          else if (!std::isfinite(v.value) || std::isfinite(it->second)) it->second = v.value;
        }
      }
      const BatchPoint& end = *by_ts[j - 1].second;
      int64_t t = by_ts[j - 1].first;
      i = j;
      // Strictly after the previous sample of this run and rank: the TSDB
      // keeps the first value of a timestamp, so a batch whose second ends
      // at or before the previous batch's end (batches cut within one
      // millisecond) goes 1 ms past it, else the view's last sample would
      // not be the last value. At most a few ms ahead of the clock, and
      // only where batches end in the same millisecond.
      if (t <= view_ts) t = view_ts + 1;
      if (!app_->CheckTimestamp(t).ok()) continue;
      view_ts = t;
      for (const auto& [metric, v] : last) RETURN_IF_ERROR(add(*metric, t, v));
      RETURN_IF_ERROR(add(step_name, t, static_cast<double>(end.step)));
    }
    auto run_series = [&](std::string_view name, int64_t t, double v) -> Status {
      auto res = app->Append(0, RunLabels(name, next), t, v);
      return res.ok() || SkippedAtSeriesLimit(res.error()) ? Status::OK() : res.error();
    };
    if (owner && b.rank && newest != nullptr && app_->CheckTimestamp(std::min(newest->ts_ms, now)).ok()) {
      // A ranked batch's points carry rank/host; the run's own step series is rankless.
      RETURN_IF_ERROR(run_series(kStepSeries, std::min(newest->ts_ms, now), static_cast<double>(newest->step)));
    }
    if (!run_series_due) return Status::OK();
    RETURN_IF_ERROR(run_series("trainwatch_run_heartbeat_timestamp_seconds", now, now / 1000.0));
    RETURN_IF_ERROR(run_series("trainwatch_run_active", now, next.status == kRunning ? 1 : 0));
    RETURN_IF_ERROR(run_series("trainwatch_run_start_timestamp_seconds", now, next.start_time_ms / 1000.0));
    if (next.total_steps) {
      RETURN_IF_ERROR(run_series("trainwatch_run_total_steps", now, static_cast<double>(*next.total_steps)));
    }
    if (owner && newest != nullptr) {
      if (auto p = next.progress()) RETURN_IF_ERROR(run_series("trainwatch_run_progress_ratio", now, *p));
      if (next.eta_seconds) RETURN_IF_ERROR(run_series("trainwatch_run_eta_seconds", now, *next.eta_seconds));
    }
    return Status::OK();
  });
  if (!s.ok()) return s.Annotate("batch " + b.batch_id);
  if (run_series_due) live.last_series_ts = now;
  live.view_ts[rank_no] = view_ts;
  live.window = std::move(rate.window);
  live.last = rate.last;

  // The step store's points, per series in the order logged.
  std::map<std::string, std::vector<StepPoint>> points;
  for (const BatchPoint& p : b.points) {
    for (const BatchValue& v : p.values) points[v.metric].push_back({p.step, p.ts_ms, v.value});
  }
  std::vector<StepSeriesState*> touched;
  std::vector<Rejection> rejected = b.rejected;

  l.Lock();
  Status db = [&]() -> Status {
    mu_.AssertHeld();  // run in place, under the lock
    RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
    Status st = [&]() -> Status {
      mu_.AssertHeld();  // run in place, under the lock
      for (auto& [metric, pts] : points) {
        ASSIGN_OR_RETURN(StepSeriesState * ss, StepSeriesOf(live, id, rank_no, host, metric));
        RETURN_IF_ERROR(AppendSteps(*ss, std::move(pts)));
        touched.push_back(ss);
      }
      RETURN_IF_ERROR(WriteMedia(id, rank_no, b, &accepted, &rejected));
      Stmt ins(db_, "INSERT OR IGNORE INTO batches(run_id, batch_id) VALUES(?1, ?2)");
      ins.Bind(1, id).Bind(2, b.batch_id);
      RETURN_IF_ERROR(ins.Run());
      if (++live.batches_since_trim >= kTrimEvery) {
        live.batches_since_trim = 0;
        Stmt trim(db_,
                  "DELETE FROM batches WHERE run_id=?1 AND seq <= (SELECT seq FROM batches WHERE run_id=?1 "
                  "ORDER BY seq DESC LIMIT 1 OFFSET ?2)");
        trim.Bind(1, id).Bind(2, kBatchIdsKept);
        RETURN_IF_ERROR(trim.Run());
      }
      return SaveRun(next);
    }();
    if (!st.ok()) {
      (void)Exec(db_, "ROLLBACK");
      return st;
    }
    return Exec(db_, "COMMIT");
  }();
  if (!db.ok()) {
    // The time view is durable; a retry of the batch re-appends it as
    // duplicates and writes the step store then. The series states may hold
    // tails of the rolled-back chunks: read them afresh next time.
    live.steps.clear();
    TW_LOG(Error, "runs: record batch {} of {}: {}", b.batch_id, id, db.ToString());
    return db;
  }
  runs_[id] = std::move(next);
  for (StepSeriesState* ss : touched) {
    Status st = CompactSteps(*ss);
    if (!st.ok()) {
      // The small chunks stay as they are, readable; merging tries again later.
      TW_LOG(Warn, "runs: merge step chunks of {}: {}", id, st.ToString());
      ss->tail.clear();
    }
  }
  return BatchResult{accepted, false, std::move(rejected)};
}

}  // namespace trainwatch::runs
