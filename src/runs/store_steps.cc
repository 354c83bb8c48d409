// The step store (store.h): every logged value by run, rank, key and step,
// in compressed chunks (steps.h) in runs.db. Writes add one chunk per series
// and batch in the batch's transaction; CompactSteps merges a series' newest
// small chunks; reads merge a series' chunks, the later write of a step
// winning.

#include <algorithm>

#include "base/log.h"
#include "base/mutex.h"
#include "runs/store.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {

Result<std::vector<std::pair<int64_t, int64_t>>> InsertStepChunks(sqlite3* db, int64_t series,
                                                                  const std::vector<StepPoint>& pts,
                                                                  const std::vector<int64_t>& seqs) {
  std::vector<std::pair<int64_t, int64_t>> written;
  std::string data;
  size_t k = 0;
  for (size_t i = 0; i < pts.size(); i += kMaxChunkPoints, k++) {
    size_t n = std::min(kMaxChunkPoints, pts.size() - i);
    data.clear();
    EncodeStepChunk(pts.data() + i, n, &data);
    int64_t min_ts = pts[i].ts_ms, max_ts = pts[i].ts_ms;
    for (size_t j = i; j < i + n; j++) {
      min_ts = std::min(min_ts, pts[j].ts_ms);
      max_ts = std::max(max_ts, pts[j].ts_ms);
    }
    Stmt ins(db, "INSERT INTO step_chunks(seq, series, n, min_step, max_step, min_ts, max_ts, data) "
                 "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    if (k < seqs.size()) ins.Bind(1, seqs[k]);
    else ins.Bind(1, std::optional<int64_t>());
    ins.Bind(2, series).Bind(3, static_cast<int64_t>(n)).Bind(4, pts[i].step).Bind(5, pts[i + n - 1].step);
    ins.Bind(6, min_ts).Bind(7, max_ts).BindBlob(8, data);
    RETURN_IF_ERROR(ins.Run());
    written.emplace_back(sqlite3_last_insert_rowid(db), static_cast<int64_t>(n));
  }
  return written;
}

Result<RunStore::StepSeriesState*> RunStore::StepSeriesOf(Live& live, const std::string& id, int64_t rank,
                                                          const std::string& host, const std::string& metric) {
  if (live.steps_generation != db_generation_.load()) {
    // The database was replaced (damage): these states name rows of the old file.
    live.steps.clear();
    live.steps_generation = db_generation_.load();
  }
  auto [it, fresh] = live.steps.try_emplace({rank, metric});
  StepSeriesState& s = it->second;
  if (!fresh) {
    if (s.host != host) {
      Stmt up(db_, "UPDATE step_series SET host=?1 WHERE id=?2");
      up.Bind(1, host).Bind(2, s.id);
      RETURN_IF_ERROR(up.Run());
      s.host = host;
    }
    return &s;
  }
  Status st = [&]() -> Status {
    mu_.AssertHeld();  // run in place, under the lock
    Stmt q(db_, "SELECT id, host FROM step_series WHERE run_id=?1 AND rank=?2 AND metric=?3");
    q.Bind(1, id).Bind(2, rank).Bind(3, metric);
    if (q.Step()) {
      s.id = q.Int(0);
      s.host = q.Text(1);
      RETURN_IF_ERROR(q.status());
      // The small tail as stored, so merging goes on across restarts.
      Stmt t(db_, "SELECT seq, n FROM step_chunks WHERE series=?1 ORDER BY seq DESC LIMIT ?2");
      t.Bind(1, s.id).Bind(2, static_cast<int64_t>(kMergeTail));
      while (t.Step() && t.Int(1) < kFullChunk) s.tail.emplace_back(t.Int(0), t.Int(1));
      RETURN_IF_ERROR(t.status());
      std::reverse(s.tail.begin(), s.tail.end());
      if (s.host != host) {
        Stmt up(db_, "UPDATE step_series SET host=?1 WHERE id=?2");
        up.Bind(1, host).Bind(2, s.id);
        RETURN_IF_ERROR(up.Run());
        s.host = host;
      }
      return Status::OK();
    }
    RETURN_IF_ERROR(q.status());
    Stmt ins(db_, "INSERT INTO step_series(run_id, rank, host, metric) VALUES(?1, ?2, ?3, ?4)");
    ins.Bind(1, id).Bind(2, rank).Bind(3, host).Bind(4, metric);
    RETURN_IF_ERROR(ins.Run());
    s.id = sqlite3_last_insert_rowid(db_);
    s.host = host;
    return Status::OK();
  }();
  if (!st.ok()) {
    live.steps.erase(it);
    return st;
  }
  return &s;
}

Status RunStore::AppendSteps(StepSeriesState& s, std::vector<StepPoint> pts) {
  if (pts.empty()) return Status::OK();
  SortLastWins(&pts);
  ASSIGN_OR_RETURN(auto written, InsertStepChunks(db_, s.id, pts, {}));
  for (const auto& w : written) {
    if (w.second >= kFullChunk) s.tail.clear();  // a full chunk ends the tail
    else s.tail.push_back(w);
  }
  return Status::OK();
}

Status RunStore::CompactSteps(StepSeriesState& s) {
  if (s.tail.size() < kMergeTail) return Status::OK();
  RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
  std::vector<std::pair<int64_t, int64_t>> written;
  Status st = [&]() -> Status {
    mu_.AssertHeld();  // run in place, under the lock
    std::vector<StepPoint> pts;
    std::vector<int64_t> seqs;
    for (const auto& [seq, n] : s.tail) {
      Stmt q(db_, "SELECT data FROM step_chunks WHERE seq=?1 AND series=?2");
      q.Bind(1, seq).Bind(2, s.id);
      if (!q.Step()) {
        RETURN_IF_ERROR(q.status());
        return Status::Corruption("step store: chunk " + std::to_string(seq) + " of series " +
                                  std::to_string(s.id) + " is gone");
      }
      RETURN_IF_ERROR(DecodeStepChunk(q.Blob(0), &pts));
      seqs.push_back(seq);
    }
    SortLastWins(&pts);  // in seq order: the later chunk's write of a step wins
    Stmt del(db_, "DELETE FROM step_chunks WHERE series=?1 AND seq>=?2 AND seq<=?3");
    del.Bind(1, s.id).Bind(2, seqs.front()).Bind(3, seqs.back());
    RETURN_IF_ERROR(del.Run());
    // The merged chunks take the newest of the tail's seqs, in order, so
    // they stay after every older chunk of the series.
    size_t need = (pts.size() + kMaxChunkPoints - 1) / kMaxChunkPoints;
    std::vector<int64_t> keep(seqs.end() - static_cast<std::ptrdiff_t>(std::min(need, seqs.size())), seqs.end());
    ASSIGN_OR_RETURN(written, InsertStepChunks(db_, s.id, pts, keep));
    return Status::OK();
  }();
  if (!st.ok()) {
    (void)Exec(db_, "ROLLBACK");
    return st;
  }
  RETURN_IF_ERROR(Exec(db_, "COMMIT"));
  s.tail.clear();
  for (const auto& w : written) {
    if (w.second < kFullChunk) s.tail.push_back(w);
  }
  return Status::OK();
}

Result<std::vector<StepSeries>> RunStore::ReadSteps(std::string_view id, const StepQuery& q) const {
  return RetryOnDamage([&] { return DoReadSteps(id, q); });
}

Result<std::vector<StepSeries>> RunStore::DoReadSteps(std::string_view id_view, const StepQuery& q) const {
  std::string id(id_view);
  {
    base::MutexLock l(&mu_);
    if (!runs_.contains(id)) return Status::NotFound("run \"" + id + "\" not found");
  }
  struct Row {
    int64_t sid;
    StepSeries s;
    std::vector<std::string> chunks;  // in seq order
  };
  std::vector<Row> rows;
  {
    base::MutexLock l(&read_mu_);
    // One read transaction: the series and their chunks as of one commit.
    RETURN_IF_ERROR(Exec(rdb_, "BEGIN"));
    Status st = [&]() -> Status {
      read_mu_.AssertHeld();  // run in place, under the lock
      Stmt ss(rdb_, "SELECT id, rank, host, metric FROM step_series WHERE run_id=?1 ORDER BY metric, rank");
      ss.Bind(1, id);
      while (ss.Step()) {
        std::string metric = ss.Text(3);
        if (!q.metrics.empty() && std::find(q.metrics.begin(), q.metrics.end(), metric) == q.metrics.end()) continue;
        int64_t rank = ss.Int(1);
        if (q.rank && *q.rank != rank) continue;
        Row r;
        r.sid = ss.Int(0);
        r.s.metric = std::move(metric);
        if (rank >= 0) {
          r.s.rank = rank;
          r.s.host = ss.Text(2);
        }
        rows.push_back(std::move(r));
      }
      RETURN_IF_ERROR(ss.status());
      for (Row& r : rows) {
        Stmt c(rdb_, "SELECT data FROM step_chunks WHERE series=?1 AND max_step>=?2 AND min_step<=?3 ORDER BY seq");
        c.Bind(1, r.sid).Bind(2, q.start_step.value_or(INT64_MIN)).Bind(3, q.end_step.value_or(INT64_MAX));
        while (c.Step()) r.chunks.emplace_back(c.Blob(0));
        RETURN_IF_ERROR(c.status());
      }
      return Status::OK();
    }();
    (void)Exec(rdb_, "COMMIT");
    RETURN_IF_ERROR(st);
  }
  // Decoding needs no lock.
  std::vector<StepSeries> out;
  out.reserve(rows.size());
  for (Row& r : rows) {
    for (const std::string& c : r.chunks) {
      Status st = DecodeStepChunk(c, &r.s.points);
      if (!st.ok()) return st.Annotate("run " + id + " metric " + r.s.metric);
    }
    r.chunks.clear();
    SortLastWins(&r.s.points);
    auto& p = r.s.points;
    auto keep = [&](const StepPoint& x) {
      return (!q.start_step || x.step >= *q.start_step) && (!q.end_step || x.step <= *q.end_step) &&
             (!q.start_ms || x.ts_ms >= *q.start_ms) && (!q.end_ms || x.ts_ms <= *q.end_ms);
    };
    if (q.start_step || q.end_step || q.start_ms || q.end_ms) {
      p.erase(std::remove_if(p.begin(), p.end(), [&](const StepPoint& x) { return !keep(x); }), p.end());
    }
    out.push_back(std::move(r.s));
  }
  return out;
}

}  // namespace trainwatch::runs
