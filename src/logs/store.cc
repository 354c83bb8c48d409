#include "logs/store.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cinttypes>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "logs/store_internal.h"

namespace trainwatch::logs {

namespace {

constexpr size_t kCompressAbove = 512;
constexpr int kFlagTruncated = 1, kFlagZstd = 2;

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS streams(id INTEGER PRIMARY KEY, labels TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS lines(id INTEGER PRIMARY KEY, t INTEGER NOT NULL, stream INTEGER NOT NULL,
  level TEXT NOT NULL, flags INTEGER NOT NULL, message BLOB NOT NULL, fields TEXT);
CREATE INDEX IF NOT EXISTS lines_t ON lines(t);
CREATE INDEX IF NOT EXISTS lines_stream_t ON lines(stream, t);
CREATE VIRTUAL TABLE IF NOT EXISTS lines_fts USING fts5(message, content='', columnsize=0);
)sql";

std::string PartitionName(int64_t start_ms) { return "logs-" + std::to_string(start_ms / 1000) + ".db"; }

std::string LabelsJson(const model::Labels& l) {
  std::string out = "{";
  for (const model::Label& p : l) {
    if (out.size() > 1) out += ',';
    AppendJsonEscaped(&out, p.name);
    out += ':';
    AppendJsonEscaped(&out, p.value);
  }
  return out + "}";
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

Status SqliteError(sqlite3* db, std::string_view what) {
  return Status::IOError("logs: " + std::string(what) + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    Status s = Status::IOError(std::string("logs: sqlite: ") + (err ? err : "error"));
    sqlite3_free(err);
    return s;
  }
  return Status::OK();
}

Stmt::Stmt(sqlite3* db, const std::string& sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &s_, nullptr) != SQLITE_OK) {
    status_ = SqliteError(db, "prepare");
  }
}

bool Stmt::Step() {
  if (!status_.ok()) return false;
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) status_ = SqliteError(db_, "query");
  return false;
}

std::string_view Stmt::Text(int c) const {
  const char* p = static_cast<const char*>(sqlite3_column_blob(s_, c));
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string_view();
}

LogStore::Partition::~Partition() {
  sqlite3_finalize(ins_line);
  sqlite3_finalize(ins_fts);
  sqlite3_finalize(ins_stream);
  if (db) sqlite3_close(db);
}

Result<std::unique_ptr<LogStore>> LogStore::Open(const StoreOptions& opts) {
  if (opts.partition_ms <= 0) return Status::InvalidArgument("logs: partition duration must be positive");
  std::unique_ptr<LogStore> s(new LogStore(opts));
  Status st = s->Init();
  if (st.ok() && (opts.retention_ms > 0 || opts.retention_bytes > 0)) st = s->ApplyRetention();
  if (!st.ok()) return st.Annotate("open log store " + opts.dir);
  return s;
}

LogStore::LogStore(const StoreOptions& o) : opts_(o) {}
LogStore::~LogStore() { Shutdown(); }

Status LogStore::Init() {
  RETURN_IF_ERROR(file::MkdirAll(opts_.dir));
  ASSIGN_OR_RETURN(auto names, file::ListDir(opts_.dir));
  std::lock_guard<std::mutex> l(mu_);
  for (const std::string& n : names) {
    if (!n.starts_with("logs-") || !n.ends_with(".db")) continue;
    int64_t secs = 0;
    if (std::sscanf(n.c_str(), "logs-%" SCNd64 ".db", &secs) != 1) continue;
    ASSIGN_OR_RETURN(Partition * p, GetPartition(secs * 1000, false));
    Stmt q(p->db, "SELECT max(t) FROM lines");
    if (q.Step() && !q.IsNull(0)) newest_ms_ = std::max(newest_ms_, q.Int(0) / 1000000);
  }
  TW_LOG(Info, "logs: opened {} ({} partitions)", opts_.dir, partitions_.size());
  return Status::OK();
}

int64_t LogStore::PartitionStart(int64_t t_ns) const {
  int64_t ms = t_ns >= 0 ? t_ns / 1000000 : -((-t_ns + 999999) / 1000000);
  int64_t k = ms >= 0 ? ms / opts_.partition_ms : -((-ms + opts_.partition_ms - 1) / opts_.partition_ms);
  return k * opts_.partition_ms;
}

Result<LogStore::Partition*> LogStore::GetPartition(int64_t start_ms, bool create) {
  auto it = partitions_.find(start_ms);
  if (it != partitions_.end()) return it->second.get();
  auto p = std::make_unique<Partition>();
  p->start_ms = start_ms;
  p->path = opts_.dir + "/" + PartitionName(start_ms);
  bool existed = file::Exists(p->path);
  if (sqlite3_open_v2(p->path.c_str(), &p->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    return SqliteError(p->db, "open " + p->path);
  }
  sqlite3_busy_timeout(p->db, 5000);
  RETURN_IF_ERROR(Exec(p->db, "PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(Exec(p->db, opts_.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(Exec(p->db, "PRAGMA cache_size=-8000"));
  RETURN_IF_ERROR(Exec(p->db, kSchema));
  if (!existed) RETURN_IF_ERROR(file::SyncDir(opts_.dir));
  {
    Stmt q(p->db, "SELECT id, labels FROM streams");
    while (q.Step()) {
      auto j = nlohmann::json::parse(q.Text(1), nullptr, false);
      if (!j.is_object()) return Status::Corruption("logs: " + p->path + ": stream " + std::to_string(q.Int(0)) + ": bad labels");
      std::vector<model::Label> ls;
      for (auto& [k, v] : j.items()) ls.push_back({k, v.is_string() ? v.get<std::string>() : v.dump()});
      model::Labels labels(std::move(ls));
      p->stream_ids[labels.ToString()] = q.Int(0);
      p->streams[q.Int(0)] = std::move(labels);
    }
    RETURN_IF_ERROR(q.status());
  }
  auto prep = [&](const char* sql, sqlite3_stmt** out) -> Status {
    if (sqlite3_prepare_v3(p->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, nullptr) != SQLITE_OK) {
      return SqliteError(p->db, "prepare");
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(prep("INSERT INTO lines(t, stream, level, flags, message, fields) VALUES(?,?,?,?,?,?)", &p->ins_line));
  RETURN_IF_ERROR(prep("INSERT INTO lines_fts(rowid, message) VALUES(?,?)", &p->ins_fts));
  RETURN_IF_ERROR(prep("INSERT INTO streams(labels) VALUES(?)", &p->ins_stream));
  (void)create;
  Partition* raw = p.get();
  partitions_.emplace(start_ms, std::move(p));
  return raw;
}

Status LogStore::AppendToPartition(Partition* p, std::vector<Record*>& recs) {
  // New streams first, in their own transaction: an id is never reused, so a
  // stream row without lines (a failed append) is harmless.
  std::vector<std::pair<std::string, const model::Labels*>> fresh;
  const model::Labels* prev = nullptr;
  for (Record* r : recs) {
    if (prev != nullptr && *prev == r->labels) continue;  // batches are mostly one stream
    prev = &r->labels;
    std::string key = r->labels.ToString();
    if (p->stream_ids.count(key) == 0 &&
        std::none_of(fresh.begin(), fresh.end(), [&](auto& f) { return f.first == key; })) {
      fresh.emplace_back(std::move(key), &r->labels);
    }
  }
  if (!fresh.empty()) {
    RETURN_IF_ERROR(Exec(p->db, "BEGIN IMMEDIATE"));
    std::vector<std::pair<std::string, int64_t>> ids;
    for (auto& [key, labels] : fresh) {
      std::string js = LabelsJson(*labels);
      sqlite3_reset(p->ins_stream);
      sqlite3_bind_text(p->ins_stream, 1, js.data(), static_cast<int>(js.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(p->ins_stream) != SQLITE_DONE) {
        Status s = SqliteError(p->db, "insert stream");
        (void)Exec(p->db, "ROLLBACK");
        return s;
      }
      ids.emplace_back(key, sqlite3_last_insert_rowid(p->db));
    }
    if (Status s = Exec(p->db, "COMMIT"); !s.ok()) {
      (void)Exec(p->db, "ROLLBACK");
      return s;
    }
    for (size_t i = 0; i < fresh.size(); ++i) {
      p->stream_ids[ids[i].first] = ids[i].second;
      p->streams[ids[i].second] = *fresh[i].second;
    }
  }
  RETURN_IF_ERROR(Exec(p->db, "BEGIN IMMEDIATE"));
  std::string compressed;
  const model::Labels* last_labels = nullptr;
  int64_t last_id = 0;
  for (Record* r : recs) {
    if (last_labels == nullptr || !(*last_labels == r->labels)) {
      last_id = p->stream_ids.at(r->labels.ToString());
      last_labels = &r->labels;
    }
    int flags = r->truncated ? kFlagTruncated : 0;
    std::string_view msg = r->message;
    if (msg.size() > kCompressAbove) {
      compressed.resize(ZSTD_compressBound(msg.size()));
      size_t n = ZSTD_compress(compressed.data(), compressed.size(), msg.data(), msg.size(), 3);
      if (!ZSTD_isError(n) && n < msg.size()) {
        compressed.resize(n);
        msg = compressed;
        flags |= kFlagZstd;
      }
    }
    sqlite3_stmt* s = p->ins_line;
    sqlite3_reset(s);
    sqlite3_bind_int64(s, 1, r->time_ns);
    sqlite3_bind_int64(s, 2, last_id);
    sqlite3_bind_text(s, 3, r->level.data(), static_cast<int>(r->level.size()), SQLITE_STATIC);
    sqlite3_bind_int(s, 4, flags);
    sqlite3_bind_blob(s, 5, msg.data(), static_cast<int>(msg.size()), SQLITE_STATIC);
    if (r->fields.empty()) sqlite3_bind_null(s, 6);
    else sqlite3_bind_text(s, 6, r->fields.data(), static_cast<int>(r->fields.size()), SQLITE_STATIC);
    int rc = sqlite3_step(s);
    int64_t id = sqlite3_last_insert_rowid(p->db);
    if (rc == SQLITE_DONE) {
      sqlite3_stmt* f = p->ins_fts;
      sqlite3_reset(f);
      sqlite3_bind_int64(f, 1, id);
      sqlite3_bind_text(f, 2, r->message.data(), static_cast<int>(r->message.size()), SQLITE_STATIC);
      rc = sqlite3_step(f);
    }
    if (rc != SQLITE_DONE) {
      Status st = SqliteError(p->db, "insert line");
      (void)Exec(p->db, "ROLLBACK");
      return st;
    }
  }
  if (Status s = Exec(p->db, "COMMIT"); !s.ok()) {
    (void)Exec(p->db, "ROLLBACK");
    return s;
  }
  return Status::OK();
}

Status LogStore::Append(std::vector<Record> records) {
  if (records.empty()) return Status::OK();
  {
    std::lock_guard<std::mutex> l(mu_);
    std::map<int64_t, std::vector<Record*>> by_part;
    for (Record& r : records) by_part[PartitionStart(r.time_ns)].push_back(&r);
    bool new_partition = false;
    for (auto& [start, recs] : by_part) {
      new_partition = new_partition || partitions_.count(start) == 0;
      ASSIGN_OR_RETURN(Partition * p, GetPartition(start, true));
      RETURN_IF_ERROR(AppendToPartition(p, recs));
      for (Record* r : recs) newest_ms_ = std::max(newest_ms_, r->time_ns / 1000000);
    }
    appended_ += records.size();
    int64_t now = NowMillis();
    if ((opts_.retention_ms > 0 || opts_.retention_bytes > 0) && (new_partition || now - last_retention_ms_ > 60000)) {
      last_retention_ms_ = now;
      mu_.unlock();
      Status s = ApplyRetention();
      mu_.lock();
      if (!s.ok()) TW_LOG(Error, "logs: retention: {}", s.ToString());
    }
  }
  if (observer_ != nullptr) observer_->Observe(records);
  {
    std::lock_guard<std::mutex> l(tail_mu_);
    for (Record& r : records) {
      tail_.push_back(std::move(r));
      ++tail_seq_;
      if (tail_.size() > opts_.tail_buffer) tail_.pop_front();
    }
  }
  tail_cv_.notify_all();
  return Status::OK();
}

Status LogStore::ApplyRetention() {
  std::lock_guard<std::mutex> l(mu_);
  auto drop = [&](std::map<int64_t, std::unique_ptr<Partition>>::iterator it) -> Status {
    std::string path = it->second->path;
    TW_LOG(Info, "logs: retention drops partition {}", path);
    partitions_.erase(it);  // closes the connection
    for (const char* suffix : {"", "-wal", "-shm"}) RETURN_IF_ERROR(file::RemoveAll(path + suffix));
    return file::SyncDir(opts_.dir);
  };
  if (opts_.retention_ms > 0 && newest_ms_ != INT64_MIN) {
    while (!partitions_.empty()) {
      auto it = partitions_.begin();
      if (it->first + opts_.partition_ms > newest_ms_ - opts_.retention_ms) break;
      RETURN_IF_ERROR(drop(it));
    }
  }
  if (opts_.retention_bytes > 0) {
    for (;;) {
      uint64_t total = 0;
      for (auto& [start, p] : partitions_) total += FileSize(p->path) + FileSize(p->path + "-wal");
      // The newest partition is kept even when alone it is over the limit.
      if (total <= opts_.retention_bytes || partitions_.size() <= 1) break;
      RETURN_IF_ERROR(drop(partitions_.begin()));
    }
  }
  return Status::OK();
}

LogStore::Stats LogStore::GetStats() {
  std::lock_guard<std::mutex> l(mu_);
  Stats s;
  s.partitions = partitions_.size();
  for (auto& [start, p] : partitions_) s.bytes += FileSize(p->path) + FileSize(p->path + "-wal");
  s.appended_lines = appended_;
  return s;
}

std::vector<Record> LogStore::WaitNew(uint64_t* seq, int64_t timeout_ms) {
  std::unique_lock<std::mutex> l(tail_mu_);
  tail_cv_.wait_for(l, std::chrono::milliseconds(timeout_ms), [&] { return shutdown_ || tail_seq_ > *seq; });
  std::vector<Record> out;
  if (tail_seq_ <= *seq) return out;
  uint64_t first = tail_seq_ - tail_.size() + 1;
  for (uint64_t s = std::max(*seq + 1, first); s <= tail_seq_; ++s) out.push_back(tail_[s - first]);
  *seq = tail_seq_;
  return out;
}

uint64_t LogStore::LastSeq() {
  std::lock_guard<std::mutex> l(tail_mu_);
  return tail_seq_;
}

void LogStore::Shutdown() {
  {
    std::lock_guard<std::mutex> l(tail_mu_);
    shutdown_ = true;
  }
  tail_cv_.notify_all();
}

bool LogStore::IsShutdown() {
  std::lock_guard<std::mutex> l(tail_mu_);
  return shutdown_;
}

}  // namespace trainwatch::logs
