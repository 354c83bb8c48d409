#include "runs/store.h"

#include <gtest/gtest.h>

#include <sqlite3.h>

#include <cmath>

#include "base/clock.h"
#include "base/file.h"
#include "runs/request.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::runs {

// For the tests' comparisons (found by argument-dependent lookup).
bool operator==(const StepPoint& a, const StepPoint& b) {
  return a.step == b.step && a.ts_ms == b.ts_ms && (a.value == b.value || (std::isnan(a.value) && std::isnan(b.value)));
}
void PrintTo(const StepPoint& p, std::ostream* os) { *os << "{" << p.step << ", " << p.ts_ms << ", " << p.value << "}"; }

namespace {

constexpr int64_t kT0 = 1796218600000;

struct S {
  int64_t t;
  double v;
  bool operator==(const S&) const = default;
};

class RunStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_runs_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Open();
  }
  void TearDown() override {
    store_.reset();
    (void)file::RemoveAll(dir_);
  }
  void Open(const std::string& file = "runs.db") {
    store_.reset();
    RunStoreOptions o;
    o.path = dir_ + "/" + file;
    o.metrics = &metrics_;
    o.heartbeat_timeout_ms = 60000;
    o.now_ms = [this] { return now_; };
    o.artifact_keep_versions = keep_versions_;
    auto s = RunStore::Open(o, db_.get(), db_.get());
    ASSERT_TRUE(s.ok()) << s.error().ToString();
    store_ = std::move(*s);
  }
  runs::Run Create(std::string_view body) {
    auto req = ParseCreateRequest(body);
    EXPECT_TRUE(req.ok()) << req.error().ToString();
    auto r = store_->CreateOrResume(*req);
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return r.ok() ? *r : runs::Run{};
  }
  BatchResult Batch(std::string_view id, std::string_view body) {
    auto req = ParseBatchRequest(body);
    EXPECT_TRUE(req.ok()) << req.error().ToString();
    auto r = store_->WriteBatch(id, *req);
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    return r.ok() ? *r : BatchResult{};
  }
  // Samples of the series with exactly these labels.
  std::vector<S> Samples(const model::Labels& ls) {
    auto data = db_.Data();
    std::vector<S> out;
    if (auto it = data.find(ls); it != data.end()) {
      for (const model::Sample& x : it->second) out.push_back({x.t, x.v});
    }
    return out;
  }
  // The step store's points of `metric` of run `id` (rankless).
  std::vector<StepPoint> Steps(std::string_view id, const std::string& metric) {
    StepQuery q;
    q.metrics = {metric};
    q.rank = -1;
    auto r = store_->ReadSteps(id, q);
    EXPECT_TRUE(r.ok()) << r.error().ToString();
    if (!r.ok() || r->empty()) return {};
    EXPECT_EQ(r->size(), 1u);
    return (*r)[0].points;
  }
  // Rows in the step store's chunk table.
  int64_t ChunkCount() {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2((dir_ + "/runs.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM step_chunks", -1, &st, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  }
  static model::Labels L(std::string_view name, std::string_view run = "r",
                         std::initializer_list<std::pair<std::string_view, std::string_view>> extra = {}) {
    std::vector<model::Label> v{{"__name__", std::string(name)}, {"project", "p"}, {"run", std::string(run)}};
    for (auto [n, x] : extra) v.push_back({std::string(n), std::string(x)});
    return model::Labels(std::move(v));
  }

  std::string dir_;
  int64_t now_ = kT0;
  int64_t keep_versions_ = 0;
  tsdb::testing::TempDB db_;
  common::metrics::Registry metrics_;  // outlives store_
  std::unique_ptr<RunStore> store_;
};

TEST_F(RunStoreTest, RunRoundTripsThroughReopen) {
  runs::Run r = Create(R"({"id":"abc","project":"p","name":"r","config":{"lr":0.0003,"opt":{"b":[1,2]}},
                    "tags":["x","y"],"total_steps":200,"host":"h1","pid":42,"command":"train.py --lr 3e-4",
                    "git_commit":"9b96403","world_size":8})");
  EXPECT_EQ(r.status, "running");
  EXPECT_EQ(r.start_time_ms, kT0);
  now_ += 1000;
  Batch("abc", R"({"batch_id":"b1","points":[{"step":10,"ts":1796218601000,"values":{"loss":0.5}}],
                  "summary":{"best":0.4}})");
  Open();
  auto got = store_->Get("abc");
  ASSERT_TRUE(got.ok());
  Json j = RunToJson(*got);
  EXPECT_EQ(j["config"], Json::parse(R"({"lr":0.0003,"opt":{"b":[1,2]}})"));
  EXPECT_EQ(j["tags"], Json::parse(R"(["x","y"])"));
  EXPECT_EQ(j["total_steps"], 200);
  EXPECT_EQ(j["step"], 10);
  EXPECT_EQ(j["host"], "h1");
  EXPECT_EQ(j["pid"], 42);
  EXPECT_EQ(j["command"], "train.py --lr 3e-4");
  EXPECT_EQ(j["git_commit"], "9b96403");
  EXPECT_EQ(j["world_size"], 8);
  EXPECT_EQ(j["summary"], Json::parse(R"({"loss":0.5,"best":0.4})"));
  EXPECT_DOUBLE_EQ(j["start_time"].get<double>(), kT0 / 1000.0);
  EXPECT_DOUBLE_EQ(j["heartbeat_time"].get<double>(), (kT0 + 1000) / 1000.0);
  EXPECT_DOUBLE_EQ(j["progress"].get<double>(), 0.05);
  EXPECT_TRUE(j["end_time"].is_null());
  EXPECT_EQ(store_->Get("nope").status().code(), StatusCode::kNotFound);
}

// Issue 19: GPU time, energy, idle time and cost add up per run, survive a
// reopen, and are written as counters; a runs.db from before the columns
// existed gets them when opened.
TEST_F(RunStoreTest, GpuUsageAddsUpAndSurvivesReopen) {
  Create(R"({"id":"g","project":"p","name":"r"})");
  now_ += 15000;
  ASSERT_TRUE(store_->AddGpuUsage({{"p", "r", {15, 9000, 0, 0.015}}, {"p", "nope", {1, 1, 1, 1}}}).ok());
  now_ += 15000;
  ASSERT_TRUE(store_->AddGpuUsage({{"p", "r", {30, 1800, 30, 0.03}}}).ok());
  Open();
  Json j = RunToJson(*store_->Get("g"));
  EXPECT_DOUBLE_EQ(j["gpu"]["hours"].get<double>(), 45 / 3600.0);
  EXPECT_DOUBLE_EQ(j["gpu"]["energy_kwh"].get<double>(), 10800 / 3.6e6);
  EXPECT_DOUBLE_EQ(j["gpu"]["idle_hours"].get<double>(), 30 / 3600.0);
  EXPECT_DOUBLE_EQ(j["gpu"]["cost"].get<double>(), 0.045);
  EXPECT_DOUBLE_EQ(FieldValue(*store_->Get("g"), "gpu_hours").get<double>(), 45 / 3600.0);
  EXPECT_TRUE(IsKnownField("gpu_cost"));
  EXPECT_EQ(Samples(L("trainwatch_run_gpu_seconds_total")), (std::vector<S>{{kT0 + 15000, 15}, {kT0 + 30000, 45}}));
  EXPECT_EQ(Samples(L("trainwatch_run_gpu_energy_joules_total")).back(), (S{kT0 + 30000, 10800}));
  EXPECT_EQ(Samples(L("trainwatch_run_gpu_idle_seconds_total")).back(), (S{kT0 + 30000, 30}));
  EXPECT_EQ(Samples(L("trainwatch_run_gpu_cost_total")).back(), (S{kT0 + 30000, 0.045}));

  // A database written before the GPU columns.
  store_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2((dir_ + "/old.db").c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, R"sql(
      CREATE TABLE runs(
        id TEXT PRIMARY KEY, project TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,
        config TEXT NOT NULL, tags TEXT NOT NULL, summary TEXT NOT NULL,
        total_steps INTEGER, step INTEGER, start_time_ms INTEGER NOT NULL, end_time_ms INTEGER,
        heartbeat_time_ms INTEGER NOT NULL, host TEXT NOT NULL, pid INTEGER, command TEXT NOT NULL,
        git_commit TEXT NOT NULL, world_size INTEGER, eta_seconds REAL, UNIQUE(project, name));
      INSERT INTO runs VALUES('old','p','o','finished','{}','[]','{}',NULL,NULL,1,2,2,'',NULL,'','',NULL,NULL);
      PRAGMA user_version=1;)sql", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  Open("old.db");
  auto old = store_->Get("old");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->gpu.seconds, 0);
  ASSERT_TRUE(store_->AddGpuUsage({{"p", "o", {5, 0, 0, 0}}}).ok());
  Open("old.db");
  EXPECT_EQ(store_->Get("old")->gpu.seconds, 5);
}

// Issue 19: every rank's process (not only rank 0's, which the run keeps),
// so the GPU collector attributes each rank's GPU to the run and rank.
TEST_F(RunStoreTest, ProcessesOfEveryRankOnAHost) {
  Create(R"({"id":"d","project":"p","name":"r","world_size":3,"rank":0,"host":"n1","pid":100})");
  Create(R"({"id":"d","project":"p","rank":1,"host":"n1","pid":101})");
  Create(R"({"id":"d","project":"p","rank":2,"host":"n2","pid":102})");
  Create(R"({"id":"old","project":"p","name":"o","host":"n1","pid":7})");
  auto procs = store_->ProcessesOn("n1");
  ASSERT_EQ(procs.size(), 3u);
  EXPECT_EQ(procs[100].rank, 0);
  EXPECT_EQ(procs[101].rank, 1);
  EXPECT_EQ(procs[101].run, "r");
  EXPECT_EQ(procs[7].run, "o");
  EXPECT_EQ(store_->ProcessesOn("n2").at(102).rank, 2);
  Create(R"({"id":"d","project":"p","rank":1,"host":"n1","pid":111})");  // rank 1 restarted
  Open();
  procs = store_->ProcessesOn("n1");
  EXPECT_EQ(procs.count(101), 0u);
  EXPECT_EQ(procs.at(111).rank, 1);
  ASSERT_TRUE(store_->Finish("d", *ParseFinishRequest(R"({"status":"finished"})")).ok());
  EXPECT_EQ(store_->ProcessesOn("n1").size(), 1u);  // only running runs' processes
}

// Issue 17, corrupt files: a runs.db that SQLite finds damaged (its header,
// or the pages of its tables) is set aside as runs.db.corrupt (then
// .corrupt.1) and a new one started, so the server comes up; the gauge
// counts the copies.
TEST_F(RunStoreTest, DamagedDatabaseIsSetAsideAndANewOneStarted) {
  Create(R"({"id":"abc","project":"p","name":"r"})");
  store_.reset();  // the last connection's close checkpoints the WAL into runs.db
  const std::string path = dir_ + "/runs.db";
  auto overwrite = [&](size_t from) {
    std::string data;
    ASSERT_TRUE(file::ReadFile(path, &data).ok());
    ASSERT_GT(data.size(), from);
    std::fill(data.begin() + static_cast<std::ptrdiff_t>(from), data.end(), '\xab');
    ASSERT_TRUE(file::WriteFileAtomic(path, data).ok());
  };
  overwrite(0);  // the header: SQLITE_NOTADB
  Open();
  EXPECT_EQ(store_->Get("abc").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(file::Exists(path + ".corrupt"));
  std::string m;
  metrics_.Render(&m);
  EXPECT_NE(m.find("\ntrainwatch_runs_db_set_aside 1\n"), std::string::npos) << m;
  // The new database works and keeps what it is given.
  Create(R"({"id":"def","project":"p","name":"r2"})");
  store_.reset();
  overwrite(4096);  // every page after the first (the schema): SQLITE_CORRUPT reading the runs
  Open();
  EXPECT_EQ(store_->Get("def").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(file::Exists(path + ".corrupt.1"));
  m.clear();
  metrics_.Render(&m);
  EXPECT_NE(m.find("\ntrainwatch_runs_db_set_aside 2\n"), std::string::npos) << m;
  Create(R"({"id":"ghi","project":"p","name":"r3"})");
  Open();
  EXPECT_TRUE(store_->Get("ghi").ok());
}

// Damage found while serving: a step chunk that does not decode (written
// here through SQLite, as a bad disk sector inside a row would read) makes
// the read that meets it set runs.db aside and start a new one holding every
// run's row; the read runs again there, and writes go on.
TEST_F(RunStoreTest, DatabaseDamagedWhileServingIsReplacedWithTheRunsItHeld) {
  Create(R"({"id":"abc","project":"p","name":"r"})");
  Create(R"({"id":"def","project":"p","name":"r2"})");
  now_ = kT0 + 10000;
  Batch("abc", R"({"batch_id":"b1","points":[{"step":1,"ts":1796218601000,"values":{"loss":0.5}}]})");
  ASSERT_EQ(ChunkCount(), 1);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open_v2((dir_ + "/runs.db").c_str(), &db, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db, "UPDATE step_chunks SET data = x'ff00ff00'", nullptr, nullptr, &err), SQLITE_OK) << err;
    sqlite3_close(db);
  }
  StepQuery q;
  auto r = store_->ReadSteps("abc", q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->empty());  // the history is in the copy
  EXPECT_TRUE(file::Exists(dir_ + "/runs.db.corrupt"));
  std::string m;
  metrics_.Render(&m);
  EXPECT_NE(m.find("\ntrainwatch_runs_db_set_aside 1\n"), std::string::npos) << m;
  // Every run is still listed, and survives a restart: the new file holds them.
  EXPECT_EQ(store_->List(Filter(), ListOptions()).size(), 2u);
  // The run's step series are written afresh in the new file.
  Batch("abc", R"({"batch_id":"b2","points":[{"step":2,"ts":1796218602000,"values":{"loss":0.4}}]})");
  EXPECT_EQ(Steps("abc", "loss"), (std::vector<StepPoint>{{2, 1796218602000, 0.4}}));
  Open();
  EXPECT_TRUE(store_->Get("abc").ok());
  EXPECT_TRUE(store_->Get("def").ok());
  EXPECT_EQ(Steps("abc", "loss"), (std::vector<StepPoint>{{2, 1796218602000, 0.4}}));
  m.clear();
  metrics_.Render(&m);
  EXPECT_NE(m.find("\ntrainwatch_runs_db_set_aside 1\n"), std::string::npos) << m;
}

TEST_F(RunStoreTest, KnownIdResumes) {
  Create(R"({"id":"abc","project":"p","name":"r","config":{"lr":1},"total_steps":10})");
  now_ += 5000;
  auto fin = store_->Finish("abc", *ParseFinishRequest(R"({"status":"failed"})"));
  ASSERT_TRUE(fin.ok());
  EXPECT_EQ(fin->status, "failed");
  EXPECT_EQ(*fin->end_time_ms, kT0 + 5000);
  now_ += 5000;
  runs::Run r = Create(R"({"id":"abc","project":"p","name":"other","config":{"lr":2}})");
  EXPECT_EQ(r.status, "running");
  EXPECT_EQ(r.name, "r");              // the run keeps its name
  EXPECT_EQ(r.config["lr"], 2);        // updated when given
  EXPECT_EQ(*r.total_steps, 10);       // kept when not
  EXPECT_EQ(r.start_time_ms, kT0);
  EXPECT_FALSE(r.end_time_ms);
  // Another rank joining changes nothing.
  runs::Run r2 = Create(R"({"id":"abc","project":"p","rank":3,"host":"other-host","config":{}})");
  EXPECT_EQ(r2.config["lr"], 2);
  // The id belongs to its project.
  auto bad = store_->CreateOrResume(*ParseCreateRequest(R"({"id":"abc","project":"q"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.error().IsInvalidArgument());
}

TEST_F(RunStoreTest, NamesAreUniqueWithinAProject) {
  EXPECT_EQ(Create(R"({"id":"a","project":"p","name":"x"})").name, "x");
  EXPECT_EQ(Create(R"({"id":"b","project":"p","name":"x"})").name, "x-2");
  EXPECT_EQ(Create(R"({"id":"c","project":"p","name":"x"})").name, "x-3");
  EXPECT_EQ(Create(R"({"id":"d","project":"q","name":"x"})").name, "x");
  EXPECT_EQ(Create(R"({"id":"e","project":"p"})").name, "e");  // default: the id
  Open();
  EXPECT_EQ(Create(R"({"id":"f","project":"p","name":"x"})").name, "x-4");
}

TEST_F(RunStoreTest, BatchIsIdempotent) {
  Create(R"({"id":"abc","project":"p","name":"r"})");
  now_ = kT0 + 10000;
  const char* body = R"({"batch_id":"b1","points":[{"step":1,"ts":1796218601000,"values":{"loss":0.5,"lr":0.1}},
                                                   {"step":2,"ts":1796218602000,"values":{"loss":0.4,"lr":0.1}}]})";
  BatchResult a = Batch("abc", body);
  EXPECT_EQ(a.accepted, 4u);
  EXPECT_FALSE(a.duplicate);
  BatchResult b = Batch("abc", body);
  EXPECT_EQ(b.accepted, 0u);
  EXPECT_TRUE(b.duplicate);
  Open();
  EXPECT_TRUE(Batch("abc", body).duplicate);  // remembered across restarts
  EXPECT_EQ(Samples(L("loss")), (std::vector<S>{{1796218601000, 0.5}, {1796218602000, 0.4}}));
  EXPECT_EQ(Samples(L("trainwatch_run_step")), (std::vector<S>{{1796218601000, 1}, {1796218602000, 2}}));
  EXPECT_EQ(db_->GetStats().duplicate_samples_total, 0u);
  EXPECT_EQ(Steps("abc", "loss"), (std::vector<StepPoint>{{1, 1796218601000, 0.5}, {2, 1796218602000, 0.4}}));
  auto unknown = store_->WriteBatch("nope", *ParseBatchRequest(R"({"batch_id":"x"})"));
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
}

// A crash after the TSDB commit but before the batch id is recorded: the
// retry appends the same samples again, and the TSDB keeps them once.
TEST_F(RunStoreTest, RetryAfterLostBatchIdStoresSamplesOnce) {
  const char* run = R"({"id":"abc","project":"p","name":"r"})";
  const char* body = R"({"batch_id":"b1","points":[{"step":1,"ts":1796218601000,"values":{"loss":0.5}}]})";
  Create(run);
  now_ = kT0 + 10000;
  Batch("abc", body);
  now_ += 1000;       // run series of the two stores at distinct timestamps
  Open("other.db");  // the same TSDB, a runs.db that never recorded b1
  Create(run);
  BatchResult r = Batch("abc", body);
  EXPECT_FALSE(r.duplicate);
  EXPECT_EQ(Samples(L("loss")), (std::vector<S>{{1796218601000, 0.5}}));
  EXPECT_EQ(Samples(L("trainwatch_run_step")), (std::vector<S>{{1796218601000, 1}}));
  EXPECT_EQ(db_->GetStats().duplicate_samples_total, 2u);
  EXPECT_EQ(Steps("abc", "loss"), (std::vector<StepPoint>{{1, 1796218601000, 0.5}}));
}

TEST_F(RunStoreTest, RejectedValuesDoNotLoseTheRest) {
  Create(R"({"id":"abc","project":"p","name":"r"})");
  now_ = kT0 + 10000;
  BatchResult r = Batch("abc", R"({"batch_id":"b1","points":[
      {"step":1,"ts":1796218601000,"values":{"loss":0.5,"":1,"acc":"high","trainwatch_run_active":1}},
      {"ts":1796218602000,"values":{"loss":0.4}},
      {"step":3,"ts":1796218603000,"values":{"loss":"NaN","train/loss":"-Inf","ok@1":2}},
      {"step":-1,"ts":1796218604000,"values":{"loss":0.1}}]})");
  EXPECT_EQ(r.accepted, 4u);
  Json rej = RejectionsJson(r.rejected);
  ASSERT_EQ(rej.size(), 5u) << rej.dump();
  EXPECT_EQ(rej[0]["point"], 0);
  EXPECT_EQ(rej[0]["key"], "");
  EXPECT_NE(rej[0]["error"].get<std::string>().find("maps to no metric name"), std::string::npos);
  EXPECT_EQ(rej[1]["key"], "acc");
  EXPECT_NE(rej[1]["error"].get<std::string>().find("not a number"), std::string::npos);
  EXPECT_EQ(rej[2]["key"], "trainwatch_run_active");
  EXPECT_EQ(rej[3]["point"], 1);
  EXPECT_TRUE(rej[3]["key"].is_null());
  EXPECT_EQ(rej[3]["error"], "missing step");
  EXPECT_EQ(rej[4]["point"], 3);
  auto loss = Samples(L("loss"));
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_EQ(loss[0].v, 0.5);
  EXPECT_TRUE(std::isnan(loss[1].v));
  EXPECT_EQ(Samples(L("train:loss")), (std::vector<S>{{1796218603000, -HUGE_VAL}}));
  EXPECT_EQ(Samples(L("U__ok_40_1")), (std::vector<S>{{1796218603000, 2}}));
  EXPECT_EQ(store_->Get("abc")->summary["loss"], "NaN");
  auto steps = Steps("abc", "loss");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1].step, 3);
  EXPECT_TRUE(std::isnan(steps[1].value));
}

// Issue 23: a point is stored by its step whatever its time; the TSDB's
// time view never holds a sample later than the server's clock (issue 25:
// one far-future sample must not end up in the TSDB).
TEST_F(RunStoreTest, FutureTimestampsAreStoredByStepAndClampedInTheTimeView) {
  Create(R"({"id":"abc","project":"p","name":"r"})");
  const int64_t wall = NowMillis();
  now_ = wall;
  const int64_t far = wall + 400LL * 86400 * 1000;
  BatchResult r = Batch("abc", R"({"batch_id":"b1","points":[
      {"step":1,"ts":)" + std::to_string(wall - 1000) + R"(,"values":{"loss":0.5}},
      {"step":2,"ts":)" + std::to_string(far) + R"(,"values":{"loss":0.4,"acc":"x"}},
      {"step":3,"ts":)" + std::to_string(wall + 5000) + R"(,"values":{"loss":0.3}}]})");
  EXPECT_EQ(r.accepted, 3u);
  Json rej = RejectionsJson(r.rejected);
  ASSERT_EQ(rej.size(), 1u) << rej.dump();
  EXPECT_EQ(rej[0]["key"], "acc");
  EXPECT_EQ(Steps("abc", "loss"), (std::vector<StepPoint>{{1, wall - 1000, 0.5}, {2, far, 0.4}, {3, wall + 5000, 0.3}}));
  // Steps 2 and 3 count as logged now: one sample, the later logged, at now.
  EXPECT_EQ(Samples(L("loss")), (std::vector<S>{{wall - 1000, 0.5}, {wall, 0.3}}));
  EXPECT_EQ(Samples(L("trainwatch_run_step")), (std::vector<S>{{wall - 1000, 1}, {wall, 3}}));
  EXPECT_EQ(store_->Get("abc")->step, std::optional<int64_t>(3));
}

// The time view: one sample per series and second of a batch, the last value
// of the second unless a NaN or Inf came in it, at the second's last point.
TEST_F(RunStoreTest, TimeViewHasOneSamplePerSecondAndKeepsNonFiniteValues) {
  Create(R"({"id":"a","project":"p","name":"r"})");
  now_ = kT0 + 100000;
  std::string body = R"({"batch_id":"b1","points":[)";
  for (int i = 0; i < 3000; i++) {  // 3 s at 1,000 steps a second, 4 points per ms
    if (i) body += ',';
    std::string loss = i == 1500 ? R"("NaN")" : std::to_string(i);
    body += R"({"step":)" + std::to_string(i) + R"(,"ts":)" + std::to_string(kT0 + i / 4) +
            R"(,"values":{"loss":)" + loss + R"(,"lr":)" + std::to_string(i) + "}}";
  }
  body += "]}";
  EXPECT_EQ(Batch("a", body).accepted, 6000u);
  // Seconds kT0/1000 (steps 0..3999 would be, here 0..2999 span 750 ms).
  EXPECT_EQ(Samples(L("lr")), (std::vector<S>{{kT0 + 749, 2999}}));
  auto loss = Samples(L("loss"));
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_EQ(loss[0].t, kT0 + 749);
  EXPECT_TRUE(std::isnan(loss[0].v));
  EXPECT_EQ(Samples(L("trainwatch_run_step")), (std::vector<S>{{kT0 + 749, 2999}}));
  // Every step is in the step store.
  auto steps = Steps("a", "lr");
  ASSERT_EQ(steps.size(), 3000u);
  for (int i = 0; i < 3000; i++) EXPECT_EQ(steps[i].value, i);
  // Across seconds: one sample each.
  body = R"({"batch_id":"b2","points":[)";
  for (int i = 0; i < 30; i++) {
    if (i) body += ',';
    body += R"({"step":)" + std::to_string(3000 + i) + R"(,"ts":)" + std::to_string(kT0 + 1000 + i * 100) +
            R"(,"values":{"lr":)" + std::to_string(i) + "}}";
  }
  body += "]}";
  Batch("a", body);
  EXPECT_EQ(Samples(L("lr")), (std::vector<S>{{kT0 + 749, 2999}, {kT0 + 1900, 9}, {kT0 + 2900, 19}, {kT0 + 3900, 29}}));
  // A batch ending in the millisecond of the previous batch's sample: its
  // sample goes 1 ms later, so the last logged value is the last sample.
  Batch("a", R"({"batch_id":"b3","points":[{"step":3030,"ts":1796218603900,"values":{"lr":-1}}]})");
  EXPECT_EQ(Samples(L("lr")).back(), (S{kT0 + 3901, -1}));
  EXPECT_EQ(Samples(L("trainwatch_run_step")).back(), (S{kT0 + 3901, 3030}));
}

// Single-point batches (a slow logger) are merged into bigger chunks as they
// come; the merged store reads the same, across a reopen, and a step logged
// again replaces the earlier value whichever chunk holds it.
TEST_F(RunStoreTest, SmallChunksAreMergedAndTheLastWriteOfAStepWins) {
  Create(R"({"id":"a","project":"p","name":"r"})");
  now_ = kT0 + 10000000;
  std::vector<StepPoint> want;
  for (int i = 0; i < 100; i++) {
    if (i == 60) Open();  // the small tail is picked up again
    Batch("a", R"({"batch_id":"s)" + std::to_string(i) + R"(","points":[{"step":)" + std::to_string(i) + R"(,"ts":)" +
                   std::to_string(kT0 + i * 1000) + R"(,"values":{"loss":)" + std::to_string(i) + "}}]}");
    want.push_back({i, kT0 + i * 1000, static_cast<double>(i)});
  }
  EXPECT_EQ(Steps("a", "loss"), want);
  EXPECT_LT(ChunkCount(), 100 / 4);
  // A resume from step 10 logs 10..14 again.
  for (int i = 10; i < 15; i++) {
    Batch("a", R"({"batch_id":"t)" + std::to_string(i) + R"(","points":[{"step":)" + std::to_string(i) + R"(,"ts":)" +
                   std::to_string(kT0 + 200000 + i) + R"(,"values":{"loss":-1}}]})");
    want[i] = {i, kT0 + 200000 + i, -1};
  }
  EXPECT_EQ(Steps("a", "loss"), want);
  Open();
  EXPECT_EQ(Steps("a", "loss"), want);
}

// A data dir from before the step store: the logged values are only in the
// TSDB, each beside a trainwatch_run_step sample of the same labels and time.
// The first open copies them into the step store; the run reads the same.
TEST_F(RunStoreTest, RunsOfAnOlderDataDirAreCopiedFromTheTsdb) {
  Create(R"({"id":"a","project":"p","name":"r"})");
  Create(R"({"id":"b","project":"p","name":"other"})");
  store_.reset();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/runs.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "DROP TABLE step_chunks; DROP TABLE step_series; PRAGMA user_version=0", nullptr,
                           nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto app = db_->NewAppender();
  auto add = [&](const model::Labels& ls, int64_t t, double v) { ASSERT_TRUE(app->Append(0, ls, t, v).ok()); };
  for (int i = 0; i < 20; i++) {
    add(L("loss"), kT0 + i, 100 + i);
    add(L("train:acc"), kT0 + i, i / 10.0);
    add(L("trainwatch_run_step"), kT0 + i, i);
  }
  // A resume logged steps 15..19 again, later.
  for (int i = 15; i < 20; i++) {
    add(L("loss"), kT0 + 1000 + i, -i);
    add(L("trainwatch_run_step"), kT0 + 1000 + i, i);
  }
  add(L("loss", "r", {{"rank", "1"}, {"host", "h1"}}), kT0 + 5, 7);
  add(L("trainwatch_run_step", "r", {{"rank", "1"}, {"host", "h1"}}), kT0 + 5, 3);
  add(L("trainwatch_run_active"), kT0, 1);  // a run series, not a logged value
  add(L("loss", "other"), kT0, 1);          // no step beside it: not a logged value
  ASSERT_TRUE(app->Commit().ok());
  Open();
  std::vector<StepPoint> want;
  for (int i = 0; i < 20; i++) want.push_back(i < 15 ? StepPoint{i, kT0 + i, 100.0 + i} : StepPoint{i, kT0 + 1000 + i, -1.0 * i});
  EXPECT_EQ(Steps("a", "loss"), want);
  EXPECT_EQ(Steps("a", "train:acc").size(), 20u);
  StepQuery q;
  q.rank = 1;
  auto ranked = store_->ReadSteps("a", q);
  ASSERT_TRUE(ranked.ok());
  ASSERT_EQ(ranked->size(), 1u);
  EXPECT_EQ((*ranked)[0].host, "h1");
  EXPECT_EQ((*ranked)[0].points, (std::vector<StepPoint>{{3, kT0 + 5, 7}}));
  auto all = store_->ReadSteps("a", {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);  // loss, loss rank 1, train:acc
  EXPECT_TRUE(store_->ReadSteps("b", {})->empty());
  // Copied once: a second open reads the step store as it is.
  Open();
  EXPECT_EQ(Steps("a", "loss"), want);
}

TEST_F(RunStoreTest, MalformedBodiesNameTheField) {
  auto f = [](std::string_view body, std::string_view want) {
    auto r = ParseBatchRequest(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_NE(r.error().message().find(want), std::string::npos) << r.error().message();
  };
  f("{", "not valid JSON");
  f("[]", "expected a JSON object");
  f(R"({"points":[]})", "field \"batch_id\"");
  f(R"({"batch_id":"b","points":{}})", "field \"points\"");
  f(R"({"batch_id":"b","points":[{"step":1,"ts":1,"values":{}}, 3]})", "field \"points[1]\"");
  f(R"({"batch_id":"b","points":[{"step":1,"ts":1,"values":[1]}]})", "field \"points[0].values\"");
  f(R"({"batch_id":"b","rank":-1})", "field \"rank\"");
  f(R"({"batch_id":"b","summary":3})", "field \"summary\"");
  EXPECT_NE(ParseCreateRequest(R"({"id":"a b","project":"p"})").error().message().find("\"id\""), std::string::npos);
  EXPECT_NE(ParseCreateRequest(R"({"id":"a"})").error().message().find("\"project\""), std::string::npos);
  EXPECT_NE(ParseCreateRequest(R"({"id":"a","project":"p","tags":["x",1]})").error().message().find("tags[1]"),
            std::string::npos);
  EXPECT_NE(ParseCreateRequest(R"({"id":"a","project":"p","total_steps":"x"})").error().message().find("total_steps"),
            std::string::npos);
  EXPECT_FALSE(ParseFinishRequest(R"({"status":"crashed"})").ok());
  EXPECT_FALSE(ParseAlertRequest(R"({"title":"t","level":"fatal"})").ok());
}

TEST_F(RunStoreTest, HeartbeatTimeoutMarksCrashed) {
  Create(R"({"id":"a","project":"p","name":"r"})");
  Create(R"({"id":"b","project":"p","name":"s"})");
  now_ += 30000;
  ASSERT_TRUE(store_->Heartbeat("b").ok());
  now_ += 30001;  // a: 60.001 s silent; b: 30.001 s
  EXPECT_EQ(store_->CheckHeartbeats(), 1);
  EXPECT_EQ(store_->Get("a")->status, "crashed");
  EXPECT_EQ(*store_->Get("a")->end_time_ms, now_);
  EXPECT_EQ(store_->Get("b")->status, "running");
  auto active = Samples(L("trainwatch_run_active"));
  ASSERT_FALSE(active.empty());
  EXPECT_EQ(active.back().v, 0);
  EXPECT_EQ(active.back().t, now_);
  EXPECT_EQ(store_->CheckHeartbeats(), 0);
  // A heartbeat from a run that was only silent brings it back.
  now_ += 1000;
  ASSERT_TRUE(store_->Heartbeat("a").ok());
  EXPECT_EQ(store_->Get("a")->status, "running");
  EXPECT_EQ(Samples(L("trainwatch_run_active")).back().v, 1);
  // Finished runs are never marked.
  ASSERT_TRUE(store_->Finish("a", *ParseFinishRequest(R"({"status":"finished"})")).ok());
  now_ += 120000;
  EXPECT_EQ(store_->CheckHeartbeats(), 1);  // b only
  EXPECT_EQ(store_->Get("a")->status, "finished");
  // After a restart, silence while the server was down does not count.
  Create(R"({"id":"c","project":"p","name":"t"})");
  now_ += 120000;
  Open();
  now_ += 59000;
  EXPECT_EQ(store_->CheckHeartbeats(), 0);
  now_ += 2000;
  EXPECT_EQ(store_->CheckHeartbeats(), 1);
}

TEST_F(RunStoreTest, ProgressAndEtaFromTheStepRate) {
  Create(R"({"id":"a","project":"p","name":"r","total_steps":1000})");
  // 2 steps per second for 100 s.
  std::string body = R"({"batch_id":"b1","points":[)";
  for (int i = 0; i <= 100; i++) {
    if (i) body += ',';
    body += R"({"step":)" + std::to_string(2 * i) + R"(,"ts":)" + std::to_string(kT0 + 1000 * i) +
            R"(,"values":{"loss":1}})";
  }
  body += "]}";
  now_ = kT0 + 101000;
  Batch("a", body);
  runs::Run r = *store_->Get("a");
  EXPECT_EQ(*r.step, 200);
  EXPECT_DOUBLE_EQ(*r.progress(), 0.2);
  ASSERT_TRUE(r.eta_seconds);
  EXPECT_DOUBLE_EQ(*r.eta_seconds, 400.0);  // 800 steps at 2/s
  EXPECT_EQ(Samples(L("trainwatch_run_eta_seconds")).back().v, 400.0);
  EXPECT_EQ(Samples(L("trainwatch_run_progress_ratio")).back().v, 0.2);
  EXPECT_EQ(Samples(L("trainwatch_run_total_steps")).back().v, 1000);
  // A non-zero rank neither moves the step nor the ETA.
  Batch("a", R"({"batch_id":"b2","rank":1,"host":"h2","points":[{"step":900,"ts":1796218700500,"values":{"loss":2}}]})");
  EXPECT_EQ(*store_->Get("a")->step, 200);
  EXPECT_EQ(Samples(L("loss", "r", {{"rank", "1"}, {"host", "h2"}})),
            (std::vector<S>{{1796218700500, 2}}));
  // Finishing ends the ETA series with a stale marker.
  ASSERT_TRUE(store_->Finish("a", *ParseFinishRequest(R"({"status":"finished","summary":{"acc":0.9}})")).ok());
  EXPECT_TRUE(model::IsStaleNaN(Samples(L("trainwatch_run_eta_seconds")).back().v));
  EXPECT_EQ(store_->Get("a")->summary["acc"], 0.9);
}

TEST_F(RunStoreTest, StepPhasesAreOneMetricWithAPhaseLabel) {
  Create(R"({"id":"a","project":"p","name":"r"})");
  now_ = kT0 + 5000;
  Batch("a", R"({"batch_id":"b1","rank":2,"host":"h2","points":[
      {"step":7,"ts":1796218601000,"values":{"step_phase/data":0.25,"step_phase/forward":0.5,"loss":1}},
      {"step":8,"ts":1796218602000,"values":{"step_phase/data loader":0.125}}]})");
  EXPECT_EQ(Samples(L("trainwatch_step_phase_seconds", "r", {{"host", "h2"}, {"phase", "data"}, {"rank", "2"}})),
            (std::vector<S>{{1796218601000, 0.25}}));
  EXPECT_EQ(Samples(L("trainwatch_step_phase_seconds", "r", {{"host", "h2"}, {"phase", "forward"}, {"rank", "2"}})),
            (std::vector<S>{{1796218601000, 0.5}}));
  EXPECT_EQ(Samples(L("trainwatch_step_phase_seconds", "r", {{"host", "h2"}, {"phase", "data loader"}, {"rank", "2"}})),
            (std::vector<S>{{1796218602000, 0.125}}));
  EXPECT_EQ(Samples(L("loss", "r", {{"host", "h2"}, {"rank", "2"}})), (std::vector<S>{{1796218601000, 1}}));
  // The step store keeps them by key; its series say which time-view series they are.
  MetricsQuery q;
  q.ids = {"a"};
  q.keys = {"step_phase/data"};
  auto res = store_->ReadMetrics(q);
  ASSERT_TRUE(res.ok()) << res.error().ToString();
  ASSERT_EQ(res->size(), 1u) << res->dump();
  EXPECT_EQ((*res)[0]["key"], "step_phase/data");
  EXPECT_EQ((*res)[0]["metric"], "trainwatch_step_phase_seconds");
  EXPECT_EQ((*res)[0]["labels"], Json::parse(R"({"rank":"2","host":"h2","phase":"data"})"));
}

TEST_F(RunStoreTest, ListFiltersSortsAndPages) {
  for (int i = 0; i < 5; i++) {
    now_ = kT0 + i * 1000;
    Create(R"({"id":"r)" + std::to_string(i) + R"(","project":"p","name":"n)" + std::to_string(i) +
           R"(","config":{"lr":)" + std::to_string(i) + R"(},"tags":[)" + (i % 2 ? R"("odd")" : "") + "]}");
  }
  auto ids = [](const std::vector<runs::Run>& rs) {
    std::string s;
    for (const runs::Run& r : rs) s += r.id + " ";
    return s;
  };
  EXPECT_EQ(ids(store_->List(*Filter::Parse(""), {})), "r4 r3 r2 r1 r0 ");  // newest first
  EXPECT_EQ(ids(store_->List(*Filter::Parse("tags contains 'odd'"), {})), "r3 r1 ");
  ListOptions o;
  o.sort = "config.lr";
  o.descending = false;
  o.offset = 1;
  o.limit = 2;
  EXPECT_EQ(ids(store_->List(*Filter::Parse("config.lr >= 1"), o)), "r2 r3 ");
}

TEST_F(RunStoreTest, AlertsAreKeptWithTheRun) {
  Create(R"({"id":"a","project":"p"})");
  ASSERT_TRUE(store_->AddAlert("a", *ParseAlertRequest(R"({"title":"loss spike","text":"x","level":"warning"})")).ok());
  EXPECT_EQ(store_->AddAlert("zz", RunAlert{}).code(), StatusCode::kNotFound);
  Open();
  auto a = store_->Alerts("a");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ((*a)[0].title, "loss spike");
  EXPECT_EQ((*a)[0].level, "warning");
  EXPECT_EQ((*a)[0].time_ms, kT0);
}

TEST_F(RunStoreTest, RetriedAlertWithTheSameIdIsKeptAndRoutedOnce) {
  Create(R"({"id":"a","project":"p"})");
  Create(R"({"id":"b","project":"p"})");
  int routed = 0;
  store_->SetAlertSink([&](const runs::Run&, const RunAlert&) { routed++; });
  const char* body = R"({"title":"loss spike","level":"warning","alert_id":"a.0.n1.A1"})";
  // The client's retry after a lost answer, then again after a restart.
  ASSERT_TRUE(store_->AddAlert("a", *ParseAlertRequest(body)).ok());
  ASSERT_TRUE(store_->AddAlert("a", *ParseAlertRequest(body)).ok());
  Open();
  store_->SetAlertSink([&](const runs::Run&, const RunAlert&) { routed++; });
  ASSERT_TRUE(store_->AddAlert("a", *ParseAlertRequest(body)).ok());
  // Another id, the same id on another run, and alerts without an id are all kept.
  ASSERT_TRUE(store_->AddAlert("a", *ParseAlertRequest(R"({"title":"t2","alert_id":"a.0.n1.A2"})")).ok());
  ASSERT_TRUE(store_->AddAlert("b", *ParseAlertRequest(body)).ok());
  ASSERT_TRUE(store_->AddAlert("a", *ParseAlertRequest(R"({"title":"plain"})")).ok());
  ASSERT_TRUE(store_->AddAlert("a", *ParseAlertRequest(R"({"title":"plain"})")).ok());
  EXPECT_EQ(routed, 5);
  auto a = store_->Alerts("a");
  ASSERT_TRUE(a.ok());
  std::vector<std::string> titles;
  for (const RunAlert& al : *a) titles.push_back(al.title);
  EXPECT_EQ(titles, (std::vector<std::string>{"loss spike", "t2", "plain", "plain"}));
  EXPECT_EQ(store_->Alerts("b")->size(), 1u);
  // An alert id must be a non-empty string of at most 256 characters.
  EXPECT_FALSE(ParseAlertRequest(R"({"title":"x","alert_id":""})").ok());
  EXPECT_FALSE(ParseAlertRequest(R"({"title":"x","alert_id":3})").ok());
  EXPECT_FALSE(ParseAlertRequest(R"({"title":"x","alert_id":")" + std::string(257, 'i') + R"("})").ok());
}

TEST_F(RunStoreTest, StoredAlertsGoToTheSinkWithTheRun) {
  Create(R"({"id":"a","project":"p","name":"sweep"})");
  std::vector<std::pair<runs::Run, RunAlert>> got;
  store_->SetAlertSink([&](const runs::Run& r, const RunAlert& al) {
    EXPECT_TRUE(store_->Get(r.id).ok());  // called without the store's lock
    got.emplace_back(r, al);
  });
  ASSERT_TRUE(store_->AddAlert("a", *ParseAlertRequest(R"({"title":"NaN loss","level":"error"})")).ok());
  EXPECT_EQ(store_->AddAlert("zz", RunAlert{}).code(), StatusCode::kNotFound);
  ASSERT_EQ(got.size(), 1u);  // not for an unknown run
  EXPECT_EQ(got[0].first.name, "sweep");
  EXPECT_EQ(got[0].first.project, "p");
  EXPECT_EQ(got[0].second.title, "NaN loss");
  EXPECT_EQ(got[0].second.level, "error");
  EXPECT_EQ(got[0].second.time_ms, kT0);
}

TEST_F(RunStoreTest, ReadMetricsByStepAndTime) {
  Create(R"({"id":"a","project":"p","name":"r"})");
  // Steps 0..999 at 1 ms apart, then a resume that logs steps 990..999 again.
  std::string body = R"({"batch_id":"b1","points":[)";
  for (int i = 0; i < 1000; i++) {
    if (i) body += ',';
    body += R"({"step":)" + std::to_string(i) + R"(,"ts":)" + std::to_string(kT0 + i) + R"(,"values":{"train/loss":)" +
            std::to_string(1000 - i) + "}}";
  }
  body += "]}";
  Batch("a", body);
  Batch("a", R"({"batch_id":"b2","rank":1,"points":[{"step":5,"ts":1796218600003,"values":{"train/loss":-7}}]})");
  MetricsQuery q;
  q.ids = {"a"};
  q.keys = {"train/loss"};
  q.points = 10;
  auto res = store_->ReadMetrics(q);
  ASSERT_TRUE(res.ok()) << res.error().ToString();
  ASSERT_EQ(res->size(), 2u) << res->dump();  // rankless, then rank 1
  const Json& s = (*res)[0];
  EXPECT_EQ(s["key"], "train/loss");
  EXPECT_EQ(s["metric"], "train:loss");
  EXPECT_EQ(s["labels"], Json::object());
  EXPECT_EQ(s["total_points"], 1000);
  ASSERT_EQ(s["points"].size(), 10u);
  EXPECT_EQ(s["points"][0], Json::parse(R"({"x":0,"min":901,"max":1000,"last":901,"count":100})"));
  EXPECT_EQ(s["points"][9], Json::parse(R"({"x":900,"min":1,"max":100,"last":1,"count":100})"));
  EXPECT_EQ((*res)[1]["labels"], Json::parse(R"({"rank":"1"})"));
  EXPECT_EQ((*res)[1]["points"], Json::parse(R"([{"x":5,"min":-7,"max":-7,"last":-7,"count":1}])"));
  // By time, smoothed, within a range; all keys when none are named.
  q.by_step = false;
  q.keys.clear();
  q.smoothing = 0.5;
  q.start = kT0 + 10;
  q.end = kT0 + 11;
  res = store_->ReadMetrics(q);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->size(), 2u) << res->dump();
  EXPECT_EQ((*res)[1]["total_points"], 0);  // rank 1 logged nothing then
  EXPECT_EQ((*res)[0]["points"], Json::parse(R"([{"x":1796218600.01,"min":990,"max":990,"last":990,"ema":990,"count":1},
                                                   {"x":1796218600.011,"min":989,"max":989,"last":989,"ema":989.3333333333334,"count":1}])"));
  q.ids = {"a", "nope"};
  EXPECT_EQ(store_->ReadMetrics(q).status().code(), StatusCode::kNotFound);
}

TEST_F(RunStoreTest, ReadMetricsStepRangeReadsTheLaterLogOfAResumedStep) {
  Create(R"({"id":"a","project":"p","name":"r"})");
  // Steps 0..99 at kT0 + i, then a resume from step 50 logs 50..79 again
  // later, with other values: the later log of a step is the one read.
  auto points = [](int from, int to, int64_t t0, int base) {
    std::string s;
    for (int i = from; i <= to; i++) {
      if (!s.empty()) s += ',';
      s += R"({"step":)" + std::to_string(i) + R"(,"ts":)" + std::to_string(t0 + i) + R"(,"values":{"loss":)" +
           std::to_string(base + i) + "}}";
    }
    return s;
  };
  Batch("a", R"({"batch_id":"b1","points":[)" + points(0, 99, kT0, 0) + "]}");
  Batch("a", R"({"batch_id":"b2","points":[)" + points(50, 79, kT0 + 1000, 1000) + "]}");
  MetricsQuery q;
  q.ids = {"a"};
  q.keys = {"loss"};
  q.start = 78;
  q.end = 81;
  auto res = store_->ReadMetrics(q);
  ASSERT_TRUE(res.ok()) << res.error().ToString();
  ASSERT_EQ(res->size(), 1u) << res->dump();
  std::vector<std::pair<int64_t, double>> got;
  for (const Json& p : (*res)[0]["points"]) got.emplace_back(p["x"].get<int64_t>(), p["last"].get<double>());
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, double>>{{78, 1078}, {79, 1079}, {80, 80}, {81, 81}}));
  EXPECT_EQ((*res)[0]["total_points"], 4);
  // A range with no step in it: the series, with no points.
  q.start = 500;
  q.end = 600;
  res = store_->ReadMetrics(q);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(res->size(), 1u);
  EXPECT_EQ((*res)[0]["total_points"], 0);
  EXPECT_TRUE((*res)[0]["points"].empty());
}

TEST_F(RunStoreTest, RichValuesAreStoredByStepAndReadBack) {
  Create(R"({"id":"r1","project":"p","name":"r"})");
  const std::string png = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAAD";  // signature + IHDR of 2 x 3
  std::string body = R"({"batch_id":"b1","points":[)";
  for (int step = 0; step < 10; step++) {
    if (step > 0) body += ",";
    body += R"({"step":)" + std::to_string(step) + R"(,"ts":)" + std::to_string(kT0 + step) +
            R"(,"values":{"loss":1,"w":{"_type":"histogram","buckets":[[0,1,)" + std::to_string(step) +
            R"(]]},"img":{"_type":"image","format":"png","data":")" + png + R"("},"notes":{"_type":"text","text":"s)" +
            std::to_string(step) + R"("}}})";
  }
  body += "]}";
  BatchResult b = Batch("r1", body);
  EXPECT_EQ(b.accepted, 40u);
  EXPECT_TRUE(b.rejected.empty());

  auto keys = store_->MediaKeys({"r1"});
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(*keys, Json::parse(R"([
    {"run":"r1","key":"img","kind":"image","steps":10,"first_step":0,"last_step":9},
    {"run":"r1","key":"notes","kind":"text","steps":10,"first_step":0,"last_step":9},
    {"run":"r1","key":"w","kind":"histogram","steps":10,"first_step":0,"last_step":9}])"));

  MediaQuery q;
  q.ids = {"r1"};
  q.key = "w";
  q.limit = 4;
  auto h = store_->ReadHistograms(q);
  ASSERT_TRUE(h.ok()) << h.error().ToString();
  ASSERT_EQ(h->size(), 4u);  // steps 0, 3, 6, 9: spread, first and last kept
  EXPECT_EQ((*h)[0]["step"], 0);
  EXPECT_EQ((*h)[1]["step"], 3);
  EXPECT_EQ((*h)[3]["step"], 9);
  EXPECT_EQ((*h)[3]["buckets"], Json::parse("[[0.0, 1.0, 9.0]]"));
  EXPECT_EQ((*h)[3]["timestamp"], kT0 + 9);
  EXPECT_TRUE((*h)[3]["rank"].is_null());

  q.key = "notes";
  q.limit = 1000;
  q.step = 4;  // the slider's question: the last entry at or before step 4
  auto t = store_->ReadMedia(q);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0]["text"], "s4");
  EXPECT_EQ((*t)[0]["kind"], "text");

  q.key = "img";
  q.step.reset();
  q.start = 8;
  auto img = store_->ReadMedia(q);
  ASSERT_TRUE(img.ok());
  ASSERT_EQ(img->size(), 2u);
  EXPECT_EQ((*img)[0]["width"], 2);
  EXPECT_EQ((*img)[0]["height"], 3);
  EXPECT_FALSE((*img)[0].contains("data"));
  auto content = store_->ReadMediaContent("r1", "img", 8, std::nullopt);
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(content->format, "png");
  EXPECT_TRUE(content->bytes.starts_with("\x89PNG"));
  EXPECT_EQ(store_->ReadMediaContent("r1", "img", 10, std::nullopt).status().code(), StatusCode::kNotFound);

  // A step logged again replaces its value; another kind under a key is rejected.
  b = Batch("r1", R"({"batch_id":"b2","points":[{"step":9,"ts":1796218601000,"values":{
      "notes":{"_type":"text","text":"again"},"w":{"_type":"text","text":"x"}}}]})");
  EXPECT_EQ(b.accepted, 1u);
  ASSERT_EQ(b.rejected.size(), 1u);
  EXPECT_EQ(b.rejected[0].key, "w");
  EXPECT_NE(b.rejected[0].error.find("the key holds histogram values"), std::string::npos);
  q.key = "notes";
  q.start.reset();
  q.step = 100;
  t = store_->ReadMedia(q);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0]["text"], "again");

  // Kept across a reopen.
  Open();
  keys = store_->MediaKeys({"r1"});
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 3u);
}

TEST_F(RunStoreTest, RichValuesOfRanksAreSeparate) {
  Create(R"({"id":"r1","project":"p","name":"r"})");
  for (int rank : {0, 1}) {
    Batch("r1", R"({"batch_id":"b)" + std::to_string(rank) + R"(","rank":)" + std::to_string(rank) +
                    R"(,"points":[{"step":5,"ts":1796218600000,"values":{"t":{"_type":"table","columns":["rank"],"rows":[[)" +
                    std::to_string(rank) + "]]}}}]}");
  }
  MediaQuery q;
  q.ids = {"r1"};
  q.key = "t";
  q.step = 5;
  auto t = store_->ReadMedia(q);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1]["rank"], 1);
  EXPECT_EQ((*t)[1]["rows"], Json::parse("[[1]]"));
  q.rank = 0;
  t = store_->ReadMedia(q);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 1u);
  EXPECT_EQ((*t)[0]["rows"], Json::parse("[[0]]"));
  // An image of rank 1 only: found without naming the rank.
  Batch("r1", R"({"batch_id":"i1","rank":1,"points":[{"step":5,"ts":1796218600000,"values":{
      "img":{"_type":"image","format":"png","data":"iVBORw0KGgoAAAANSUhEUgAAAAIAAAAD"}}}]})");
  EXPECT_TRUE(store_->ReadMediaContent("r1", "img", 5, std::nullopt).ok());
  EXPECT_TRUE(store_->ReadMediaContent("r1", "img", 5, 1).ok());
  EXPECT_EQ(store_->ReadMediaContent("r1", "img", 5, 0).status().code(), StatusCode::kNotFound);
}

TEST_F(RunStoreTest, ArtifactsHaveVersionsByContentAndLineage) {
  keep_versions_ = 2;
  Open();
  Create(R"({"id":"train","project":"p","name":"train"})");
  Create(R"({"id":"eval","project":"p","name":"eval"})");
  // Contents "w0" .. "w3" and their SHA-256.
  const std::string kSha[] = {"762036e1ef0cea7232acd90a28bde9177f7a48a74143f27ad78cadd89bffc467", "60c5590f72eef292f9545afc28bf63ca91d2016a0a288f90f9a32f89d3fffcaf", "06f8faea3b5f697691b6d063a07ba4ffaf1ece9a1d473c588565231cdc8e59cc", "55eae50b75e2b2990f2c18be84ca079727a85f61b839c3359249801fe1ab9e9c"};
  auto log = [&](int i) {
    auto req = ParseArtifactRequest(R"({"name":"model","type":"model","sha256":")" + kSha[i] +
                                    R"(","size":2,"uri":"file:///ckpt/w)" + std::to_string(i) + R"("})");
    EXPECT_TRUE(req.ok()) << req.error().ToString();
    auto v = store_->LogArtifact("train", *req);
    EXPECT_TRUE(v.ok()) << v.error().ToString();
    return v.ok() ? *v : Artifact{};
  };
  Artifact v0 = log(0);
  EXPECT_EQ(v0.version, 0);
  EXPECT_EQ(v0.producer, "train");
  EXPECT_FALSE(v0.stored);
  EXPECT_EQ(log(0).id, v0.id);  // the same content: the same version

  // Upload: the bytes must match the version's size and SHA-256.
  auto bad = store_->StoreArtifactContent(v0.id, "wX");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("SHA-256"), std::string::npos);
  EXPECT_EQ(store_->StoreArtifactContent(v0.id, "w").status().code(), StatusCode::kInvalidArgument);
  auto stored = store_->StoreArtifactContent(v0.id, "w0");
  ASSERT_TRUE(stored.ok()) << stored.error().ToString();
  EXPECT_TRUE(stored->stored);
  auto path = store_->ArtifactContentPath(v0.id);
  ASSERT_TRUE(path.ok());
  std::string read;
  ASSERT_TRUE(file::ReadFile(*path, &read).ok());
  EXPECT_EQ(read, "w0");

  // Lineage: eval uses the latest version, then v0 by number.
  Artifact v1 = log(1);
  EXPECT_EQ(v1.version, 1);
  auto used = store_->UseArtifact("eval", *ParseArtifactUse(R"({"name":"model"})"));
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(used->id, v1.id);
  used = store_->UseArtifact("eval", *ParseArtifactUse(R"({"name":"model","version":0})"));
  ASSERT_TRUE(used.ok());
  EXPECT_EQ(used->consumers, std::vector<std::string>{"eval"});
  EXPECT_EQ(store_->UseArtifact("eval", *ParseArtifactUse(R"({"name":"nope"})")).status().code(),
            StatusCode::kNotFound);
  auto of_run = store_->RunArtifacts("eval");
  ASSERT_TRUE(of_run.ok());
  EXPECT_EQ((*of_run)["logged"].size(), 0u);
  EXPECT_EQ((*of_run)["used"].size(), 2u);

  // Keep 2 versions: v0 is used by eval, a running run, and stays; once
  // eval has finished, the next version removes its content.
  log(2);
  EXPECT_TRUE(store_->GetArtifact(v0.id)->stored);
  ASSERT_TRUE(store_->Finish("eval", *ParseFinishRequest(R"({"status":"finished"})")).ok());
  log(3);
  auto gone = store_->GetArtifact(v0.id);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->stored);
  EXPECT_TRUE(gone->deleted);
  EXPECT_EQ(store_->ArtifactContentPath(v0.id).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(file::ReadFile(*path, &read).ok());
  auto all = store_->ListArtifacts("p", "model");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].version, 3);

  // Delete by hand; the version and its lineage stay.
  auto v3 = (*all)[0];
  ASSERT_TRUE(store_->StoreArtifactContent(v3.id, "w3").ok());
  auto del = store_->DeleteArtifactContent(v3.id);
  ASSERT_TRUE(del.ok());
  EXPECT_TRUE(del->deleted);
  EXPECT_EQ(store_->DeleteArtifactContent(v3.id).status().code(), StatusCode::kNotFound);
}

TEST_F(RunStoreTest, ParseArtifactRequestNamesTheField) {
  auto r = ParseArtifactRequest(R"({"name":"a/b","sha256":"00","size":1})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("field \"name\""), std::string::npos);
  r = ParseArtifactRequest(R"({"name":"a","sha256":"00","size":1})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("field \"sha256\""), std::string::npos);
  auto u = ParseArtifactUse(R"({"name":"a","version":"v3"})");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->version, 3);
  u = ParseArtifactUse(R"({"name":"a","version":"latest"})");
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->version);
}

}  // namespace
}  // namespace trainwatch::runs
