#pragma once
// RunStore internals shared by store*.cc: per-run live state and a thin
// SQLite statement wrapper.

#include <sqlite3.h>

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "model/labels.h"
#include "runs/store.h"

namespace trainwatch::runs {

// A step-store series being written: its row id and the newest chunks that
// are still small (fewer than kFullChunk points), which CompactSteps merges.
struct RunStore::StepSeriesState {
  int64_t id = 0;
  std::string host;
  std::vector<std::pair<int64_t, int64_t>> tail;  // (seq, points), oldest first
};
inline constexpr int64_t kFullChunk = 4096;  // a chunk this big is left alone
inline constexpr size_t kMergeTail = 8;      // merge the small tail once it has this many chunks

struct RunStore::Live {
  base::Mutex write_mu;  // serializes the mutations of one run
  // Guarded by write_mu:
  std::deque<std::pair<int64_t, int64_t>> window;  // (ts ms, step) of recent rank-0 points, >= 1 s apart
  std::optional<std::pair<int64_t, int64_t>> last;  // the newest rank-0 point
  int64_t last_series_ts = 0;    // timestamp of the last run-series sample written
  uint64_t batches_since_trim = 0;
  std::map<int64_t, int64_t> view_ts;  // by rank (-1: none): time of the last time-view sample
  // Step-store series written since the store opened, by (rank or -1, metric),
  // of the database generation `steps_generation` (RunStore::db_generation_).
  std::map<std::pair<int64_t, std::string>, StepSeriesState> steps;
  uint64_t steps_generation = 0;
};

// One prepared statement; Status-returning steps. Not thread-safe.
// A SQLite result code as a Status: NoSpace for a full disk (the same write
// may succeed later: 507 with Retry-After), Corruption for a damaged file
// (SQLITE_CORRUPT, SQLITE_NOTADB), IOError otherwise.
inline Status SqliteStatus(int rc, std::string message) {
  switch (rc & 0xff) {
    case SQLITE_FULL: return Status::NoSpace(std::move(message));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Status::Corruption(std::move(message));
    default: return Status::IOError(std::move(message));
  }
}

class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &st_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, std::string_view s) {
    Check(sqlite3_bind_text(st_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& Bind(int i, int64_t v) { Check(sqlite3_bind_int64(st_, i, v)); return *this; }
  Stmt& Bind(int i, double v) { Check(sqlite3_bind_double(st_, i, v)); return *this; }
  Stmt& BindBlob(int i, std::string_view b) {
    Check(sqlite3_bind_blob(st_, i, b.data(), static_cast<int>(b.size()), SQLITE_TRANSIENT));
    return *this;
  }
  template <typename T>
  Stmt& Bind(int i, const std::optional<T>& v) {
    if (v) return Bind(i, *v);
    Check(sqlite3_bind_null(st_, i));
    return *this;
  }
  // Steps once: true with a row, false when done; errors in status().
  bool Step() {
    if (rc_ != SQLITE_OK) return false;
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) rc_ = rc;
    return false;
  }
  // Makes the statement ready to step again with new bindings (an error
  // stays in status()).
  void Reset() {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }
  // Runs to completion.
  Status Run() {
    while (Step()) {
    }
    return status();
  }
  Status status() const {
    if (rc_ == SQLITE_OK) return Status::OK();
    return SqliteStatus(rc_, std::string("runs.db: ") + sqlite3_errmsg(db_));
  }
  bool IsNull(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  int64_t Int(int col) const { return sqlite3_column_int64(st_, col); }
  double Double(int col) const { return sqlite3_column_double(st_, col); }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(st_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(st_, col)) : std::string();
  }
  std::string_view Blob(int col) const {
    const void* p = sqlite3_column_blob(st_, col);
    return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st_, col)))
             : std::string_view();
  }
  std::optional<int64_t> OptInt(int col) const { return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col)); }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && rc_ == SQLITE_OK) rc_ = rc;
  }
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
  int rc_ = SQLITE_OK;
};

Status Exec(sqlite3* db, const char* sql);

// A JSON column as stored. Rows written before bodies were depth-checked may
// nest deeper than the API accepts now; such a field (or one that does not
// parse) reads as `fallback` rather than risking the stack in a later copy.
Json ParseStored(const std::string& text, Json fallback);

// A run's TSDB series refused by a TSDB series limit (--storage.max-series or
// a label bound; counted there): skipped, the points stay in runs.db's step store.
inline bool SkippedAtSeriesLimit(const Status& s) { return s.code() == StatusCode::kResourceExhausted; }

// {__name__=name, project, run} plus `extra` labels (empty values dropped).
model::Labels RunLabels(std::string_view name, const Run& r,
                        std::initializer_list<std::pair<std::string_view, std::string_view>> extra = {});

inline constexpr std::string_view kStepSeries = "trainwatch_run_step";

// Inserts `pts` (strictly increasing steps) as chunks of at most
// kMaxChunkPoints points into step series `series`; `seqs` (oldest first,
// one per chunk, or empty for fresh rowids) names their rows. Returns the
// (seq, points) of each chunk written.
Result<std::vector<std::pair<int64_t, int64_t>>> InsertStepChunks(sqlite3* db, int64_t series,
                                                                  const std::vector<StepPoint>& pts,
                                                                  const std::vector<int64_t>& seqs);

}  // namespace trainwatch::runs
