#include "logs/store.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <deque>
#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"
#include "base/mutex.h"
#include "logs/block.h"
#include "logs/store_internal.h"

namespace trainwatch::logs {

namespace {

// Schema 3: blocks, and chunks of the lines waiting for one
// (docs/format/logs.md). Schema 1 (a row per line in `lines`, with its FTS5
// index) and schema 2 (a `pending` row per waiting line) are migrated when a
// partition is opened.
constexpr int kSchemaVersion = 3;
constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS streams(id INTEGER PRIMARY KEY, labels TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS blocks(id INTEGER PRIMARY KEY, stream INTEGER NOT NULL, n INTEGER NOT NULL,
  t_min INTEGER NOT NULL, t_max INTEGER NOT NULL, seq_min INTEGER NOT NULL, seq_max INTEGER NOT NULL,
  levels INTEGER NOT NULL, meta BLOB NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS blocks_t ON blocks(t_max);
CREATE INDEX IF NOT EXISTS blocks_seq ON blocks(seq_max);
CREATE VIRTUAL TABLE IF NOT EXISTS blocks_fts USING fts5(text, content='', columnsize=0, detail=none,
  tokenize='ascii');
CREATE TABLE IF NOT EXISTS chunks(id INTEGER PRIMARY KEY, stream INTEGER NOT NULL, n INTEGER NOT NULL,
  t_min INTEGER NOT NULL, t_max INTEGER NOT NULL, seq_min INTEGER NOT NULL, seq_max INTEGER NOT NULL,
  levels INTEGER NOT NULL, meta BLOB NOT NULL, body BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_stream ON chunks(stream);
CREATE TABLE IF NOT EXISTS batches(id TEXT PRIMARY KEY) WITHOUT ROWID;
)sql";

// A block also closes at this many bytes of text, so a stream of huge lines
// does not make huge rows.
constexpr size_t kBlockBytes = 1u << 20;
// Waiting lines of a partition above this many blocks' worth pack the
// largest streams early (into short blocks), bounding what every query scans.
constexpr uint64_t kMaxPendingBlocks = 16;

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

namespace {

// NoSpace for a full disk (the same write may succeed later: 507 with
// Retry-After), Corruption for a damaged file, IOError otherwise.
Status SqliteStatus(int rc, std::string m) {
  switch (rc & 0xff) {
    case SQLITE_FULL: return Status::NoSpace(std::move(m));
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Status::Corruption(std::move(m));
    default: return Status::IOError(std::move(m));
  }
}

}  // namespace

Status SqliteError(sqlite3* db, std::string_view what) {
  std::string m = "logs: " + std::string(what) + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
  return SqliteStatus(db != nullptr ? sqlite3_errcode(db) : SQLITE_NOMEM, std::move(m));
}

Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err); rc != SQLITE_OK) {
    Status s = SqliteStatus(rc, std::string("logs: sqlite: ") + (err ? err : "error"));
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

void LogStore::Partition::Close() {
  for (sqlite3_stmt** st : {&ins_block, &ins_fts, &ins_chunk, &ins_stream, &has_batch, &ins_batch, &begin, &commit}) {
    sqlite3_finalize(*st);
    *st = nullptr;
  }
  // _v2: should a statement still be alive, the connection closes when it is finalized.
  if (db) sqlite3_close_v2(db);
  db = nullptr;
}

Result<std::unique_ptr<LogStore>> LogStore::Open(const StoreOptions& opts) {
  if (opts.partition_ms <= 0) return Status::InvalidArgument("logs: partition duration must be positive");
  if (opts.block_lines == 0 || opts.block_lines > 65536) {
    return Status::InvalidArgument("logs: block_lines must be 1..65536");
  }
  if (opts.max_open_partitions == 0) return Status::InvalidArgument("logs: max_open_partitions must be positive");
  if (opts.retention_ms < 0 || opts.max_future_ms < 0) {
    return Status::InvalidArgument("logs: retention and max future must not be negative");
  }
  std::unique_ptr<LogStore> s(new LogStore(opts));
  Status st = s->Init();
  if (st.ok() && (opts.retention_ms > 0 || opts.retention_bytes > 0)) st = s->ApplyRetention();
  if (!st.ok()) return st.Annotate("open log store " + opts.dir);
  if (opts.metrics != nullptr) s->metrics_registration_ = opts.metrics->MustRegister({&s->metrics_});
  return s;
}

LogStore::LogStore(const StoreOptions& o)
    : opts_(o),
      cctx_(ZSTD_createCCtx()),
      dctx_(ZSTD_createDCtx()),
      metrics_({{"trainwatch_logs_lines_rejected_total", "Log lines refused at ingest for their time, by reason.",
                 common::metrics::Type::kCounter, {"reason"}},
                {"trainwatch_logs_partitions",
                 "Log store partitions, those with an open SQLite connection, and damaged ones set aside "
                 "(logs-*.db.corrupt*, not served).",
                 common::metrics::Type::kGauge, {"state"}}},
               [this](common::metrics::Emitter* e) {
                 Stats s = GetStats();
                 e->Add("trainwatch_logs_lines_rejected_total", {"too_far_in_future"},
                        static_cast<double>(s.rejected_too_far_in_future));
                 e->Add("trainwatch_logs_lines_rejected_total", {"too_old"}, static_cast<double>(s.rejected_too_old));
                 e->Add("trainwatch_logs_partitions", {"all"}, static_cast<double>(s.partitions));
                 e->Add("trainwatch_logs_partitions", {"open"}, static_cast<double>(s.open_partitions));
                 e->Add("trainwatch_logs_partitions", {"set_aside"}, static_cast<double>(s.set_aside));
               }) {}

LogStore::~LogStore() {
  metrics_registration_.Reset();  // no scrape reads the store while it is taken down
  Shutdown();
  open_.clear();
  partitions_.clear();
  ZSTD_freeCCtx(cctx_);
  ZSTD_freeDCtx(dctx_);
}

Status LogStore::Init() {
  RETURN_IF_ERROR(file::MkdirAll(opts_.dir));
  ASSIGN_OR_RETURN(auto names, file::ListDir(opts_.dir));
  base::MutexLock l(&mu_);
  for (const std::string& n : names) {
    if (n.starts_with("logs-") && n.find(".db" + std::string(file::kSetAsideSuffix)) != std::string::npos &&
        !n.ends_with("-wal") && !n.ends_with("-shm")) {
      set_aside_++;
      continue;
    }
    if (!n.starts_with("logs-") || !n.ends_with(".db")) continue;
    int64_t secs = 0;
    std::string_view digits = std::string_view(n).substr(5, n.size() - 8);
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), secs);
    // Not ours (or a start whose ms overflow int64): left alone.
    if (ec != std::errc() || end != digits.data() + digits.size() || secs > INT64_MAX / 1000 ||
        secs < INT64_MIN / 1000 || PartitionName(secs * 1000) != n) {
      continue;
    }
    // Opened one at a time: the schema is checked and the streams loaded,
    // then the connection may be closed again (max_open_partitions).
    Status s = GetPartition(secs * 1000, false).status();
    // A damaged partition is set aside, so the store (and the server) opens.
    if (s.IsCorruption()) s = SetAside(secs * 1000, s);
    RETURN_IF_ERROR(s);
  }
  TW_LOG(Info, "logs: opened {} ({} partitions)", opts_.dir, partitions_.size());
  return Status::OK();
}

int64_t LogStore::Now() const { return opts_.now_ms ? opts_.now_ms() : NowMillis(); }

int64_t LogStore::PartitionStart(int64_t t_ns) const {
  // Floor divisions: the former -((-t + ...)) overflowed for INT64_MIN.
  return FloorDiv(FloorDiv(t_ns, 1000000), opts_.partition_ms) * opts_.partition_ms;
}

int64_t LogStore::PartitionFirstNs(int64_t start_ms) const { return MsToNsSaturated(start_ms); }

int64_t LogStore::PartitionLastNs(int64_t start_ms) const {
  int64_t end_ms = start_ms > INT64_MAX - opts_.partition_ms ? INT64_MAX : start_ms + opts_.partition_ms;
  int64_t end_ns = MsToNsSaturated(end_ms);
  return end_ns == INT64_MAX ? INT64_MAX : end_ns - 1;
}

Status LogStore::Connect(Partition* p) {
  if (sqlite3_open_v2(p->path.c_str(), &p->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    Status s = SqliteError(p->db, "open " + p->path);
    p->Close();
    return s;
  }
  sqlite3_busy_timeout(p->db, 5000);
  Status s = Exec(p->db, "PRAGMA journal_mode=WAL");
  if (s.ok()) s = Exec(p->db, opts_.sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
  if (s.ok()) s = Exec(p->db, "PRAGMA cache_size=-8000");
  if (!s.ok()) p->Close();
  return s;
}

void LogStore::Disconnect(Partition* p) {
  if (p->db == nullptr) return;
  open_.erase(p->lru);
  p->Close();
}

namespace {

Status PrepareStatements(LogStore::Partition* p) {
  auto prep = [&](const char* sql, sqlite3_stmt** out) -> Status {
    if (sqlite3_prepare_v3(p->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, nullptr) != SQLITE_OK) {
      return SqliteError(p->db, "prepare");
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(prep("INSERT INTO blocks(stream, n, t_min, t_max, seq_min, seq_max, levels, meta, body) "
                       "VALUES(?,?,?,?,?,?,?,?,?)", &p->ins_block));
  RETURN_IF_ERROR(prep("INSERT INTO blocks_fts(rowid, text) VALUES(?,?)", &p->ins_fts));
  RETURN_IF_ERROR(prep("INSERT INTO chunks(stream, n, t_min, t_max, seq_min, seq_max, levels, meta, body) "
                       "VALUES(?,?,?,?,?,?,?,?,?)", &p->ins_chunk));
  RETURN_IF_ERROR(prep("INSERT INTO streams(labels) VALUES(?)", &p->ins_stream));
  RETURN_IF_ERROR(prep("SELECT 1 FROM batches WHERE id = ?", &p->has_batch));
  RETURN_IF_ERROR(prep("INSERT INTO batches(id) VALUES(?)", &p->ins_batch));
  RETURN_IF_ERROR(prep("BEGIN IMMEDIATE", &p->begin));
  RETURN_IF_ERROR(prep("COMMIT", &p->commit));
  return Status::OK();
}

}  // namespace

Status LogStore::Touch(Partition* p) {
  if (p->db != nullptr) {
    open_.splice(open_.begin(), open_, p->lru);
    return Status::OK();
  }
  // Room first, so the descriptors are free before this open needs them.
  while (open_.size() >= opts_.max_open_partitions) Disconnect(open_.back());
  RETURN_IF_ERROR(Connect(p));
  if (Status s = PrepareStatements(p); !s.ok()) {
    p->Close();
    return s;
  }
  open_.push_front(p);
  p->lru = open_.begin();
  return Status::OK();
}

Result<LogStore::Partition*> LogStore::GetPartition(int64_t start_ms, bool create) {
  auto it = partitions_.find(start_ms);
  if (it != partitions_.end()) {
    RETURN_IF_ERROR(Touch(it->second.get()));
    return it->second.get();
  }
  while (open_.size() >= opts_.max_open_partitions) Disconnect(open_.back());
  auto p = std::make_unique<Partition>();
  p->start_ms = start_ms;
  p->path = PartitionPath(start_ms);
  bool existed = file::Exists(p->path);
  RETURN_IF_ERROR(Connect(p.get()));
  int64_t version = 0;
  bool v1 = false, v2_pending = false;
  {
    Stmt q(p->db, "SELECT (SELECT user_version FROM pragma_user_version), "
                  "EXISTS(SELECT 1 FROM sqlite_master WHERE name = 'lines'), "
                  "EXISTS(SELECT 1 FROM sqlite_master WHERE name = 'pending')");
    if (q.Step()) version = q.Int(0), v1 = q.Int(1) != 0, v2_pending = q.Int(2) != 0;
    RETURN_IF_ERROR(q.status());
  }
  if (version > kSchemaVersion) {
    return Status::NotSupported("logs: " + p->path + ": schema " + std::to_string(version) +
                                " is newer than this binary's " + std::to_string(kSchemaVersion));
  }
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
  RETURN_IF_ERROR(PrepareStatements(p.get()));
  if (v1) RETURN_IF_ERROR(Migrate(p.get()));
  if (v2_pending) RETURN_IF_ERROR(MigratePending(p.get()));
  if (version < kSchemaVersion) {
    RETURN_IF_ERROR(Exec(p->db, ("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str()));
  }
  {
    Stmt q(p->db, "SELECT stream, sum(n) FROM chunks GROUP BY stream");
    while (q.Step()) {
      p->pending_count[q.Int(0)] = static_cast<uint32_t>(q.Int(1));
      p->pending_total += static_cast<uint64_t>(q.Int(1));
    }
    RETURN_IF_ERROR(q.status());
    Stmt m(p->db, "SELECT max(coalesce((SELECT max(seq_max) FROM blocks), 0), "
                  "coalesce((SELECT max(seq_max) FROM chunks), 0))");
    if (m.Step()) p->next_seq = static_cast<uint64_t>(m.Int(0)) + 1;
    RETURN_IF_ERROR(m.status());
  }
  (void)create;
  Partition* raw = p.get();
  partitions_.emplace(start_ms, std::move(p));
  open_.push_front(raw);
  raw->lru = open_.begin();
  return raw;
}

namespace {

// Binds a block's or chunk's row (the same columns) and inserts it.
Status InsertEncoded(sqlite3* db, sqlite3_stmt* s, int64_t stream, size_t n, const EncodedBlock& b, const char* what) {
  sqlite3_reset(s);
  sqlite3_bind_int64(s, 1, stream);
  sqlite3_bind_int64(s, 2, static_cast<int64_t>(n));
  sqlite3_bind_int64(s, 3, b.t_min);
  sqlite3_bind_int64(s, 4, b.t_max);
  sqlite3_bind_int64(s, 5, static_cast<int64_t>(b.seq_min));
  sqlite3_bind_int64(s, 6, static_cast<int64_t>(b.seq_max));
  sqlite3_bind_int64(s, 7, b.levels);
  sqlite3_bind_blob(s, 8, b.meta.data(), static_cast<int>(b.meta.size()), SQLITE_STATIC);
  sqlite3_bind_blob(s, 9, b.body.data(), static_cast<int>(b.body.size()), SQLITE_STATIC);
  if (sqlite3_step(s) != SQLITE_DONE) return SqliteError(db, what);
  return Status::OK();
}

}  // namespace

Status LogStore::WriteBlock(Partition* p, int64_t stream, const std::vector<LineRef>& lines) {
  EncodedBlock b;
  RETURN_IF_ERROR(EncodeBlock(cctx_, lines, &b));
  RETURN_IF_ERROR(InsertEncoded(p->db, p->ins_block, stream, lines.size(), b, "insert block"));
  int64_t id = sqlite3_last_insert_rowid(p->db);
  sqlite3_stmt* f = p->ins_fts;
  sqlite3_reset(f);
  sqlite3_bind_int64(f, 1, id);
  sqlite3_bind_text(f, 2, b.text.data(), static_cast<int>(b.text.size()), SQLITE_STATIC);
  if (sqlite3_step(f) != SQLITE_DONE) return SqliteError(p->db, "index block");
  return Status::OK();
}

Status InsertChunk(LogStore::Partition* p, int64_t stream, const std::vector<LineRef>& lines) {
  EncodedBlock b;
  EncodeChunk(lines, &b);
  return InsertEncoded(p->db, p->ins_chunk, stream, lines.size(), b, "insert chunk");
}

Status LoadChunks(LogStore::Partition* p, int64_t stream, std::deque<BlockReader>* readers,
                  std::vector<LineRef>* lines) {
  Stmt q(p->db, "SELECT id, meta, body FROM chunks WHERE stream = ? ORDER BY seq_min");
  q.Bind(1, stream);
  while (q.Step()) {
    BlockReader& r = readers->emplace_back();
    RETURN_IF_ERROR(r.OpenRaw(q.Text(1), p->path + ": chunk " + std::to_string(q.Int(0))));
    RETURN_IF_ERROR(r.LoadRawBody(q.Text(2)));
    for (size_t i = 0; i < r.size(); ++i) {
      lines->push_back(LineRef{r.seq(i), r.time(i), r.level(i), r.message(i), r.fields(i), r.flags(i)});
    }
  }
  return q.status();
}

namespace {

Status DeleteChunks(sqlite3* db, int64_t stream) {
  Stmt d(db, "DELETE FROM chunks WHERE stream = ?");
  d.Bind(1, stream);
  d.Step();
  return d.status();
}

// Runs a prepared BEGIN or COMMIT.
Status Run(sqlite3* db, sqlite3_stmt* s) {
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  return rc == SQLITE_DONE ? Status::OK() : SqliteError(db, sqlite3_sql(s));
}

}  // namespace

Status LogStore::PackPending(Partition* p, int64_t stream) {
  std::deque<BlockReader> readers;
  std::vector<LineRef> refs;
  RETURN_IF_ERROR(LoadChunks(p, stream, &readers, &refs));
  if (!refs.empty()) RETURN_IF_ERROR(WriteBlock(p, stream, refs));
  RETURN_IF_ERROR(DeleteChunks(p->db, stream));
  p->pending_total -= p->pending_count[stream];
  p->pending_count.erase(stream);
  return Status::OK();
}

Status LogStore::AppendLocked(Partition* p, std::vector<Record*>& recs) {
  // Lines of one stream, in append order (the order of their sequence numbers).
  std::vector<std::pair<int64_t, std::vector<LineRef>>> groups;
  std::unordered_map<int64_t, size_t> group_of;
  const model::Labels* last_labels = nullptr;
  size_t gi = 0;
  for (Record* r : recs) {
    if (last_labels == nullptr || !(*last_labels == r->labels)) {
      int64_t id = p->stream_ids.at(r->labels.ToString());
      auto [it, fresh] = group_of.emplace(id, groups.size());
      if (fresh) groups.emplace_back(id, std::vector<LineRef>());
      gi = it->second;
      last_labels = &r->labels;
    }
    groups[gi].second.push_back(LineRef{p->next_seq++, r->time_ns, r->level, r->message, r->fields,
                                        static_cast<uint8_t>(r->truncated ? kFlagTruncated : 0)});
  }
  std::vector<LineRef> block;
  for (auto& [stream, lines] : groups) {
    uint32_t& have = p->pending_count[stream];
    size_t bytes = 0;
    for (const LineRef& l : lines) bytes += l.message.size() + l.fields.size();
    std::deque<BlockReader> old;  // the waiting lines' chunks, which `all` points into
    if (have + lines.size() >= opts_.block_lines || bytes >= kBlockBytes) {
      // Enough for a block: the waiting lines come first, then the new ones;
      // full blocks are written and what is left over waits as one chunk.
      std::vector<LineRef> all;
      all.reserve(have + lines.size());
      if (have > 0) {
        RETURN_IF_ERROR(LoadChunks(p, stream, &old, &all));
        RETURN_IF_ERROR(DeleteChunks(p->db, stream));
        p->pending_total -= have;
        have = 0;
      }
      all.insert(all.end(), lines.begin(), lines.end());
      size_t i = 0;
      for (;;) {
        block.clear();
        size_t b = 0, j = i;
        while (j < all.size() && block.size() < opts_.block_lines && b < kBlockBytes) {
          b += all[j].message.size() + all[j].fields.size();
          block.push_back(all[j++]);
        }
        if (block.size() < opts_.block_lines && b < kBlockBytes) break;  // a short rest
        RETURN_IF_ERROR(WriteBlock(p, stream, block));
        i = j;
      }
      lines.assign(all.begin() + static_cast<std::ptrdiff_t>(i), all.end());
    }
    if (!lines.empty()) RETURN_IF_ERROR(InsertChunk(p, stream, lines));
    have += static_cast<uint32_t>(lines.size());
    p->pending_total += lines.size();
  }
  while (p->pending_total > kMaxPendingBlocks * opts_.block_lines) {
    auto big = std::max_element(p->pending_count.begin(), p->pending_count.end(),
                                [](auto& a, auto& b) { return a.second < b.second; });
    RETURN_IF_ERROR(PackPending(p, big->first));
  }
  return Status::OK();
}

Status LogStore::AppendToPartition(Partition* p, std::vector<Record*>& recs, std::string_view batch_id,
                                   bool* duplicate) {
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
  RETURN_IF_ERROR(Run(p->db, p->begin));
  Status st;
  if (!batch_id.empty()) {
    sqlite3_reset(p->has_batch);
    sqlite3_bind_text(p->has_batch, 1, batch_id.data(), static_cast<int>(batch_id.size()), SQLITE_STATIC);
    int rc = sqlite3_step(p->has_batch);
    if (rc == SQLITE_ROW) {
      sqlite3_reset(p->has_batch);
      *duplicate = true;
      return Exec(p->db, "ROLLBACK");
    }
    if (rc != SQLITE_DONE) st = SqliteError(p->db, "look up batch id");
    sqlite3_reset(p->has_batch);
    if (st.ok()) {
      sqlite3_reset(p->ins_batch);
      sqlite3_bind_text(p->ins_batch, 1, batch_id.data(), static_cast<int>(batch_id.size()), SQLITE_STATIC);
      if (sqlite3_step(p->ins_batch) != SQLITE_DONE) st = SqliteError(p->db, "insert batch id");
    }
  }
  // The in-memory mirrors of `chunks` and the sequence go back with a rollback.
  uint64_t seq0 = p->next_seq, total0 = p->pending_total;
  auto counts0 = p->pending_count;
  if (st.ok()) st = AppendLocked(p, recs);
  if (st.ok()) st = Run(p->db, p->commit);
  if (!st.ok()) {
    (void)Exec(p->db, "ROLLBACK");
    p->next_seq = seq0;
    p->pending_total = total0;
    p->pending_count = std::move(counts0);
  }
  return st;
}

Status LogStore::Append(std::vector<Record> records, std::string_view batch_id, bool* duplicate) {
  if (duplicate != nullptr) *duplicate = false;
  if (records.empty()) return Status::OK();
  // Checked before anything is stored: a refusal stores nothing.
  TimeBounds bounds = IngestBounds();
  const model::Labels* checked = nullptr;  // batches are mostly one stream
  for (size_t i = 0; i < records.size(); ++i) {
    if (Status s = bounds.Check(records[i].time_ns); !s.ok()) {
      CountRejected(bounds.rejected);
      return s.Annotate("logs: record " + std::to_string(i));
    }
    if (checked != nullptr && *checked == records[i].labels) continue;
    // Stream labels reach JSON answers and notifications, which need UTF-8.
    if (const model::Label* bad = FirstNonUtf8Label(records[i].labels)) {
      return Status::InvalidArgument("logs: record " + std::to_string(i) + ": label \"" + ToValidUtf8(bad->name) +
                                     "\": not valid UTF-8");
    }
    checked = &records[i].labels;
  }
  {
    base::MutexLock l(&mu_);
    std::map<int64_t, std::vector<Record*>> by_part;
    for (Record& r : records) by_part[PartitionStart(r.time_ns)].push_back(&r);
    bool new_partition = false;
    std::vector<Record*> dup;
    for (auto& [start, recs] : by_part) {
      new_partition = new_partition || partitions_.count(start) == 0;
      bool d = false;
      auto append = [&, start = start, &recs = recs]() -> Status {
        mu_.AssertHeld();  // called right below, under l
        ASSIGN_OR_RETURN(Partition * p, GetPartition(start, true));
        return AppendToPartition(p, recs, batch_id, &d);
      };
      Status s = append();
      if (s.IsCorruption()) {
        // Found damaged while writing: nothing of this batch is acknowledged
        // yet, so it goes whole into a new partition of the same range.
        RETURN_IF_ERROR(SetAside(start, s));
        s = append();
      }
      RETURN_IF_ERROR(s);
      if (d) {
        dup.insert(dup.end(), recs.begin(), recs.end());
        continue;
      }
    }
    if (!dup.empty()) {
      // A retried batch: what was stored before is neither counted nor tailed again.
      if (duplicate != nullptr) *duplicate = true;
      std::sort(dup.begin(), dup.end());
      std::vector<Record> kept;
      for (Record& r : records) {
        if (!std::binary_search(dup.begin(), dup.end(), &r)) kept.push_back(std::move(r));
      }
      records = std::move(kept);
    }
    appended_ += records.size();
    int64_t now = Now();
    if ((opts_.retention_ms > 0 || opts_.retention_bytes > 0) && (new_partition || now - last_retention_ms_ > 60000)) {
      last_retention_ms_ = now;
      l.Unlock();
      Status s = ApplyRetention();
      l.Lock();
      if (!s.ok()) TW_LOG(Error, "logs: retention: {}", s.ToString());
    }
  }
  if (records.empty()) return Status::OK();
  if (observer_ != nullptr) observer_->Observe(records);
  {
    base::MutexLock l(&tail_mu_);
    for (Record& r : records) {
      tail_.push_back(std::move(r));
      ++tail_seq_;
      if (tail_.size() > opts_.tail_buffer) tail_.pop_front();
    }
  }
  tail_cv_.SignalAll();
  return Status::OK();
}

Status LogStore::DropPartition(int64_t start_ms) {
  auto it = partitions_.find(start_ms);
  if (it == partitions_.end()) return Status::OK();
  std::string path = it->second->path;
  TW_LOG(Info, "logs: retention drops partition {}", path);
  Disconnect(it->second.get());
  partitions_.erase(it);
  for (const char* suffix : {"", "-wal", "-shm"}) RETURN_IF_ERROR(file::RemoveAll(path + suffix));
  return file::SyncDir(opts_.dir);
}

std::string LogStore::PartitionPath(int64_t start_ms) const { return opts_.dir + "/" + PartitionName(start_ms); }

Status LogStore::SetAside(int64_t start_ms, const Status& damage) {
  const std::string path = PartitionPath(start_ms);
  if (auto it = partitions_.find(start_ms); it != partitions_.end()) {
    Disconnect(it->second.get());
    partitions_.erase(it);
  }
  auto to = file::SetAside(path, {"-wal", "-shm"});
  if (!to.ok()) return damage.Annotate(to.status().message());
  set_aside_++;
  TW_LOG(Error, "logs: partition {} is damaged ({}); set aside as {}: its lines are not served", path,
         damage.message(), *to);
  return Status::OK();
}

Result<bool> LogStore::ReadPartition(int64_t start_ms, const std::function<Status(Partition*)>& read) {
  Partition* p = partitions_.at(start_ms).get();
  Status s = Touch(p);
  if (s.ok()) s = read(p);
  if (!s.IsCorruption()) return s.ok() ? Result<bool>(true) : Result<bool>(s);
  RETURN_IF_ERROR(SetAside(start_ms, s));
  return false;
}

std::vector<int64_t> LogStore::PartitionsOverlapping(int64_t start_ns, int64_t end_ns, bool newest_first) const {
  std::vector<int64_t> out;
  for (const auto& [start, p] : partitions_) {
    if (PartitionFirstNs(start) <= end_ns && PartitionLastNs(start) >= start_ns) out.push_back(start);
  }
  if (newest_first) std::reverse(out.begin(), out.end());
  return out;
}

Status LogStore::ApplyRetention() {
  base::MutexLock l(&mu_);
  if (opts_.retention_ms > 0) {
    // Age from the server's clock, never from the newest line: one line
    // dated in 2262 must not make every other partition old.
    int64_t now = Now();
    int64_t cutoff = now < INT64_MIN + opts_.retention_ms ? INT64_MIN : now - opts_.retention_ms;
    while (!partitions_.empty()) {
      int64_t start = partitions_.begin()->first;
      if (start > INT64_MAX - opts_.partition_ms || start + opts_.partition_ms > cutoff) break;
      RETURN_IF_ERROR(DropPartition(start));
    }
  }
  if (opts_.retention_bytes > 0) {
    for (;;) {
      uint64_t total = 0;
      for (auto& [start, p] : partitions_) total += FileSize(p->path) + FileSize(p->path + "-wal");
      // The newest partition is kept even when alone it is over the limit.
      if (total <= opts_.retention_bytes || partitions_.size() <= 1) break;
      RETURN_IF_ERROR(DropPartition(partitions_.begin()->first));
    }
  }
  return Status::OK();
}

LogStore::Stats LogStore::GetStats() {
  base::MutexLock l(&mu_);
  Stats s;
  s.partitions = partitions_.size();
  for (auto& [start, p] : partitions_) s.bytes += FileSize(p->path) + FileSize(p->path + "-wal");
  s.appended_lines = appended_;
  s.open_partitions = open_.size();
  s.rejected_too_far_in_future = rejected_future_;
  s.rejected_too_old = rejected_old_;
  s.set_aside = set_aside_;
  return s;
}

TimeBounds LogStore::IngestBounds() const {
  TimeBounds b;
  b.now_ms = Now();
  b.max_future_ms = opts_.max_future_ms;
  b.retention_ms = opts_.retention_ms;
  if (opts_.max_future_ms > 0) {
    int64_t max_ms = b.now_ms > INT64_MAX - opts_.max_future_ms ? INT64_MAX : b.now_ms + opts_.max_future_ms;
    b.max_ns = MsToNsSaturated(max_ms);
  }
  if (opts_.retention_ms > 0) {
    int64_t min_ms = b.now_ms < INT64_MIN + opts_.retention_ms ? INT64_MIN : b.now_ms - opts_.retention_ms;
    b.min_ns = MsToNsSaturated(min_ms);
  }
  return b;
}

void LogStore::CountRejected(TimeReject reason) {
  base::MutexLock l(&mu_);
  if (reason == TimeReject::kTooFarInFuture) ++rejected_future_;
  if (reason == TimeReject::kTooOld) ++rejected_old_;
}

std::vector<Record> LogStore::WaitNew(uint64_t* seq, int64_t timeout_ms) {
  base::MutexLock l(&tail_mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!shutdown_ && tail_seq_ <= *seq && tail_cv_.WaitUntil(&tail_mu_, deadline)) {
  }
  std::vector<Record> out;
  if (tail_seq_ <= *seq) return out;
  uint64_t first = tail_seq_ - tail_.size() + 1;
  for (uint64_t s = std::max(*seq + 1, first); s <= tail_seq_; ++s) out.push_back(tail_[s - first]);
  *seq = tail_seq_;
  return out;
}

uint64_t LogStore::LastSeq() {
  base::MutexLock l(&tail_mu_);
  return tail_seq_;
}

void LogStore::Shutdown() {
  {
    base::MutexLock l(&tail_mu_);
    shutdown_ = true;
  }
  tail_cv_.SignalAll();
}

bool LogStore::IsShutdown() {
  base::MutexLock l(&tail_mu_);
  return shutdown_;
}

}  // namespace trainwatch::logs
