// The header-only C++ client, compiled as C++17, against a real trainwatch
// server (the binary in $TW_BINARY, started on a free loopback port and
// stopped by PID): every step once (by step; the TSDB keeps a per-second
// time view, never in the future), an unreachable server at init, a server
// killed and restarted mid-run, a refused run, bounded memory; rich values
// (Histogram, Image, Text, Table): their JSON checked here without a server,
// then logged, spooled, sent and read back through the media routes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "trainwatch/client.h"

namespace {

using nlohmann::json;
using trainwatch::client::Options;
using trainwatch::client::Run;

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

class Server {
 public:
  Server(std::string data_dir, int port) : data_dir_(std::move(data_dir)), port_(port) {}
  ~Server() { Kill(); }

  void Start() {
    const char* bin = std::getenv("TW_BINARY");
    ASSERT_NE(bin, nullptr) << "set TW_BINARY to the trainwatch binary";
    std::string listen = "127.0.0.1:" + std::to_string(port_);
    std::string log = data_dir_ + ".log";
    pid_ = fork();
    if (pid_ == 0) {
      if (freopen(log.c_str(), "a", stdout) == nullptr || freopen(log.c_str(), "a", stderr) == nullptr) _exit(126);
      execl(bin, bin, "serve", "--data-dir", data_dir_.c_str(), "--listen", listen.c_str(),
            "--runs.heartbeat-timeout", "1h", static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 600; i++) {
      std::string body;
      if (Get("/-/ready", &body) == 200) return;
      usleep(50000);
    }
    FAIL() << "server not ready; see " << log;
  }

  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  int Get(const std::string& path, std::string* body) {
    trainwatch::client::detail::Http h(trainwatch::client::detail::ParseUrl(Url()), 10);
    return h.Get(path, body);
  }
  json GetJson(const std::string& path) {
    std::string body;
    int status = Get(path, &body);
    EXPECT_EQ(status, 200) << path << ": " << body;
    return status == 200 ? json::parse(body)["data"] : json();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  std::string data_dir_;
  int port_;
  pid_t pid_ = -1;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw-cpp-client-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    server_ = std::make_unique<Server>(tmp_ + "/data", FreePort());
  }
  void TearDown() override {
    server_.reset();
    std::string cmd = "rm -rf '" + tmp_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  Options Opts(const std::string& name) {
    Options o;
    o.url = server_->Url();
    o.project = "cpp";
    o.name = name;
    o.spool_dir = tmp_ + "/spool";
    o.flush_interval_s = 0.05;
    o.timeout_s = 2;
    o.verbose = false;
    return o;
  }

  // Steps of the run's loss series for `rank`, by step, as the server has them.
  std::vector<double> StepsOf(const std::string& id, const std::string& key = "loss") {
    json m = server_->GetJson("/api/v1/runs/metrics?x=step&points=100000&ids=" + id + "&keys=" + key);
    std::vector<double> xs;
    if (!m.is_array() || m.size() != 1) {
      ADD_FAILURE() << m.dump();
      return xs;
    }
    for (const json& p : m[0]["points"]) xs.push_back(p["x"].get<double>());
    EXPECT_EQ(m[0]["total_points"].get<size_t>(), xs.size());
    return xs;
  }

  // Every sample the TSDB holds of the series `selector` matches: one list of
  // timestamps (unix ms) per series, via /api/v1/export.
  std::vector<std::vector<int64_t>> Exported(const std::string& selector) {
    std::string q;
    for (unsigned char c : selector) {
      if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
        q.push_back(static_cast<char>(c));
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "%%%02X", c);
        q += buf;
      }
    }
    std::string body;
    EXPECT_EQ(server_->Get("/api/v1/export?match[]=" + q, &body), 200) << body;
    std::vector<std::vector<int64_t>> out;
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) out.push_back(json::parse(line)["timestamps"].get<std::vector<int64_t>>());
    }
    return out;
  }

  static std::vector<double> Range(int n) {
    std::vector<double> v;
    for (int i = 0; i < n; i++) v.push_back(i);
    return v;
  }

  std::string tmp_;
  std::unique_ptr<Server> server_;
};

TEST_F(ClientTest, EveryStepOnceAndMetadata) {
  server_->Start();
  Options o = Opts("fast");
  o.config_json = R"({"lr": 0.001, "layers": 12, "optimizer": {"name": "adamw"}})";  // a nested "name"
  o.tags = {"cpp", "unit"};
  o.total_steps = 20000;
  std::string err;
  auto run = Run::Init(o, &err);
  ASSERT_NE(run, nullptr) << err;
  EXPECT_EQ(run->name(), "fast");
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < 20000; s++) run->Log({{"loss", 1.0 / (s + 1)}, {"train/acc", s * 1e-4}});  // faster than 1/ms
  double logging_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run->Log({{"bad", std::nan("")}}, 19999);
  run->SetSummary("best", 0.25);
  run->Alert("note", "a \"quoted\" text\n", "warning");
  EXPECT_TRUE(run->Finish());
  int64_t finished_ms = trainwatch::client::detail::NowMillis();
  // Many points share a millisecond; the runs API has every step once, by step, with its value.
  EXPECT_EQ(StepsOf(run->id()), Range(20000));
  EXPECT_EQ(StepsOf(run->id(), "train/acc"), Range(20000));
  json m = server_->GetJson("/api/v1/runs/metrics?x=step&points=100000&keys=loss&ids=" + run->id());
  ASSERT_EQ(m.size(), 1u) << m.dump();
  ASSERT_EQ(m[0]["points"].size(), 20000u);
  for (int s = 0; s < 20000; s++) ASSERT_EQ(m[0]["points"][s]["last"].get<double>(), 1.0 / (s + 1)) << s;
  // The TSDB's time view: per batch and second one sample per series, none in
  // the future, so far fewer samples than steps. The rule pack's recording
  // rules (trainwatch:loss) carry the run's labels and go on being evaluated
  // after the run finished, so the bound for every series is the export's
  // time; the run's own metric series end by the time Finish returned.
  auto series = Exported(R"({project="cpp",run="fast"})");
  int64_t exported_ms = trainwatch::client::detail::NowMillis();
  EXPECT_FALSE(series.empty());
  for (const auto& ts : series) {
    EXPECT_EQ(std::set<int64_t>(ts.begin(), ts.end()).size(), ts.size());
    for (int64_t t : ts) EXPECT_LE(t, exported_ms);
  }
  auto loss = Exported(R"(loss{run="fast"})");
  ASSERT_EQ(loss.size(), 1u);
  EXPECT_GE(loss[0].size(), 1u);
  for (int64_t t : loss[0]) EXPECT_LE(t, finished_ms + 1000);  // a few ms ahead where batches end in one ms
  EXPECT_LE(loss[0].size(), run->sent_batches() + static_cast<size_t>(logging_s) + 2);
  EXPECT_LT(loss[0].size(), 20000u / 10);
  json info = server_->GetJson("/api/v1/runs/" + run->id());
  EXPECT_EQ(info["status"], "finished");
  EXPECT_EQ(info["config"], json::parse(o.config_json));
  EXPECT_EQ(info["tags"], json::parse(R"(["cpp", "unit"])"));
  EXPECT_EQ(info["step"], 19999);
  EXPECT_EQ(info["summary"]["best"], 0.25);
  ASSERT_EQ(info["alerts"].size(), 1u);
  EXPECT_EQ(info["alerts"][0]["text"], "a \"quoted\" text\n");
  EXPECT_EQ(access(run->spool_dir().c_str(), F_OK), -1);  // removed once empty
}

TEST_F(ClientTest, StepPhaseTimers) {
  server_->Start();
  std::string err;
  auto run = Run::Init(Opts("phases"), &err);
  ASSERT_NE(run, nullptr) << err;
  for (int s = 0; s < 6; s++) {
    {
      auto t = run->Time("data");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    auto f = run->Time("forward");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    f.Stop();
    run->AddPhaseSeconds("comm", 0.5);
    if (s % 2 == 1) run->Log({{"loss", 1.0}}, s);  // every other step: per step over the two
  }
  run->Log({{"loss", 1.0}, {"step_phase/data", 7}}, 6);  // nothing timed since step 5
  EXPECT_TRUE(run->Finish());
  json m = server_->GetJson("/api/v1/runs/metrics?x=step&points=100&ids=" + run->id() +
                            "&keys=step_phase/data,step_phase/forward,step_phase/comm");
  ASSERT_EQ(m.size(), 3u) << m.dump();
  std::map<std::string, std::vector<std::pair<int64_t, double>>> got;
  for (const json& sr : m) {
    EXPECT_EQ(sr["metric"], "trainwatch_step_phase_seconds");
    for (const json& p : sr["points"]) got[sr["key"]].emplace_back(p["x"].get<int64_t>(), p["last"].get<double>());
  }
  // The run's first Log() counts one step: step 1 holds two steps' time.
  ASSERT_EQ(got["step_phase/comm"].size(), 3u);
  EXPECT_EQ(got["step_phase/comm"][0], (std::pair<int64_t, double>{1, 1.0}));
  EXPECT_EQ(got["step_phase/comm"][1], (std::pair<int64_t, double>{3, 0.5}));
  EXPECT_EQ(got["step_phase/comm"][2], (std::pair<int64_t, double>{5, 0.5}));
  const auto& data = got["step_phase/data"];
  ASSERT_EQ(data.size(), 4u);
  EXPECT_GE(data[0].second, 0.2);
  for (int i = 1; i < 3; i++) {
    EXPECT_GE(data[i].second, 0.1);
    EXPECT_LT(data[i].second, 0.2);
  }
  EXPECT_EQ(data[3], (std::pair<int64_t, double>{6, 7.0}));  // a value logged under the key is kept
  for (const auto& [step, v] : got["step_phase/forward"]) EXPECT_GE(v, 0.01) << step;
  auto series = Exported(R"(trainwatch_step_phase_seconds{run="phases",phase="comm"})");
  EXPECT_EQ(series.size(), 1u);
}

TEST_F(ClientTest, UnreachableAtInitThenKilledAndRestarted) {
  Options o = Opts("outage");
  o.total_steps = 3000;
  std::string err;
  auto run = Run::Init(o, &err);  // no server yet: not an error, everything spools
  ASSERT_NE(run, nullptr) << err;
  run->LogLine("RuntimeError: CUDA error: an illegal memory access was encountered");  // spooled, then sent
  for (int s = 0; s < 1000; s++) run->Log({{"loss", s * 0.5}});
  for (int i = 0; i < 100 && run->spooled() == 0; i++) usleep(20000);
  EXPECT_GT(run->spooled(), 0u);
  server_->Start();
  for (int s = 1000; s < 2000; s++) {
    run->Log({{"loss", s * 0.5}});
    usleep(500);
  }
  server_->Kill();  // mid-run, with batches in flight
  for (int s = 2000; s < 3000; s++) {
    run->Log({{"loss", s * 0.5}});
    usleep(300);
  }
  server_->Start();
  EXPECT_TRUE(run->Finish());
  EXPECT_EQ(StepsOf(run->id()), Range(3000));
  json info = server_->GetJson("/api/v1/runs/" + run->id());
  EXPECT_EQ(info["status"], "finished");
  EXPECT_EQ(info["name"], "outage");
  run->LogLine("checkpoint saved", "info");  // after Finish: dropped, as Log() is
  json lines = server_->GetJson("/api/v1/logs/query?limit=10&query=%7Bproject%3D%22cpp%22%7D")["lines"];
  ASSERT_EQ(lines.size(), 1u) << lines.dump();
  EXPECT_EQ(lines[0]["message"], "RuntimeError: CUDA error: an illegal memory access was encountered");
  EXPECT_EQ(lines[0]["level"], "ERROR");  // read from the message
  EXPECT_EQ(lines[0]["labels"]["run"], "outage");
  EXPECT_EQ(lines[0]["labels"]["source"], "app");
}

TEST_F(ClientTest, RanksAndBoundedMemory) {
  server_->Start();
  Options o = Opts("ranks");
  o.id = "cpp-ranks";
  o.world_size = 2;
  o.max_queue_points = 500;
  o.batch_points = 100;
  std::string err;
  o.rank = 1;
  auto r1 = Run::Init(o, &err);  // rank 1 first: it only makes sure the run exists
  ASSERT_NE(r1, nullptr) << err;
  o.rank = 0;
  o.config_json = R"({"owner": "rank0"})";
  auto r0 = Run::Init(o, &err);
  ASSERT_NE(r0, nullptr) << err;
  server_->Kill();
  for (int s = 0; s < 5000; s++) {
    r0->Log({{"loss", 1.0 * s}});
    r1->Log({{"loss", 2.0 * s}});
    ASSERT_LE(r0->Queued(), o.max_queue_points + 1);  // spilled to disk, not kept in memory
  }
  server_->Start();
  EXPECT_TRUE(r1->Finish());
  EXPECT_TRUE(r0->Finish());
  json m = server_->GetJson("/api/v1/runs/metrics?x=step&points=100000&ids=cpp-ranks&keys=loss");
  ASSERT_EQ(m.size(), 2u) << m.dump();
  std::set<std::string> ranks;
  for (const json& s : m) {
    ranks.insert(s["labels"]["rank"].get<std::string>());
    EXPECT_EQ(s["total_points"], 5000);
    EXPECT_FALSE(s["labels"]["host"].get<std::string>().empty());
  }
  EXPECT_EQ(ranks, (std::set<std::string>{"0", "1"}));
  json info = server_->GetJson("/api/v1/runs/cpp-ranks");
  EXPECT_EQ(info["config"]["owner"], "rank0");
  EXPECT_EQ(info["world_size"], 2);
  EXPECT_EQ(info["status"], "finished");
}

TEST_F(ClientTest, RefusedRunAndBadOptions) {
  server_->Start();
  Options o = Opts("a");
  o.id = "shared-id";
  std::string err;
  auto a = Run::Init(o, &err);
  ASSERT_NE(a, nullptr) << err;
  a->Finish();
  o.project = "other";  // a known id of another project is a 400
  EXPECT_EQ(Run::Init(o, &err), nullptr);
  EXPECT_NE(err.find("shared-id"), std::string::npos) << err;
  o.id = "metrics";
  EXPECT_EQ(Run::Init(o, &err), nullptr);
  EXPECT_NE(err.find("metrics"), std::string::npos) << err;
  o.id = "";
  o.url = "https://example.com";
  EXPECT_EQ(Run::Init(o, &err), nullptr);
  EXPECT_NE(err.find("url"), std::string::npos) << err;
}

// ---- rich values: the wire format (docs/runs-api.md, "Rich values") ----

std::string Png(int width, int height) {
  // Signature and an IHDR chunk (the server reads width and height there); the rest is not looked at.
  std::string p("\x89PNG\r\n\x1a\n", 8);
  p += std::string("\0\0\0\x0dIHDR", 8);
  for (int v : {width, height}) {
    for (int shift = 24; shift >= 0; shift -= 8) p.push_back(static_cast<char>((v >> shift) & 0xff));
  }
  p += std::string("\x08\x02\0\0\0", 5) + "crc!" + std::string("\0\0\0\0IEND", 8) + "crc!";
  return p;
}

TEST(RichValuesTest, Base64) {
  using trainwatch::client::detail::Base64;
  EXPECT_EQ(Base64(""), "");
  EXPECT_EQ(Base64("f"), "Zg==");
  EXPECT_EQ(Base64("fo"), "Zm8=");
  EXPECT_EQ(Base64("foo"), "Zm9v");
  EXPECT_EQ(Base64("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64(std::string("\xff\xfe\x00", 3)), "//4A");
}

TEST(RichValuesTest, HistogramOfValues) {
  trainwatch::Histogram h(std::vector<double>{0, 1, 2, 3, NAN, INFINITY}, 3);  // NaN and infinities dropped
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(h.type(), "histogram");
  EXPECT_EQ(json::parse(h.json()), json::parse(R"({"_type": "histogram", "buckets": [[0, 1, 1], [1, 2, 1], [2, 3, 2]]})"));
  // Constant values: one bucket [v, v, n]; floats from a vector or a pointer.
  std::vector<float> w = {0.5f, 0.5f, 0.5f};
  EXPECT_EQ(json::parse(trainwatch::Histogram(w).json())["buckets"], json::parse("[[0.5, 0.5, 3]]"));
  EXPECT_EQ(json::parse(trainwatch::Histogram(w.data(), w.size(), 8).json())["buckets"], json::parse("[[0.5, 0.5, 3]]"));
  std::vector<int> ints = {1, 2, 3, 4};
  trainwatch::Histogram hi(ints, 2);
  EXPECT_EQ(json::parse(hi.json())["buckets"], json::parse("[[1, 2.5, 2], [2.5, 4, 2]]"));
  // 64 bins by default; edges exact at the ends.
  std::vector<double> many;
  for (int i = 0; i < 1000; i++) many.push_back(std::sin(i));
  trainwatch::Histogram d(many);
  ASSERT_EQ(d.buckets().size(), 64u);
  double total = 0;
  for (const auto& b : d.buckets()) total += b.count;
  EXPECT_EQ(total, 1000);
  json j = json::parse(d.json());
  EXPECT_EQ(j["buckets"][63][1].get<double>(), d.buckets().back().upper);
  for (size_t i = 1; i < 64; i++) EXPECT_EQ(j["buckets"][i][0], j["buckets"][i - 1][1]);  // contiguous
  // Nothing finite to count, bins out of range: not ok, no JSON.
  trainwatch::Histogram none(std::vector<double>{NAN});
  EXPECT_FALSE(none.ok());
  EXPECT_EQ(none.json(), "");
  EXPECT_NE(none.error().find("no finite values"), std::string::npos) << none.error();
  EXPECT_FALSE(trainwatch::Histogram(std::vector<double>{1, 2}, 0).ok());
  EXPECT_FALSE(trainwatch::Histogram(std::vector<double>{1, 2}, 4097).ok());
}

TEST(RichValuesTest, HistogramFromCountsAndEdges) {
  auto h = trainwatch::Histogram::FromCounts({3, 0, 5.5}, {-1, 0, 0.25, 2});
  ASSERT_TRUE(h.ok()) << h.error();
  EXPECT_EQ(json::parse(h.json()), json::parse(R"({"_type": "histogram", "buckets": [[-1, 0, 3], [0, 0.25, 0], [0.25, 2, 5.5]]})"));
  EXPECT_FALSE(trainwatch::Histogram::FromCounts({}, {0}).ok());
  EXPECT_FALSE(trainwatch::Histogram::FromCounts({1, 2}, {0, 1}).ok());          // edges.size() != counts.size() + 1
  EXPECT_FALSE(trainwatch::Histogram::FromCounts({1, 2}, {0, 2, 1}).ok());       // not ascending
  EXPECT_FALSE(trainwatch::Histogram::FromCounts({1}, {0, INFINITY}).ok());      // an edge not finite
  EXPECT_FALSE(trainwatch::Histogram::FromCounts({-1}, {0, 1}).ok());            // a negative count
  EXPECT_FALSE(trainwatch::Histogram::FromCounts(std::vector<double>(4097, 1), std::vector<double>(4098, 0)).ok());
}

TEST(RichValuesTest, ImagesByTheirSignature) {
  std::string png = Png(3, 2);
  trainwatch::Image img(png, "epoch \"3\"\n");
  ASSERT_TRUE(img.ok()) << img.error();
  EXPECT_EQ(img.format(), "png");
  json j = json::parse(img.json());
  EXPECT_EQ(j["_type"], "image");
  EXPECT_EQ(j["format"], "png");
  EXPECT_EQ(j["data"], trainwatch::client::detail::Base64(png));
  EXPECT_EQ(j["caption"], "epoch \"3\"\n");
  std::string jpeg("\xff\xd8\xff\xe0rest", 8);
  trainwatch::Image jp(jpeg);
  ASSERT_TRUE(jp.ok());
  EXPECT_EQ(json::parse(jp.json()), json::parse(R"({"_type": "image", "format": "jpeg", "data": "/9j/4HJlc3Q="})"));
  for (std::string bad : {std::string("GIF89a"), std::string("\x89PNG", 4), std::string()}) {
    trainwatch::Image b(bad);
    EXPECT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.error().find("neither PNG nor JPEG"), std::string::npos) << b.error();
  }
  EXPECT_FALSE(trainwatch::Image(png + std::string(16u << 20, 'x')).ok());
  char tmpl[] = "/tmp/tw-cpp-img-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, jpeg.data(), jpeg.size()), static_cast<ssize_t>(jpeg.size()));
  close(fd);
  auto file = trainwatch::Image::FromFile(tmpl, "from a file");
  unlink(tmpl);
  ASSERT_TRUE(file.ok()) << file.error();
  EXPECT_EQ(json::parse(file.json())["data"], "/9j/4HJlc3Q=");
  auto missing = trainwatch::Image::FromFile("/nonexistent/x.png");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("/nonexistent/x.png"), std::string::npos);
}

TEST(RichValuesTest, TextAndTables) {
  trainwatch::Text t("# Title\n\"quoted\" \\ tab\t\x01 caf\xc3\xa9 bad\xff");
  ASSERT_TRUE(t.ok());
  // Bytes that are not UTF-8 become U+FFFD, so the batch stays valid JSON.
  EXPECT_EQ(json::parse(t.json()),
            json({{"_type", "text"}, {"text", "# Title\n\"quoted\" \\ tab\t\x01 caf\xc3\xa9 bad\xef\xbf\xbd"}}));
  EXPECT_FALSE(trainwatch::Text(std::string((1u << 20) + 1, 'x')).ok());

  trainwatch::Table tab({"name", "n", "score", "ok", "none"},
                        {{"a \"cat\"", 3, 0.5, true, nullptr},
                         {std::string("dog"), int64_t{-9007199254740993}, NAN, false, trainwatch::Cell()},
                         {"", uint64_t{18446744073709551615u}, 1e300, 1, 2.5f}});
  ASSERT_TRUE(tab.ok()) << tab.error();
  json j = json::parse(tab.json());
  EXPECT_EQ(j["_type"], "table");
  EXPECT_EQ(j["columns"], json::parse(R"(["name", "n", "score", "ok", "none"])"));
  EXPECT_EQ(j["rows"][0], json::parse(R"(["a \"cat\"", 3, 0.5, true, null])"));
  EXPECT_EQ(j["rows"][1][1].get<int64_t>(), -9007199254740993);  // integers exactly
  EXPECT_TRUE(j["rows"][1][2].is_null());                        // NaN: null (JSON has no NaN)
  EXPECT_EQ(j["rows"][1][3], false);
  EXPECT_EQ(j["rows"][2][1].get<double>(), 18446744073709551615.0);
  EXPECT_EQ(j["rows"][2][3], 1);
  EXPECT_EQ(j["rows"][2][4], 2.5);
  EXPECT_EQ(json::parse(trainwatch::Table({"x"}, {}).json()), json::parse(R"({"_type": "table", "columns": ["x"], "rows": []})"));
  EXPECT_FALSE(trainwatch::Table({}, {}).ok());
  EXPECT_FALSE(trainwatch::Table({"a", "b"}, {{1}}).ok());
  EXPECT_FALSE(trainwatch::Table(std::vector<std::string>(1001, "c"), {}).ok());
  EXPECT_FALSE(trainwatch::Table({"a"}, std::vector<std::vector<trainwatch::Cell>>(100001, {1})).ok());
}

TEST_F(ClientTest, RichValuesLoggedSpooledAndReadBack) {
  Options o = Opts("rich");
  o.batch_points = 2;  // several batches
  std::string err;
  auto run = Run::Init(o, &err);  // no server yet: spooled, sent once it is up
  ASSERT_NE(run, nullptr) << err;
  std::string png = Png(3, 2);
  for (int s = 0; s < 3; s++) {
    run->Log({{"loss", 1.0 / (s + 1)}},
             {{"weights", trainwatch::Histogram(std::vector<double>{0, 1, 2, 3.0 + s}, 2)},
              {"sample", trainwatch::Image(png, "step " + std::to_string(s))}},
             s);
  }
  run->Log("notes", trainwatch::Text("**hello**"), 1);
  run->Log("preds", trainwatch::Table({"x", "y"}, {{1, "one"}, {2, nullptr}}), 2);
  run->Log("bad", trainwatch::Image("not an image"), 2);  // dropped with a warning
  for (int i = 0; i < 100 && run->spooled() == 0; i++) usleep(20000);
  EXPECT_GT(run->spooled(), 0u);
  server_->Start();
  EXPECT_TRUE(run->Finish());
  EXPECT_EQ(StepsOf(run->id()), Range(3));
  std::string body;
  if (server_->Get("/api/v1/runs/media/keys?ids=" + run->id(), &body) == 404) {
    GTEST_SKIP() << "the server has no rich values yet (GET /api/v1/runs/media/keys is a 404)";
  }
  json keys = server_->GetJson("/api/v1/runs/media/keys?ids=" + run->id());
  std::map<std::string, std::pair<std::string, int64_t>> got;
  for (const json& k : keys) got[k["key"]] = {k["kind"], k["steps"]};
  EXPECT_EQ(got, (std::map<std::string, std::pair<std::string, int64_t>>{
                     {"weights", {"histogram", 3}}, {"sample", {"image", 3}}, {"notes", {"text", 1}}, {"preds", {"table", 1}}}));
  json h = server_->GetJson("/api/v1/runs/histograms?key=weights&ids=" + run->id());
  ASSERT_EQ(h.size(), 3u) << h.dump();
  EXPECT_EQ(h[2]["step"], 2);
  EXPECT_EQ(h[2]["buckets"], json::parse("[[0, 2.5, 3], [2.5, 5, 1]]"));
  json img = server_->GetJson("/api/v1/runs/media?key=sample&ids=" + run->id());
  ASSERT_EQ(img.size(), 3u) << img.dump();
  EXPECT_EQ(img[1]["format"], "png");
  EXPECT_EQ(img[1]["width"], 3);
  EXPECT_EQ(img[1]["height"], 2);
  EXPECT_EQ(img[1]["caption"], "step 1");
  std::string content;
  ASSERT_EQ(server_->Get(img[1]["url"].get<std::string>(), &content), 200);
  EXPECT_EQ(content, png);
  json notes = server_->GetJson("/api/v1/runs/media?key=notes&ids=" + run->id());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0]["text"], "**hello**");
  json preds = server_->GetJson("/api/v1/runs/media?key=preds&ids=" + run->id());
  ASSERT_EQ(preds.size(), 1u);
  EXPECT_EQ(preds[0]["rows"], json::parse(R"([[1, "one"], [2, null]])"));
}

}  // namespace
