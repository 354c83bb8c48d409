// LogStore: migration of a schema 1 partition (a row per line in `lines`,
// a contentless FTS5 row per line) to blocks, and of a schema 2 partition's
// `pending` rows (one per waiting line) to chunks, when it is opened.

#include <zstd.h>

#include "base/log.h"
#include "logs/store.h"
#include "logs/store_internal.h"

namespace trainwatch::logs {

Status LogStore::Migrate(Partition* p) {
  TW_LOG(Info, "logs: {}: migrating schema 1 (a row per line) to compressed blocks", p->path);
  RETURN_IF_ERROR(Exec(p->db, "BEGIN IMMEDIATE"));
  // Sequence numbers are the old row ids, which were in append order: the
  // forwarders' saved positions and the paging cursors stay valid.
  std::vector<PendingRow> rows;
  std::vector<LineRef> refs;
  int64_t stream = -1;
  uint64_t lines = 0;
  auto flush = [&](bool end_of_stream) -> Status {
    mu_.AssertHeld();  // run in place, under the lock Migrate requires
    if (rows.empty()) return Status::OK();
    refs.clear();
    for (const PendingRow& r : rows) refs.push_back(LineRef{r.seq, r.t, r.level, r.message, r.fields, r.flags});
    if (!end_of_stream || refs.size() == opts_.block_lines) {
      RETURN_IF_ERROR(WriteBlock(p, stream, refs));
    } else {
      RETURN_IF_ERROR(InsertChunk(p, stream, refs));
    }
    rows.clear();
    return Status::OK();
  };
  Status st;
  {
    Stmt q(p->db, "SELECT id, t, stream, level, flags, message, fields FROM lines ORDER BY stream, id");
    while (st.ok() && q.Step()) {
      if (q.Int(2) != stream) {
        st = flush(true);
        stream = q.Int(2);
      }
      PendingRow r;
      r.seq = static_cast<uint64_t>(q.Int(0));
      r.t = q.Int(1);
      r.level = q.Text(3);
      int64_t flags = q.Int(4);
      r.flags = (flags & kFlagTruncated) ? kFlagTruncated : 0;
      std::string_view msg = q.Text(5);
      if (flags & kFlagZstd) {
        unsigned long long n = ZSTD_getFrameContentSize(msg.data(), msg.size());
        if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > (64u << 20)) {
          st = Status::Corruption("logs: " + p->path + ": line " + std::to_string(q.Int(0)) + ": bad compressed message");
          break;
        }
        r.message.resize(n);
        size_t got = ZSTD_decompress(r.message.data(), n, msg.data(), msg.size());
        if (ZSTD_isError(got)) {
          st = Status::Corruption("logs: " + p->path + ": line " + std::to_string(q.Int(0)) + ": bad compressed message");
          break;
        }
        r.message.resize(got);
      } else {
        r.message = msg;
      }
      if (!q.IsNull(6)) r.fields = q.Text(6);
      rows.push_back(std::move(r));
      ++lines;
      if (rows.size() == opts_.block_lines) st = flush(false);
    }
    if (st.ok()) st = q.status();
  }
  if (st.ok()) st = flush(true);
  if (st.ok()) st = Exec(p->db, "DROP TABLE lines_fts");
  if (st.ok()) st = Exec(p->db, "DROP TABLE lines");
  if (st.ok()) st = Exec(p->db, "PRAGMA user_version=3");
  if (st.ok()) st = Exec(p->db, "COMMIT");
  if (!st.ok()) {
    (void)Exec(p->db, "ROLLBACK");
    return st.Annotate("migrate " + p->path);
  }
  // Give the old rows' pages back to the file system.
  RETURN_IF_ERROR(Exec(p->db, "VACUUM"));
  TW_LOG(Info, "logs: {}: migrated {} lines", p->path, lines);
  return Status::OK();
}

Status LogStore::MigratePending(Partition* p) {
  // Each stream's waiting lines (fewer than a block) become one chunk.
  RETURN_IF_ERROR(Exec(p->db, "BEGIN IMMEDIATE"));
  std::vector<PendingRow> rows;
  std::vector<LineRef> refs;
  int64_t stream = -1;
  uint64_t lines = 0;
  auto flush = [&]() -> Status {
    if (rows.empty()) return Status::OK();
    refs.clear();
    for (const PendingRow& r : rows) refs.push_back(LineRef{r.seq, r.t, r.level, r.message, r.fields, r.flags});
    rows.clear();
    return InsertChunk(p, stream, refs);
  };
  Status st;
  {
    Stmt q(p->db, "SELECT seq, t, stream, level, flags, message, fields FROM pending ORDER BY stream, seq");
    while (st.ok() && q.Step()) {
      if (q.Int(2) != stream) {
        st = flush();
        stream = q.Int(2);
      }
      PendingRow r;
      r.seq = static_cast<uint64_t>(q.Int(0));
      r.t = q.Int(1);
      r.level = q.Text(3);
      r.flags = static_cast<uint8_t>(q.Int(4));
      r.message = q.Text(5);
      r.fields = q.Text(6);
      rows.push_back(std::move(r));
      ++lines;
    }
    if (st.ok()) st = q.status();
  }
  if (st.ok()) st = flush();
  if (st.ok()) st = Exec(p->db, "DROP TABLE pending");
  if (st.ok()) st = Exec(p->db, "PRAGMA user_version=3");
  if (st.ok()) st = Exec(p->db, "COMMIT");
  if (!st.ok()) {
    (void)Exec(p->db, "ROLLBACK");
    return st.Annotate("migrate " + p->path);
  }
  TW_LOG(Info, "logs: {}: moved {} waiting lines from schema 2's pending rows to chunks", p->path, lines);
  return Status::OK();
}

}  // namespace trainwatch::logs
