#include "app/flags.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

namespace trainwatch::app {
namespace {

Result<CommandLine> Parse(std::vector<const char*> args) {
  args.insert(args.begin(), "trainwatch");
  return ParseCommandLine(static_cast<int>(args.size()), args.data());
}

TEST(FlagsTest, ServeDefaults) {
  auto c = Parse({"serve"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kServe);
  EXPECT_EQ(c->serve.listen, "127.0.0.1:9800");
  EXPECT_EQ(c->serve.data_dir, "data");
  EXPECT_EQ(c->serve.retention_ms, 15LL * 86400000);
  EXPECT_EQ(c->serve.retention_bytes, 0u);
  EXPECT_EQ(c->serve.wal_sync, tsdb::WalSync::kPerRequest);
}

TEST(FlagsTest, FlagsOverrideConfig) {
  std::string path = ::testing::TempDir() + "/tw_flags_test.yml";
  std::ofstream(path) << "global:\n  scrape_interval: 15s\ntrainwatch:\n  storage:\n    data_dir: /from/config\n"
                         "    retention_time: 30d\n  web:\n    listen: 0.0.0.0:1\n";
  auto c = Parse({"serve", "--config.file", path.c_str(), "--listen", "127.0.0.1:2", "--retention.size", "10GB",
                  "--wal.sync", "interval", "--log.level", "debug"});
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->serve.data_dir, "/from/config");
  EXPECT_EQ(c->serve.retention_ms, 30LL * 86400000);
  EXPECT_EQ(c->serve.listen, "127.0.0.1:2");
  EXPECT_EQ(c->serve.retention_bytes, 10ull << 30);
  EXPECT_EQ(c->serve.wal_sync, tsdb::WalSync::kInterval);
  EXPECT_EQ(c->serve.log_level, log::Level::kDebug);
  c = Parse({"serve", "--config.file", path.c_str(), "--data-dir", "/flag", "--retention.time", "1d"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->serve.data_dir, "/flag");
  EXPECT_EQ(c->serve.retention_ms, 86400000);
  std::remove(path.c_str());
}

TEST(FlagsTest, BadValuesNameTheFlag) {
  auto c = Parse({"serve", "--retention.time", "soon"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().message(), "--retention.time: invalid duration \"soon\"");
  c = Parse({"serve", "--wal.sync", "never"});
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(c.error().message().starts_with("--wal.sync: "));
  c = Parse({"serve", "--log.level", "loud"});
  ASSERT_FALSE(c.ok());
  c = Parse({"serve", "--config.file", "/nonexistent/x.yml"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message().find("/nonexistent/x.yml"), std::string::npos);
}

TEST(FlagsTest, VersionAndUsageErrorsExit) {
  auto c = Parse({"--version"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kExit);
  EXPECT_EQ(c->exit_code, 0);
  c = Parse({"serve", "--bogus"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->command, CommandLine::Command::kExit);
  EXPECT_NE(c->exit_code, 0);
}

}  // namespace
}  // namespace trainwatch::app
