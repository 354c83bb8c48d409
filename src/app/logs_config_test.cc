#include "app/logs_config.h"

#include <gtest/gtest.h>

#include "app/config.h"

namespace trainwatch::app {
namespace {

TEST(LogsConfigTest, ParsesFilesPatternsAndForward) {
  auto c = ParseConfig(R"(
trainwatch:
  logs:
    patterns: {disk_full: 'No space left on device', nan: 'loss=nan'}
    files:
      - paths: ['/var/log/train/*.log']
        labels: {project: vision}
        json: true
        multiline: {start: '^\d{4}-'}
    forward:
      - {type: loki, url: 'http://127.0.0.1:3100'}
)");
  ASSERT_TRUE(c.ok()) << c.error().message();
  const LogsConfig& l = c->logs;
  ASSERT_EQ(l.files.size(), 1u);
  EXPECT_TRUE(l.files[0].json);
  EXPECT_EQ(l.files[0].labels.Get("project"), "vision");
  EXPECT_EQ(l.files[0].multiline_start, "^\\d{4}-");
  ASSERT_EQ(l.forward.size(), 1u);
  EXPECT_EQ(l.forward[0].kind, logs::ForwardTarget::Kind::kLoki);
  size_t defaults = logs::DefaultPatterns().size();
  ASSERT_EQ(l.patterns.size(), defaults + 1);  // nan replaced, disk_full added
  EXPECT_EQ(l.patterns.back().name, "disk_full");
}

// A config file without trainwatch.logs (or without a trainwatch section)
// has the default log patterns, as running without a config file has.
TEST(LogsConfigTest, DefaultPatternsWithoutALogsSection) {
  const size_t defaults = logs::DefaultPatterns().size();
  ASSERT_GT(defaults, 0u);
  for (std::string_view yaml : {"", "scrape_configs: []\n", "trainwatch: {scrape_self: false}\n"}) {
    auto c = ParseConfig(yaml);
    ASSERT_TRUE(c.ok()) << c.error().message();
    EXPECT_EQ(c->logs.patterns.size(), defaults) << "config: " << yaml;
  }
}

TEST(LogsConfigTest, ErrorsNameTheField) {
  auto f = [](std::string_view yaml, std::string_view want) {
    auto c = ParseConfig(yaml);
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.error().message().find(want), std::string::npos) << c.error().message();
  };
  f("trainwatch: {logs: {files: [{labels: {a: b}}]}}", "trainwatch.logs.files[0].paths");
  f("trainwatch: {logs: {files: [{paths: [x], multiline: {start: '('}}]}}", "trainwatch.logs.files[0].multiline.start");
  f("trainwatch: {logs: {patterns: {bad: '('}}}", "trainwatch.logs.patterns.bad");
  f("trainwatch: {logs: {forward: [{type: kafka, url: 'http://x'}]}}", "trainwatch.logs.forward[0].type");
  f("trainwatch: {logs: {bogus: 1}}", "unknown field \"bogus\"");
}

}  // namespace
}  // namespace trainwatch::app
