#include "app/snapshot.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "app/flags.h"
#include "app/serve_components.h"
#include "base/file.h"
#include "notify/config.h"

namespace trainwatch::app {
namespace {

namespace fs = std::filesystem;

// Every section the components read, in one file.
constexpr std::string_view kFullConfig = R"(global:
  scrape_interval: 7s
  evaluation_interval: 11s
  external_labels: {cluster: gpu-a}
alerting:
  alertmanagers:
    - static_configs: [{targets: ['am:9093']}]
rule_files: ['rules/*.yml']
scrape_configs:
  - job_name: node
    static_configs: [{targets: ['node1:9100']}]
remote_write:
  - {url: 'http://lts:9201/write', name: lts}
remote_read:
  - {url: 'http://lts:9201/read', name: lts}
otlp:
  convert_histograms_to_nhcb: true
trainwatch:
  logs:
    patterns: {disk_full: 'No space left on device'}
)";

class ConfigSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_snapshot_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Write("rules/a.yml", "groups: []\n");
    Write("am.yml", "route: {receiver: team}\nreceivers: [{name: team}]\n");
    in_.config_file = dir_ + "/trainwatch.yml";
    in_.listen = "127.0.0.1:9800";
    in_.alertmanager_config_file = dir_ + "/am.yml";
    in_.external_url = "http://127.0.0.1:9800";
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }
  void Write(const std::string& rel, std::string_view text) {
    fs::path p = fs::path(dir_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  std::string dir_;
  SnapshotInputs in_;
};

void ExpectFullConfig(const ConfigSnapshot& s, const std::string& dir) {
  ASSERT_EQ(s.scrape.size(), 2u);  // node, then the self-scrape
  EXPECT_EQ(s.scrape[0].job_name, "node");
  EXPECT_EQ(s.scrape[1].job_name, "trainwatch");
  ASSERT_EQ(s.remote_write.size(), 1u);
  EXPECT_EQ(s.remote_write[0].url, "http://lts:9201/write");
  ASSERT_EQ(s.remote_read.size(), 1u);
  EXPECT_EQ(s.remote_read[0].url, "http://lts:9201/read");
  EXPECT_EQ(s.rules.evaluation_interval_ms, 11000);
  EXPECT_EQ(s.rules.external_labels.Get("cluster"), "gpu-a");
  ASSERT_EQ(s.rules.sources.size(), 2u);  // the built-in pack, then rules/a.yml
  EXPECT_TRUE(s.rules.sources[0].embedded);
  EXPECT_EQ(s.rules.sources[1].file, dir + "/rules/a.yml");
  ASSERT_TRUE(s.alerting.IsMap());
  EXPECT_TRUE(s.alerting["alertmanagers"].IsSequence());
  EXPECT_TRUE(s.config.otlp.convert_histograms_to_nhcb);
  bool disk_full = false;
  for (const logs::Pattern& p : s.config.logs.patterns) disk_full |= p.name == "disk_full";
  EXPECT_TRUE(disk_full);
  ASSERT_NE(s.alertmanager, nullptr);
  ASSERT_EQ(s.alertmanager->receivers.size(), 1u);
  EXPECT_EQ(s.alertmanager->receivers[0].name, "team");
}

TEST_F(ConfigSnapshotTest, EverySectionComesFromTheOneRead) {
  Write("trainwatch.yml", kFullConfig);
  auto s = LoadConfigSnapshot(in_);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ExpectFullConfig(**s, dir_);
}

// No section reads the config file again: parsed from text, with the file
// itself absent, every section is there.
TEST_F(ConfigSnapshotTest, NoSectionReadsTheFileAgain) {
  ASSERT_FALSE(fs::exists(in_.config_file));
  auto s = ParseConfigSnapshot(in_, kFullConfig);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ExpectFullConfig(**s, dir_);
}

// A reload reads a new snapshot before any component sees it: a bad section
// anywhere is the whole load's error, with today's messages, and no snapshot.
TEST_F(ConfigSnapshotTest, ABadSectionFailsTheWholeLoad) {
  auto f = [&](std::string_view yaml, std::string_view want) {
    Write("trainwatch.yml", yaml);
    auto s = LoadConfigSnapshot(in_);
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_NE(s.error().message().find(want), std::string::npos) << s.error().message();
  };
  const std::string file = "config file " + in_.config_file;
  f("scrape_configs: [{job_name: a, static_configs: [{targets: ['x:1']}], scrape_interval: nope}]", file);
  f("remote_write: [{name: x}]", file);
  f("remote_read: [{url: 'ftp://x'}]", file);
  f("global: {external_labels: {'': x}}", file + ": global.external_labels");
  f("alerting: {alertmanagers: [{bogus: 1}]}", file);
  f("trainwatch: {logs: {patterns: {x: '('}}}", file);
  f("otlp: {bogus: 1}", file);
  f("global: [", file);
  // The Alertmanager file is part of the same load.
  Write("trainwatch.yml", kFullConfig);
  Write("am.yml", "route: [\n");
  auto s = LoadConfigSnapshot(in_);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.error().message().starts_with("alertmanager config: ")) << s.error().message();
}

// Start-up reads the config file once: ParseCommandLine parses it (for the
// storage and web settings) and start-up's snapshot derives from that parse.
// The file removed after the command line is parsed, start-up still has every
// section; a reload reads the file again.
TEST_F(ConfigSnapshotTest, StartUpParsesTheConfigFileOnce) {
  Write("trainwatch.yml", std::string(kFullConfig) + "  storage: {retention_time: 3d}\n");
  const char* argv[] = {"trainwatch", "serve", "--config.file", in_.config_file.c_str()};
  auto cl = ParseCommandLine(4, argv);
  ASSERT_TRUE(cl.ok()) << cl.error().ToString();
  EXPECT_EQ(cl->serve.retention_ms, 3LL * 24 * 3600 * 1000);
  ASSERT_NE(cl->serve.config, nullptr);
  ASSERT_TRUE(fs::remove(in_.config_file));
  auto s = FirstConfigSnapshot(in_, cl->serve.config);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ExpectFullConfig(**s, dir_);
  EXPECT_FALSE(LoadConfigSnapshot(in_).ok());  // a reload reads the file

  // The agent's too.
  Write("trainwatch.yml", kFullConfig);
  const char* agent_argv[] = {"trainwatch", "agent", "--config.file", in_.config_file.c_str()};
  auto acl = ParseCommandLine(4, agent_argv);
  ASSERT_TRUE(acl.ok()) << acl.error().ToString();
  ASSERT_NE(acl->agent.config, nullptr);
  ASSERT_TRUE(fs::remove(in_.config_file));
  in_.serve = false;
  auto a = FirstConfigSnapshot(in_, acl->agent.config);
  ASSERT_TRUE(a.ok()) << a.error().ToString();
  ASSERT_EQ((*a)->remote_write.size(), 1u);
  EXPECT_EQ((*a)->remote_write[0].url, "http://lts:9201/write");

  // No config file: the defaults, as before.
  in_.config_file.clear();
  auto none = FirstConfigSnapshot(in_, nullptr);
  ASSERT_TRUE(none.ok()) << none.error().ToString();
  EXPECT_FALSE((*none)->config.logs.patterns.empty());
}

TEST_F(ConfigSnapshotTest, AgentLoadsNoRulesNorAlertmanager) {
  in_.serve = false;
  in_.remote_write_urls = {"http://other:9201/write"};
  Write("am.yml", "route: [\n");  // not read
  Write("trainwatch.yml", kFullConfig);
  auto s = LoadConfigSnapshot(in_);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ASSERT_EQ((*s)->remote_write.size(), 2u);
  EXPECT_EQ((*s)->remote_write[1].name, "cli-0");
  EXPECT_TRUE((*s)->rules.sources.empty());
  EXPECT_EQ((*s)->alertmanager, nullptr);
}

TEST_F(ConfigSnapshotTest, NoConfigFileIsTheDefaults) {
  in_.config_file.clear();
  auto s = LoadConfigSnapshot(in_);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  ASSERT_EQ((*s)->scrape.size(), 1u);  // the self-scrape
  EXPECT_TRUE((*s)->remote_write.empty());
  EXPECT_TRUE((*s)->remote_read.empty());
  ASSERT_EQ((*s)->rules.sources.size(), 1u);  // the built-in pack
  EXPECT_FALSE((*s)->config.logs.patterns.empty());  // the default patterns
}

// A logs reload prepares everything that can fail before it changes
// anything: an offsets file that cannot be read (here a directory) fails the
// reload, and the running forwarders stay as they were.
TEST_F(ConfigSnapshotTest, ALogsReloadThatFailsChangesNothing) {
  ServeOptions o;
  o.data_dir = dir_ + "/data";
  LogsComponent logs(o, nullptr, nullptr);
  auto load = [&](std::string_view forward) {
    Write("trainwatch.yml", std::string("trainwatch:\n  logs:\n    forward:\n") + std::string(forward));
    auto s = LoadConfigSnapshot(in_);
    EXPECT_TRUE(s.ok()) << s.error().ToString();
    return *s;
  };
  const std::string a = "      - {type: loki, url: 'http://127.0.0.1:1/a'}\n";
  const std::string b = "      - {type: loki, url: 'http://127.0.0.1:1/b'}\n";
  ASSERT_TRUE(logs.Open(*load(a)).ok());
  const std::vector<std::string> before = logs.forward_state_paths();
  ASSERT_EQ(before.size(), 1u);

  fs::create_directories(o.data_dir + "/logs/tail-offsets.json");  // unreadable as an offsets file
  Status r = logs.Apply(*load(b));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.message().starts_with("trainwatch.logs.files")) << r.message();
  EXPECT_EQ(logs.forward_state_paths(), before);  // a's forwarder still runs; b's not made

  // The same reload once the offsets file is readable: b replaces a.
  fs::remove(o.data_dir + "/logs/tail-offsets.json");
  auto p = logs.Prepare(*load(b));
  ASSERT_TRUE(p.ok()) << p.error().ToString();
  EXPECT_EQ(logs.forward_state_paths(), before);  // Prepare changes nothing
  logs.Commit(std::move(*p));
  const std::vector<std::string> after = logs.forward_state_paths();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(after, before);

  // A forwarder whose saved positions cannot be read fails the reload too.
  fs::create_directories(before[0]);
  r = logs.Apply(*load(a));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.message().starts_with("trainwatch.logs.forward")) << r.message();
  EXPECT_EQ(logs.forward_state_paths(), after);
  logs.StopInputs();
}

// remote_write's Prepare reads each destination's position file as a new
// sender would: one that cannot be read fails the reload before anything
// is applied, with remote_write's message.
TEST_F(ConfigSnapshotTest, ARemoteReloadWithAnUnreadablePositionFileFailsInPrepare) {
  ServeOptions o;
  o.data_dir = dir_ + "/data";
  RemoteComponent remote(o, nullptr, nullptr);
  Write("trainwatch.yml", kFullConfig);
  auto s = LoadConfigSnapshot(in_);
  ASSERT_TRUE(s.ok()) << s.error().ToString();
  auto ok = remote.Prepare(**s);
  ASSERT_TRUE(ok.ok()) << ok.error().ToString();
  EXPECT_EQ(ok->write.size(), 1u);
  fs::create_directories(o.data_dir + "/remote_write/lts.position");
  auto bad = remote.Prepare(**s);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.error().message().starts_with("remote_write lts")) << bad.error().message();
  EXPECT_FALSE(fs::exists(o.data_dir + "/remote_write/queue"));  // nothing opened
}

// Error paths and a normal exit stop in one order, whatever the start order.
TEST(ShutdownTest, StopsRegisteredStepsInShutdownOrderOnce) {
  std::vector<std::string> stopped;
  Shutdown sd;
  sd.Add(StopStep::kTsdb, [&] { stopped.push_back("tsdb"); });
  sd.Add(StopStep::kRemote, [&] { stopped.push_back("remote"); });
  sd.Add(StopStep::kHttp, [&] { stopped.push_back("http"); });
  sd.Add(StopStep::kScrape, [&] { stopped.push_back("scrape"); });
  sd.Add(StopStep::kLogInputs, [&] { stopped.push_back("log inputs"); });
  sd.Run();
  sd.Run();
  EXPECT_EQ(stopped, (std::vector<std::string>{"scrape", "log inputs", "http", "remote", "tsdb"}));
}

}  // namespace
}  // namespace trainwatch::app
