#pragma once
// Internal to the log store: a partition's SQLite connection, its prepared
// statements and its streams; a small statement wrapper.

#include <sqlite3.h>

#include <cstdint>
#include <deque>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "logs/block.h"
#include "logs/store.h"
#include "model/labels.h"

namespace trainwatch::logs {

struct LogStore::Partition {
  int64_t start_ms = 0;
  std::string path;
  // The connection and its statements: null while closed (LogStore::Touch
  // reopens it); lru is its place in LogStore::open_ while open.
  sqlite3* db = nullptr;
  std::list<Partition*>::iterator lru;
  sqlite3_stmt* ins_block = nullptr;
  sqlite3_stmt* ins_fts = nullptr;
  sqlite3_stmt* ins_chunk = nullptr;
  sqlite3_stmt* ins_stream = nullptr;
  sqlite3_stmt* has_batch = nullptr;
  sqlite3_stmt* ins_batch = nullptr;
  sqlite3_stmt* begin = nullptr;   // BEGIN IMMEDIATE
  sqlite3_stmt* commit = nullptr;  // COMMIT
  std::unordered_map<std::string, int64_t> stream_ids;  // labels.ToString() -> id
  std::unordered_map<int64_t, model::Labels> streams;   // id -> labels
  // Lines in `chunks` per stream id, and their sum; mirrors the table.
  std::unordered_map<int64_t, uint32_t> pending_count;
  uint64_t pending_total = 0;
  uint64_t next_seq = 1;  // the sequence number of the next line appended
  // Finalizes the statements and closes the connection (null after).
  void Close();
  ~Partition() { Close(); }
};

// A line read for migration (schema 1 `lines`, schema 2 `pending`), owning its text.
struct PendingRow {
  uint64_t seq = 0;
  int64_t t = 0;
  std::string level, message, fields;
  uint8_t flags = 0;
};

// A prepared statement; Step() true while rows remain, errors kept in status().
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& sql);
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  void Bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Bind(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  bool Step();
  void Reset() { sqlite3_reset(s_); }
  int64_t Int(int c) const { return sqlite3_column_int64(s_, c); }
  std::string_view Text(int c) const;
  bool IsNull(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
  const Status& status() const { return status_; }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  Status status_;
};

Status Exec(sqlite3* db, const char* sql);
// Inserts `lines` (of one stream, in sequence order) as one row of `chunks`.
Status InsertChunk(LogStore::Partition* p, int64_t stream, const std::vector<LineRef>& lines);
// Appends the lines of a stream's chunks, in sequence order, to *lines; they
// point into *readers.
Status LoadChunks(LogStore::Partition* p, int64_t stream, std::deque<BlockReader>* readers,
                  std::vector<LineRef>* lines);
Status SqliteError(sqlite3* db, std::string_view what);

}  // namespace trainwatch::logs
