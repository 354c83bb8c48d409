#include "logs/store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <sqlite3.h>
#include <zstd.h>

#include <algorithm>
#include <random>

#include "base/file.h"

namespace trainwatch::logs {
namespace {

constexpr int64_t kSec = 1000000000;
constexpr int64_t kT0 = 1700000000LL * kSec;

class LogStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_logs_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opts_.dir = dir_ + "/logs";
    opts_.sync_full = false;
    opts_.block_lines = 3;  // small blocks, so every test crosses blocks and pending lines
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }

  std::unique_ptr<LogStore> Open() {
    auto s = LogStore::Open(opts_);
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    return std::move(*s);
  }
  static Record Rec(int64_t t, std::string run, std::string level, std::string msg, std::string fields = "") {
    Record r;
    r.time_ns = t;
    r.labels = model::Labels{{"project", "p"}, {"run", run}};
    r.level = std::move(level);
    r.message = std::move(msg);
    r.fields = std::move(fields);
    return r;
  }
  static std::vector<std::string> Messages(const SelectResult& r) {
    std::vector<std::string> out;
    for (const Record& l : r.lines) out.push_back(l.message);
    return out;
  }
  Query Q(std::string_view q) {
    auto p = Query::Parse(q);
    EXPECT_TRUE(p.ok()) << p.error().message();
    return *p;
  }

  std::string dir_;
  common::metrics::Registry metrics_;  // for the tests that set opts_.metrics; outlives their stores
  StoreOptions opts_;
};

TEST_F(LogStoreTest, SelectNewestFirstWithFiltersAndPaging) {
  auto s = Open();
  std::vector<Record> recs;
  for (int i = 0; i < 10; ++i) {
    recs.push_back(Rec(kT0 + i * kSec, i % 2 ? "a" : "b", i % 3 == 0 ? "ERROR" : "INFO",
                       "step " + std::to_string(i) + (i % 3 == 0 ? " CUDA error: out of memory" : " ok"),
                       "{\"step\":" + std::to_string(i) + "}"));
  }
  ASSERT_TRUE(s->Append(recs).ok());
  auto all = s->Select(Q(""), {});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->lines.size(), 10u);
  EXPECT_EQ(all->lines.front().message, "step 9 CUDA error: out of memory");
  EXPECT_EQ(all->lines.back().message, "step 0 CUDA error: out of memory");
  EXPECT_TRUE(all->next_cursor.empty());

  auto err = s->Select(Q("level=ERROR CUDA"), {});
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(Messages(*err), (std::vector<std::string>{"step 9 CUDA error: out of memory", "step 6 CUDA error: out of memory",
                                                      "step 3 CUDA error: out of memory", "step 0 CUDA error: out of memory"}));
  auto fields = s->Select(Q(R"({run="a"} step>=5 -cuda)"), {});
  ASSERT_TRUE(fields.ok());
  EXPECT_EQ(Messages(*fields), (std::vector<std::string>{"step 7 ok", "step 5 ok"}));
  auto re = s->Select(Q(R"(|~ "step [12] ")"), {});
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(Messages(*re), (std::vector<std::string>{"step 2 ok", "step 1 ok"}));

  SelectOptions o;
  o.limit = 4;
  std::vector<std::string> paged;
  for (int page = 0; page < 5; ++page) {
    auto r = s->Select(Q(""), o);
    ASSERT_TRUE(r.ok());
    for (auto& m : Messages(*r)) paged.push_back(m);
    if (r->next_cursor.empty()) break;
    o.cursor = r->next_cursor;
  }
  EXPECT_EQ(paged, Messages(*all));

  o = SelectOptions{};
  o.start_ns = kT0 + 2 * kSec;
  o.end_ns = kT0 + 4 * kSec;
  auto range = s->Select(Q(""), o);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->lines.size(), 3u);
}

TEST_F(LogStoreTest, HistogramCountsPerStep) {
  auto s = Open();
  std::vector<Record> recs;
  for (int i = 0; i < 6; ++i) recs.push_back(Rec(kT0 + i * kSec, "a", i < 4 ? "ERROR" : "INFO", "m"));
  ASSERT_TRUE(s->Append(recs).ok());
  auto h = s->Histogram(Q("level=ERROR"), kT0, kT0 + 5 * kSec, 2 * kSec);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].second, 2u);
  EXPECT_EQ((*h)[1].second, 2u);
  EXPECT_EQ((*h)[2].second, 0u);
  auto post = s->Histogram(Q(R"(|= "m")"), kT0, kT0 + 5 * kSec, 2 * kSec);
  ASSERT_TRUE(post.ok());
  EXPECT_EQ((*post)[2].second, 2u);
}

TEST_F(LogStoreTest, ReopenKeepsLinesAcrossPartitionsAndLongMessagesRoundTrip) {
  std::string long_msg = "Traceback (most recent call last):\n";
  for (int i = 0; i < 50; ++i) long_msg += "  File \"train.py\", line " + std::to_string(i) + ", in step\n";
  {
    auto s = Open();
    ASSERT_TRUE(s->Append({Rec(kT0, "a", "ERROR", long_msg), Rec(kT0 + 3 * 86400 * kSec, "b", "INFO", "later")}).ok());
  }
  auto s = Open();
  EXPECT_EQ(s->GetStats().partitions, 2u);
  auto r = s->Select(Q("traceback"), {});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines[0].message, long_msg);
  auto names = s->LabelNames(INT64_MIN, INT64_MAX);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"project", "run"}));
  auto runs = s->LabelValues("run", INT64_MIN, INT64_MAX);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(*runs, (std::vector<std::string>{"a", "b"}));
}

// Issue 17, corrupt files: a partition SQLite finds damaged no longer stops
// the store from opening. It is set aside with its WAL, counted (and shown
// on /metrics), and the other partitions are served; new lines of its day go
// to a new partition.
TEST_F(LogStoreTest, DamagedPartitionIsSetAsideAndTheRestServed) {
  const int64_t day = 86400 * kSec;
  {
    auto s = Open();
    ASSERT_TRUE(s->Append({Rec(kT0, "a", "INFO", "first day"), Rec(kT0 + 3 * day, "b", "INFO", "later day")}).ok());
  }
  auto names = file::ListDir(opts_.dir);
  ASSERT_TRUE(names.ok());
  std::vector<std::string> dbs;
  for (const auto& n : *names) {
    if (n.ends_with(".db")) dbs.push_back(n);
  }
  ASSERT_EQ(dbs.size(), 2u);  // sorted: the first day's partition first
  const std::string damaged = opts_.dir + "/" + dbs[0];
  ASSERT_TRUE(file::WriteFileAtomic(damaged, std::string(8192, '\xab')).ok());
  opts_.metrics = &metrics_;
  auto s = Open();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->GetStats().partitions, 1u);
  EXPECT_EQ(s->GetStats().set_aside, 1u);
  EXPECT_TRUE(file::Exists(damaged + ".corrupt"));
  auto r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"later day"}));
  std::string m;
  metrics_.Render(&m);
  EXPECT_NE(m.find("trainwatch_logs_partitions{state=\"set_aside\"} 1\n"), std::string::npos) << m;
  ASSERT_TRUE(s->Append({Rec(kT0 + 1, "a", "INFO", "again")}).ok());
  s.reset();
  s = Open();
  EXPECT_EQ(s->GetStats().set_aside, 1u);
  r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"later day", "again"}));
}

// Damage found while serving, not at open: a query that meets it sets the
// partition aside and answers from the others; a write into a damaged
// partition sets it aside and lands whole in a new one.
TEST_F(LogStoreTest, PartitionDamagedWhileServingIsSetAside) {
  const int64_t day = 86400 * kSec;
  opts_.max_open_partitions = 1;  // a partition not in use is closed, so damage on disk is read
  opts_.metrics = &metrics_;
  auto s = Open();
  ASSERT_TRUE(s->Append({Rec(kT0, "a", "INFO", "first day"), Rec(kT0 + 3 * day, "b", "INFO", "later day")}).ok());
  auto dbs = [&] {
    std::vector<std::string> out;
    auto names = file::ListDir(opts_.dir);
    if (!names.ok()) return out;
    for (const auto& n : *names) {
      if (n.ends_with(".db")) out.push_back(opts_.dir + "/" + n);
    }
    return out;
  };
  const std::vector<std::string> paths = dbs();
  ASSERT_EQ(paths.size(), 2u);
  // The first day's partition is closed (one connection, the later day's): damage it.
  ASSERT_TRUE(file::WriteFileAtomic(paths[0], std::string(8192, '\xab')).ok());
  auto r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"later day"}));
  EXPECT_EQ(s->GetStats().set_aside, 1u);
  EXPECT_TRUE(file::Exists(paths[0] + ".corrupt"));
  auto h = s->Histogram(Q(""), kT0, kT0 + 4 * day, day);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ((*h)[0].second, 0u);
  EXPECT_EQ((*h)[3].second, 1u);
  // A write into the first day: a new partition.
  ASSERT_TRUE(s->Append({Rec(kT0 + 1, "a", "INFO", "again")}).ok());
  // Now the later day's partition is closed: damage it, then write into it.
  ASSERT_TRUE(file::WriteFileAtomic(paths[1], std::string(8192, '\xcd')).ok());
  ASSERT_TRUE(s->Append({Rec(kT0 + 3 * day + 1, "b", "INFO", "later again")}).ok());
  EXPECT_EQ(s->GetStats().set_aside, 2u);
  EXPECT_TRUE(file::Exists(paths[1] + ".corrupt"));
  r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"later again", "again"}));
  std::string m;
  metrics_.Render(&m);
  EXPECT_NE(m.find("trainwatch_logs_partitions{state=\"set_aside\"} 2\n"), std::string::npos) << m;
}

TEST_F(LogStoreTest, RetentionByTimeDropsOldPartitions) {
  opts_.retention_ms = 2 * 86400000LL;
  int64_t now_ms = kT0 / 1000000;  // retention measures age from this clock
  opts_.now_ms = [&] { return now_ms; };
  auto s = Open();
  ASSERT_TRUE(s->Append({Rec(kT0, "a", "INFO", "old")}).ok());
  now_ms += 5 * 86400000LL;
  ASSERT_TRUE(s->Append({Rec(kT0 + 5 * 86400 * kSec, "a", "INFO", "new")}).ok());
  ASSERT_TRUE(s->ApplyRetention().ok());
  auto r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"new"}));
  EXPECT_EQ(s->GetStats().partitions, 1u);
}

TEST_F(LogStoreTest, RetentionBySizeDropsOldestButKeepsNewest) {
  opts_.retention_bytes = 1;  // below any partition: only the newest survives
  auto s = Open();
  ASSERT_TRUE(s->Append({Rec(kT0, "a", "INFO", "day 0")}).ok());
  ASSERT_TRUE(s->Append({Rec(kT0 + 86400 * kSec, "a", "INFO", "day 1")}).ok());
  ASSERT_TRUE(s->Append({Rec(kT0 + 2 * 86400 * kSec, "a", "INFO", "day 2")}).ok());
  ASSERT_TRUE(s->ApplyRetention().ok());
  auto r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"day 2"}));
}

TEST_F(LogStoreTest, TailSeesNewRecords) {
  auto s = Open();
  uint64_t seq = s->LastSeq();
  ASSERT_TRUE(s->Append({Rec(kT0, "a", "INFO", "one"), Rec(kT0, "a", "INFO", "two")}).ok());
  auto got = s->WaitNew(&seq, 1000);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].message, "two");
  EXPECT_TRUE(s->WaitNew(&seq, 10).empty());
  s->Shutdown();
  EXPECT_TRUE(s->WaitNew(&seq, 100000).empty());  // returns at once
}

// Lines appended in batches of every size, over three streams and out of
// time order: every query, page, histogram and ReadAfter answers what a
// brute-force scan of the same lines answers, also after a reopen.
TEST_F(LogStoreTest, BlocksAndPendingLinesAnswerLikeABruteForceScan) {
  std::mt19937_64 rng(7);
  std::vector<Record> all;  // in append order
  const char* levels[] = {"INFO", "INFO", "WARNING", "ERROR", "", "NOTICE2"};
  const char* words[] = {"step", "loss", "CUDA", "error", "nccl", "timeout", "out of memory", "checkpoint"};
  for (int i = 0; i < 300; ++i) {
    std::string msg = std::string(words[rng() % 8]) + " " + std::to_string(i) + " " + words[rng() % 8];
    std::string fields = i % 3 ? "{\"step\":" + std::to_string(i) + "}" : "";
    all.push_back(Rec(kT0 + static_cast<int64_t>(rng() % 100) * kSec, "r" + std::to_string(i % 3),
                      levels[rng() % 6], msg, fields));
  }
  auto s = Open();
  for (size_t pos = 0, n = 1; pos < all.size(); pos += n, n = n % 11 + 1) {
    std::vector<Record> batch(all.begin() + static_cast<std::ptrdiff_t>(pos),
                              all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), pos + n)));
    ASSERT_TRUE(s->Append(batch).ok());
  }
  auto check = [&](LogStore* st) {
    for (const char* qs : {"", "level=ERROR", "level>=WARNING cuda", "\"out of memory\"", "-step", "time*",
                           R"({run="r1"} step>=100)", "level=ERROR nccl or level=WARNING cuda", "level=NOTICE2",
                           "level!=INFO |~ \"[0-9]+ loss\""}) {
      Query q = Q(qs);
      std::vector<size_t> want;
      for (size_t i = 0; i < all.size(); ++i) {
        if (q.Matches(all[i])) want.push_back(i);
      }
      std::stable_sort(want.begin(), want.end(), [&](size_t a, size_t b) {
        return all[a].time_ns != all[b].time_ns ? all[a].time_ns > all[b].time_ns : a > b;
      });
      std::vector<std::string> got;
      SelectOptions o;
      o.limit = 7;
      for (int page = 0; page < 100; ++page) {
        auto r = st->Select(q, o);
        ASSERT_TRUE(r.ok()) << r.error().ToString();
        for (const Record& l : r->lines) got.push_back(l.message);
        if (r->next_cursor.empty()) break;
        o.cursor = r->next_cursor;
      }
      std::vector<std::string> want_msgs;
      for (size_t i : want) want_msgs.push_back(all[i].message);
      EXPECT_EQ(got, want_msgs) << qs;
      auto h = st->Histogram(q, kT0, kT0 + 100 * kSec, 10 * kSec);
      ASSERT_TRUE(h.ok());
      uint64_t total = 0;
      for (auto& [t, c] : *h) total += c;
      EXPECT_EQ(total, want.size()) << qs;
    }
    std::map<int64_t, int64_t> pos;
    std::vector<std::string> read;
    for (int i = 0; i < 100; ++i) {
      auto r = st->ReadAfter(&pos, 13);
      ASSERT_TRUE(r.ok());
      if (r->empty()) break;
      for (const Record& l : *r) read.push_back(l.message);
    }
    std::vector<std::string> in_order;
    for (const Record& r : all) in_order.push_back(r.message);
    EXPECT_EQ(read, in_order);
  };
  check(s.get());
  s.reset();
  s = Open();
  check(s.get());
  // More lines after the reopen continue the sequence: ReadAfter sees them next.
  std::map<int64_t, int64_t> pos;
  ASSERT_TRUE(s->ReadAfter(&pos, 1000).ok());
  ASSERT_TRUE(s->Append({Rec(kT0, "r0", "INFO", "after reopen")}).ok());
  auto r = s->ReadAfter(&pos, 1000);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].message, "after reopen");
}

TEST_F(LogStoreTest, RetriedBatchIsStoredOnce) {
  auto s = Open();
  uint64_t seq = s->LastSeq();
  std::vector<Record> batch = {Rec(kT0, "a", "INFO", "one"), Rec(kT0 + 86400 * kSec, "a", "INFO", "two")};
  bool dup = true;
  ASSERT_TRUE(s->Append(batch, "client.0.7", &dup).ok());
  EXPECT_FALSE(dup);
  ASSERT_TRUE(s->Append(batch, "client.0.7", &dup).ok());
  EXPECT_TRUE(dup);
  ASSERT_TRUE(s->Append(batch, "client.0.8", &dup).ok());  // another batch with the same lines
  EXPECT_FALSE(dup);
  s.reset();
  s = Open();  // the ids are durable with the lines
  ASSERT_TRUE(s->Append(batch, "client.0.7", &dup).ok());
  EXPECT_TRUE(dup);
  auto r = s->Select(Q(""), {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Messages(*r), (std::vector<std::string>{"two", "two", "one", "one"}));
  (void)seq;
}

// A data dir written before blocks (schema 1: a row per line) is migrated
// when opened; row ids become sequence numbers, so saved forwarding
// positions stay valid.
TEST_F(LogStoreTest, MigratesSchema1Partition) {
  ASSERT_TRUE(file::MkdirAll(opts_.dir).ok());
  std::string path = opts_.dir + "/logs-" + std::to_string(kT0 / kSec / 86400 * 86400) + ".db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* schema = R"sql(
CREATE TABLE streams(id INTEGER PRIMARY KEY, labels TEXT NOT NULL UNIQUE);
CREATE TABLE lines(id INTEGER PRIMARY KEY, t INTEGER NOT NULL, stream INTEGER NOT NULL,
  level TEXT NOT NULL, flags INTEGER NOT NULL, message BLOB NOT NULL, fields TEXT);
CREATE INDEX lines_t ON lines(t);
CREATE INDEX lines_stream_t ON lines(stream, t);
CREATE VIRTUAL TABLE lines_fts USING fts5(message, content='', columnsize=0);
INSERT INTO streams VALUES(1, '{"project":"p","run":"a"}'), (2, '{"project":"p","run":"b"}');
)sql";
  ASSERT_EQ(sqlite3_exec(db, schema, nullptr, nullptr, nullptr), SQLITE_OK);
  std::string big(2000, 'x');
  big = "CUDA error " + big;
  std::string z(ZSTD_compressBound(big.size()), '\0');
  z.resize(ZSTD_compress(z.data(), z.size(), big.data(), big.size(), 3));
  sqlite3_stmt* ins = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO lines(id, t, stream, level, flags, message, fields) VALUES(?,?,?,?,?,?,?)",
                               -1, &ins, nullptr), SQLITE_OK);
  for (int i = 1; i <= 8; ++i) {
    std::string msg = i == 5 ? z : "line " + std::to_string(i);
    sqlite3_reset(ins);
    sqlite3_bind_int64(ins, 1, i * 10);  // ids need not be dense
    sqlite3_bind_int64(ins, 2, kT0 + i * kSec);
    sqlite3_bind_int64(ins, 3, i % 2 + 1);
    sqlite3_bind_text(ins, 4, i == 5 ? "ERROR" : "INFO", -1, SQLITE_STATIC);
    sqlite3_bind_int(ins, 5, i == 5 ? 2 : (i == 8 ? 1 : 0));
    sqlite3_bind_blob(ins, 6, msg.data(), static_cast<int>(msg.size()), SQLITE_TRANSIENT);
    if (i % 2) sqlite3_bind_text(ins, 7, "{\"k\":1}", -1, SQLITE_STATIC);
    else sqlite3_bind_null(ins, 7);
    ASSERT_EQ(sqlite3_step(ins), SQLITE_DONE);
  }
  sqlite3_finalize(ins);
  sqlite3_close(db);

  auto s = Open();
  auto err = s->Select(Q("level=ERROR cuda"), {});
  ASSERT_TRUE(err.ok()) << err.error().ToString();
  ASSERT_EQ(err->lines.size(), 1u);
  EXPECT_EQ(err->lines[0].message, big);
  EXPECT_EQ(err->lines[0].fields, "{\"k\":1}");
  auto all = s->Select(Q(""), {});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->lines.size(), 8u);
  EXPECT_TRUE(all->lines[0].truncated);  // line 8
  EXPECT_EQ(all->lines[0].labels.Get("run"), "a");
  std::map<int64_t, int64_t> pos{{kT0 / kSec / 86400 * 86400 * 1000, 40}};  // a forwarder that had sent id 40
  auto rest = s->ReadAfter(&pos, 100);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 4u);
  EXPECT_EQ((*rest)[0].message, big);
  EXPECT_EQ((*rest)[3].message, "line 8");
  ASSERT_TRUE(s->Append({Rec(kT0 + 9 * kSec, "a", "INFO", "new")}).ok());
  rest = s->ReadAfter(&pos, 100);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].message, "new");
  s.reset();
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE name IN ('lines', 'lines_fts')", -1, &q,
                               nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(q, 0), 0);
  sqlite3_finalize(q);
  sqlite3_close(db);
}

// A schema 2 partition kept a `pending` row per waiting line; opening it
// moves them into chunks with their sequence numbers, and the next append
// that fills a block packs them.
TEST_F(LogStoreTest, MigratesSchema2PendingRows) {
  ASSERT_TRUE(file::MkdirAll(opts_.dir).ok());
  std::string path = opts_.dir + "/logs-" + std::to_string(kT0 / kSec / 86400 * 86400) + ".db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const char* schema = R"sql(
CREATE TABLE streams(id INTEGER PRIMARY KEY, labels TEXT NOT NULL UNIQUE);
CREATE TABLE blocks(id INTEGER PRIMARY KEY, stream INTEGER NOT NULL, n INTEGER NOT NULL,
  t_min INTEGER NOT NULL, t_max INTEGER NOT NULL, seq_min INTEGER NOT NULL, seq_max INTEGER NOT NULL,
  levels INTEGER NOT NULL, meta BLOB NOT NULL, body BLOB NOT NULL);
CREATE INDEX blocks_t ON blocks(t_max);
CREATE INDEX blocks_seq ON blocks(seq_max);
CREATE VIRTUAL TABLE blocks_fts USING fts5(text, content='', columnsize=0, detail=none, tokenize='ascii');
CREATE TABLE pending(seq INTEGER PRIMARY KEY, stream INTEGER NOT NULL, t INTEGER NOT NULL,
  level TEXT NOT NULL, flags INTEGER NOT NULL, message BLOB NOT NULL, fields BLOB NOT NULL);
CREATE INDEX pending_stream ON pending(stream);
CREATE TABLE batches(id TEXT PRIMARY KEY) WITHOUT ROWID;
INSERT INTO streams VALUES(1, '{"project":"p","run":"a"}'), (2, '{"project":"p","run":"b"}');
INSERT INTO pending VALUES(5, 1, 1700000001000000000, 'INFO', 0, 'a one', '{"step":1}'),
  (6, 1, 1700000002000000000, 'ERROR', 1, 'a two', ''), (7, 2, 1700000003000000000, 'odd', 0, 'b one', '');
PRAGMA user_version=2;
)sql";
  ASSERT_EQ(sqlite3_exec(db, schema, nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  auto s = Open();
  auto all = s->Select(Q(""), {});
  ASSERT_TRUE(all.ok()) << all.error().ToString();
  EXPECT_EQ(Messages(*all), (std::vector<std::string>{"b one", "a two", "a one"}));
  EXPECT_EQ(all->lines[0].level, "odd");
  EXPECT_TRUE(all->lines[1].truncated);
  EXPECT_EQ(all->lines[2].fields, "{\"step\":1}");
  std::map<int64_t, int64_t> pos{{kT0 / kSec / 86400 * 86400 * 1000, 5}};
  auto rest = s->ReadAfter(&pos, 100);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 2u);
  EXPECT_EQ((*rest)[0].message, "a two");
  // The third line of run a fills a block (block_lines 3): numbered after the old ones.
  ASSERT_TRUE(s->Append({Rec(kT0 + 4 * kSec, "a", "INFO", "a three")}).ok());
  rest = s->ReadAfter(&pos, 100);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->size(), 1u);
  EXPECT_EQ((*rest)[0].message, "a three");
  auto text = s->Select(Q("{run=\"a\"} two"), {});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(Messages(*text), (std::vector<std::string>{"a two"}));
  s.reset();
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM sqlite_master WHERE name = 'pending'), "
                               "(SELECT count(*) FROM blocks), (SELECT group_concat(seq_min || '-' || seq_max) FROM chunks), "
                               "(SELECT user_version FROM pragma_user_version)", -1, &q, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(q), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(q, 0), 0);
  EXPECT_EQ(sqlite3_column_int(q, 1), 1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(q, 2))), "7-7");
  EXPECT_EQ(sqlite3_column_int(q, 3), 3);
  sqlite3_finalize(q);
  sqlite3_close(db);
}

}  // namespace
}  // namespace trainwatch::logs
