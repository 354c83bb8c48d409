// RunStore's rich values (docs/runs-api.md "Rich values"): histograms,
// images, text and tables in runs.db's media table, one row per (run, key,
// rank, step); media_keys holds each key's kind.

#include <algorithm>

#include "base/mutex.h"
#include "runs/media.h"
#include "runs/store.h"
#include "runs/store_internal.h"

namespace trainwatch::runs {
namespace {

Json RankJson(int64_t rank) { return rank < 0 ? Json(nullptr) : Json(rank); }

// The entry of a media row read as (rank, step, ts_ms, kind, meta, data).
Json MediaEntry(const std::string& run, Stmt& q) {
  Json e = {{"run", run}, {"rank", RankJson(q.Int(0))}, {"step", q.Int(1)}, {"timestamp", q.Int(2)}};
  std::string kind = q.Text(3);
  Json meta = ParseStored(q.Text(4), Json::object());
  if (kind == "image") {
    for (const char* f : {"format", "width", "height", "caption"}) {
      if (meta.contains(f)) e[f] = meta[f];
    }
    e["bytes"] = static_cast<int64_t>(q.Blob(5).size());
  } else if (kind == "text") {
    e["text"] = std::string(q.Blob(5));
  } else if (kind == "table") {
    Json t = ParseStored(std::string(q.Blob(5)), Json::object());
    e["columns"] = t.value("columns", Json::array());
    e["rows"] = t.value("rows", Json::array());
  } else if (kind == "histogram") {
    e["buckets"] = ParseStored(std::string(q.Blob(5)), Json::array());
  }
  e["kind"] = std::move(kind);
  return e;
}

// "rank=?" when the query names one.
std::string RankClause(const MediaQuery& q, int param) {
  return q.rank ? " AND rank=?" + std::to_string(param) : std::string();
}

// Indices of `n` entries thinned to at most `limit`, evenly spread, first and last kept.
std::vector<size_t> Spread(size_t n, int64_t limit) {
  std::vector<size_t> out;
  if (n == 0) return out;
  size_t k = static_cast<size_t>(std::max<int64_t>(limit, 1));
  if (n <= k) {
    for (size_t i = 0; i < n; i++) out.push_back(i);
    return out;
  }
  if (k == 1) return {n - 1};
  for (size_t j = 0; j < k; j++) {
    size_t i = static_cast<size_t>((static_cast<double>(j) * static_cast<double>(n - 1)) / static_cast<double>(k - 1) + 0.5);
    if (out.empty() || out.back() != i) out.push_back(i);
  }
  return out;
}

// Runs `fn` in one read transaction on `db` (the read connection): what it
// reads is as of one commit.
template <typename F>
Status InReadTransaction(sqlite3* db, F fn) {
  RETURN_IF_ERROR(Exec(db, "BEGIN"));
  Status st = fn();
  (void)Exec(db, "COMMIT");
  return st;
}

}  // namespace

Status RunStore::WriteMedia(const std::string& id, int64_t rank, const BatchRequest& b, size_t* accepted,
                            std::vector<Rejection>* rejected) {
  std::map<std::string, std::string> kinds;  // this batch's keys' kinds
  for (const BatchPoint& p : b.points) {
    for (const RichValue& v : p.rich) {
      auto k = kinds.find(v.key);
      if (k == kinds.end()) {
        Stmt q(db_, "SELECT kind FROM media_keys WHERE run_id=?1 AND key=?2");
        q.Bind(1, id).Bind(2, v.key);
        std::string kind = q.Step() ? q.Text(0) : std::string();
        RETURN_IF_ERROR(q.status());
        if (kind.empty()) {
          Stmt ins(db_, "INSERT INTO media_keys(run_id, key, kind) VALUES(?1, ?2, ?3)");
          ins.Bind(1, id).Bind(2, v.key).Bind(3, v.kind);
          RETURN_IF_ERROR(ins.Run());
          kind = v.kind;
        }
        k = kinds.emplace(v.key, kind).first;
      }
      if (k->second != v.kind) {
        rejected->push_back({p.index, v.key, v.kind + ": the key holds " + k->second + " values"});
        continue;
      }
      Stmt ins(db_,
               "INSERT OR REPLACE INTO media(run_id, key, rank, step, ts_ms, kind, meta, data) "
               "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
      ins.Bind(1, id).Bind(2, v.key).Bind(3, rank).Bind(4, p.step).Bind(5, p.ts_ms).Bind(6, v.kind);
      ins.Bind(7, DumpJson(v.meta)).BindBlob(8, v.data);
      RETURN_IF_ERROR(ins.Run());
      ++*accepted;
    }
  }
  return Status::OK();
}

Result<Json> RunStore::MediaKeys(const std::vector<std::string>& ids) const {
  return RetryOnDamage([&]() -> Result<Json> {
    Json out = Json::array();
    base::MutexLock l(&read_mu_);
    for (const std::string& id : ids) {
      Stmt q(rdb_,
             "SELECT k.key, k.kind, COUNT(m.step), MIN(m.step), MAX(m.step) FROM media_keys k "
             "LEFT JOIN media m ON m.run_id=k.run_id AND m.key=k.key WHERE k.run_id=?1 GROUP BY k.key ORDER BY k.key");
      q.Bind(1, id);
      while (q.Step()) {
        Json e = {{"run", id}, {"key", q.Text(0)}, {"kind", q.Text(1)}, {"steps", q.Int(2)}};
        e["first_step"] = q.OptInt(3) ? Json(q.Int(3)) : Json(nullptr);
        e["last_step"] = q.OptInt(4) ? Json(q.Int(4)) : Json(nullptr);
        out.push_back(std::move(e));
      }
      RETURN_IF_ERROR(q.status());
    }
    return out;
  });
}

Result<Json> RunStore::ReadHistograms(const MediaQuery& mq) const {
  return RetryOnDamage([&]() -> Result<Json> {
    Json out = Json::array();
    base::MutexLock l(&read_mu_);
    Status st = InReadTransaction(rdb_, [&]() -> Status {
      read_mu_.AssertHeld();  // run in place, under the lock
      for (const std::string& id : mq.ids) {
        // The (rank, step)s in range, then the rows of the ones kept.
        std::vector<std::pair<int64_t, int64_t>> steps;
        Stmt q(rdb_, "SELECT rank, step FROM media WHERE run_id=?1 AND key=?2 AND kind='histogram' AND step>=?3 AND "
                     "step<=?4" + RankClause(mq, 5) + " ORDER BY rank, step");
        q.Bind(1, id).Bind(2, mq.key).Bind(3, mq.start.value_or(0)).Bind(4, mq.end.value_or(INT64_MAX));
        if (mq.rank) q.Bind(5, *mq.rank);
        while (q.Step()) steps.emplace_back(q.Int(0), q.Int(1));
        RETURN_IF_ERROR(q.status());
        Stmt r(rdb_, "SELECT rank, step, ts_ms, kind, meta, data FROM media WHERE run_id=?1 AND key=?2 AND rank=?3 "
                     "AND step=?4");  // prepared once, stepped per kept step
        for (size_t i = 0; i < steps.size();) {
          size_t j = i;
          while (j < steps.size() && steps[j].first == steps[i].first) j++;
          for (size_t k : Spread(j - i, mq.limit)) {
            r.Reset();
            r.Bind(1, id).Bind(2, mq.key).Bind(3, steps[i + k].first).Bind(4, steps[i + k].second);
            if (r.Step()) {
              Json e = MediaEntry(id, r);
              e.erase("kind");
              out.push_back(std::move(e));
            }
            RETURN_IF_ERROR(r.status());
          }
          i = j;
        }
      }
      return Status::OK();
    });
    if (!st.ok()) return st;
    return out;
  });
}

Result<Json> RunStore::ReadMedia(const MediaQuery& mq) const {
  return RetryOnDamage([&]() -> Result<Json> {
    Json out = Json::array();
    base::MutexLock l(&read_mu_);
    Status st = InReadTransaction(rdb_, [&]() -> Status {
      read_mu_.AssertHeld();  // run in place, under the lock
      for (const std::string& id : mq.ids) {
        if (mq.step) {
          // Per rank, the last entry at or before the step.
          std::vector<int64_t> ranks;
          Stmt rq(rdb_, "SELECT DISTINCT rank FROM media WHERE run_id=?1 AND key=?2" + RankClause(mq, 3) +
                            " ORDER BY rank");
          rq.Bind(1, id).Bind(2, mq.key);
          if (mq.rank) rq.Bind(3, *mq.rank);
          while (rq.Step()) ranks.push_back(rq.Int(0));
          RETURN_IF_ERROR(rq.status());
          for (int64_t rank : ranks) {
            Stmt q(rdb_, "SELECT rank, step, ts_ms, kind, meta, data FROM media WHERE run_id=?1 AND key=?2 AND rank=?3 "
                         "AND step<=?4 ORDER BY step DESC LIMIT 1");
            q.Bind(1, id).Bind(2, mq.key).Bind(3, rank).Bind(4, *mq.step);
            if (q.Step()) out.push_back(MediaEntry(id, q));
            RETURN_IF_ERROR(q.status());
          }
          continue;
        }
        Stmt q(rdb_, "SELECT rank, step, ts_ms, kind, meta, data FROM media WHERE run_id=?1 AND key=?2 AND step>=?3 "
                     "AND step<=?4" + RankClause(mq, 6) + " ORDER BY rank, step LIMIT ?5");
        q.Bind(1, id).Bind(2, mq.key).Bind(3, mq.start.value_or(0)).Bind(4, mq.end.value_or(INT64_MAX));
        q.Bind(5, mq.limit);
        if (mq.rank) q.Bind(6, *mq.rank);
        while (q.Step()) out.push_back(MediaEntry(id, q));
        RETURN_IF_ERROR(q.status());
      }
      return Status::OK();
    });
    if (!st.ok()) return st;
    return out;
  });
}

Result<MediaContent> RunStore::ReadMediaContent(std::string_view id, std::string_view key, int64_t step,
                                                std::optional<int64_t> rank) const {
  return RetryOnDamage([&]() -> Result<MediaContent> {
    base::MutexLock l(&read_mu_);
    // Without a rank: the lowest one that has an image there (-1, rankless, first).
    Stmt q(rdb_, std::string("SELECT meta, data FROM media WHERE run_id=?1 AND key=?2 AND step=?4 AND kind='image'") +
                     (rank ? " AND rank=?3" : "") + " ORDER BY rank LIMIT 1");
    q.Bind(1, id).Bind(2, key).Bind(4, step);
    if (rank) q.Bind(3, *rank);
    if (!q.Step()) {
      RETURN_IF_ERROR(q.status());
      return Status::NotFound("no image \"" + std::string(key) + "\" at step " + std::to_string(step) + " of run \"" +
                              std::string(id) + "\"");
    }
    Json meta = ParseStored(q.Text(0), Json::object());
    return MediaContent{meta.value("format", std::string("png")), std::string(q.Blob(1))};
  });
}

}  // namespace trainwatch::runs
