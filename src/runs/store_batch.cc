// RunStore::WriteBatch: a batch of logged points into the TSDB, then its id
// and the run's new state into SQLite (see store.h on durability).

#include <algorithm>
#include <unordered_map>

#include "base/log.h"
#include "ingest/import.h"
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
  // A point stamped too far ahead of the server's clock (or older than the
  // retention) is rejected on its own, as a value that cannot be stored is:
  // the rest of the batch is stored and the batch id recorded.
  bool refused = false;
  for (const BatchPoint& p : b.points) refused = refused || !app_->CheckTimestamp(p.ts_ms).ok();
  if (!refused) return WriteCheckedBatch(id, b);
  BatchRequest kept = b;
  kept.points.clear();
  for (const BatchPoint& p : b.points) {
    Status st = app_->CheckTimestamp(p.ts_ms);
    if (st.ok()) {
      kept.points.push_back(p);
    } else {
      kept.rejected.push_back(Rejection{p.index, std::nullopt, "ts: " + st.message()});
    }
  }
  std::stable_sort(kept.rejected.begin(), kept.rejected.end(),
            [](const Rejection& x, const Rejection& y) { return x.point < y.point; });
  return WriteCheckedBatch(id, kept);
}

Result<BatchResult> RunStore::WriteCheckedBatch(std::string_view id_view, const BatchRequest& b) {
  std::string id(id_view);
  std::unique_lock<std::mutex> l(mu_);
  if (!runs_.contains(id)) return Status::NotFound("run \"" + id + "\" not found");
  Live& live = LiveOf(id);
  l.unlock();
  std::lock_guard<std::mutex> w(live.write_mu);
  l.lock();
  {
    Stmt q(db_, "SELECT 1 FROM batches WHERE run_id=?1 AND batch_id=?2");
    q.Bind(1, id).Bind(2, b.batch_id);
    bool dup = q.Step();
    RETURN_IF_ERROR(q.status());
    if (dup) return BatchResult{0, true, {}};
  }
  Run r = runs_.at(id);
  l.unlock();

  const bool owner = !b.rank || *b.rank == 0;
  std::string rank = b.rank ? std::to_string(*b.rank) : std::string();
  std::string host = b.rank ? (b.host.empty() ? r.host : b.host) : std::string();
  // The newest point by timestamp sets the run's step.
  const BatchPoint* newest = nullptr;
  for (const BatchPoint& p : b.points) {
    if (newest == nullptr || p.ts_ms >= newest->ts_ms) newest = &p;
  }

  Run next = r;
  int64_t now = Now();
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

  // Samples: each value and the point's step under the same labels, so x=step
  // is a join on timestamp; then the run series.
  size_t accepted = 0;
  int64_t series_ts = std::max(now, live.last_series_ts + 1);
  Status s = ingest::AppendAndCommit(*app_, [&](storage::Appender* app) -> Status {
    std::unordered_map<std::string, storage::SeriesRef> refs;
    auto add = [&](const std::string& metric, int64_t t, double v) -> Status {
      storage::SeriesRef& ref = refs[metric];
      if (ref != 0 && app->AppendByRef(ref, t, v)) return Status::OK();
      auto res = app->Append(0, RunLabels(metric, r, {{"rank", rank}, {"host", host}}), t, v);
      if (!res.ok()) return res.error().Annotate(metric);
      ref = *res;
      return Status::OK();
    };
    const std::string step_name(kStepSeries);
    for (const BatchPoint& p : b.points) {
      for (const BatchValue& v : p.values) RETURN_IF_ERROR(add(v.metric, p.ts_ms, v.value));
      accepted += p.values.size();
      RETURN_IF_ERROR(add(step_name, p.ts_ms, static_cast<double>(p.step)));
    }
    auto run_series = [&](std::string_view name, int64_t t, double v) -> Status {
      auto res = app->Append(0, RunLabels(name, next), t, v);
      return res.ok() ? Status::OK() : res.error();
    };
    if (owner && b.rank && newest != nullptr) {
      // A ranked batch's points carry rank/host; the run's own step series is rankless.
      RETURN_IF_ERROR(run_series(kStepSeries, newest->ts_ms, static_cast<double>(newest->step)));
    }
    RETURN_IF_ERROR(run_series("trainwatch_run_heartbeat_timestamp_seconds", series_ts, now / 1000.0));
    RETURN_IF_ERROR(run_series("trainwatch_run_active", series_ts, next.status == kRunning ? 1 : 0));
    RETURN_IF_ERROR(run_series("trainwatch_run_start_timestamp_seconds", series_ts, next.start_time_ms / 1000.0));
    if (next.total_steps) {
      RETURN_IF_ERROR(run_series("trainwatch_run_total_steps", series_ts, static_cast<double>(*next.total_steps)));
    }
    if (owner && newest != nullptr) {
      if (auto p = next.progress()) RETURN_IF_ERROR(run_series("trainwatch_run_progress_ratio", series_ts, *p));
      if (next.eta_seconds) RETURN_IF_ERROR(run_series("trainwatch_run_eta_seconds", series_ts, *next.eta_seconds));
    }
    return Status::OK();
  });
  if (!s.ok()) return s.Annotate("batch " + b.batch_id);
  live.last_series_ts = series_ts;
  live.window = std::move(rate.window);
  live.last = rate.last;

  l.lock();
  Status db = [&]() -> Status {
    RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
    Status st = [&]() -> Status {
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
    // The samples are durable; a retry of the batch re-appends them as duplicates.
    TW_LOG(Error, "runs: record batch {} of {}: {}", b.batch_id, id, db.ToString());
    return db;
  }
  runs_[id] = std::move(next);
  return BatchResult{accepted, false, b.rejected};
}

}  // namespace trainwatch::runs
