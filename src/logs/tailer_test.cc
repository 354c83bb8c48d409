#include "logs/tailer.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "base/file.h"

namespace trainwatch::logs {
namespace {

class TailerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_tailer_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    StoreOptions so;
    so.dir = dir_ + "/store";
    so.sync_full = false;
    store_ = std::move(LogStore::Open(so).value());
    in_.paths = {dir_ + "/*.log"};
    in_.labels = model::Labels{{"job", "train"}};
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }

  std::unique_ptr<Tailer> Make() {
    TailerOptions o;
    o.inputs = {in_};
    o.state_path = dir_ + "/tail.json";
    o.flush_ms = 0;
    auto t = Tailer::Make(o, store_.get());
    EXPECT_TRUE(t.ok()) << t.error().ToString();
    return std::move(*t);
  }
  void Write(const std::string& name, const std::string& text, bool append = true) {
    std::ofstream f(dir_ + "/" + name, append ? std::ios::app : std::ios::trunc);
    f << text;
  }
  std::vector<std::string> Messages() {
    auto r = store_->Select(*Query::Parse(""), {});
    std::vector<std::string> out;
    for (auto it = r->lines.rbegin(); it != r->lines.rend(); ++it) out.push_back(it->message);
    return out;
  }

  std::string dir_;
  std::unique_ptr<LogStore> store_;
  TailInput in_;
};

TEST_F(TailerTest, JoinsTracebacksDecodesJsonAndResumesFromSavedOffset) {
  in_.json = true;
  Write("a.log",
        "step 1\n"
        "Traceback (most recent call last):\n"
        "  File \"train.py\", line 3, in <module>\n"
        "    main()\n"
        "RuntimeError: CUDA error\n"
        "{\"level\":\"warning\",\"message\":\"json line\",\"step\":2}\n"
        "partial without newline");
  {
    auto t = Make();
    ASSERT_TRUE(t->PollOnce().ok());
  }
  EXPECT_EQ(Messages(), (std::vector<std::string>{
                            "step 1",
                            "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n    main()\n"
                            "RuntimeError: CUDA error",
                            "json line"}));
  auto r = store_->Select(*Query::Parse("level=WARNING step=2"), {});
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines[0].labels.Get("filename"), dir_ + "/a.log");
  EXPECT_EQ(r->lines[0].labels.Get("job"), "train");
  auto tb = store_->Select(*Query::Parse("level=ERROR traceback"), {});
  EXPECT_EQ(tb->lines.size(), 1u);

  // A restarted tailer continues where the last one stopped: no line twice.
  Write("a.log", " finished\nstep 3\n");
  auto t = Make();
  ASSERT_TRUE(t->PollOnce().ok());
  auto m = Messages();
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[3], "partial without newline finished");
  EXPECT_EQ(m[4], "step 3");
}

TEST_F(TailerTest, RotationAndTruncation) {
  auto t = Make();
  Write("b.log", "one\ntwo\n");
  ASSERT_TRUE(t->PollOnce().ok());
  Write("b.log", "three\n");
  ASSERT_EQ(::rename((dir_ + "/b.log").c_str(), (dir_ + "/b.log.1").c_str()), 0);
  Write("b.log", "four\n");
  ASSERT_TRUE(t->PollOnce().ok());
  EXPECT_EQ(Messages(), (std::vector<std::string>{"one", "two", "three", "four"}));
  Write("b.log", "x\n", /*append=*/false);  // truncated below the offset
  ASSERT_TRUE(t->PollOnce().ok());
  EXPECT_EQ(Messages(), (std::vector<std::string>{"one", "two", "three", "four", "x"}));
}

// A JSON line dated far in the future (or before retention) fails the
// store's bounds; the tailer drops and counts it and goes on, instead of
// retrying the same batch forever. A file name that is not UTF-8 does not
// stall the file either.
TEST_F(TailerTest, LineOutsideTimeBoundsIsDroppedAndCountedAndTheFileGoesOn) {
  store_.reset();
  StoreOptions so;
  so.dir = dir_ + "/store";
  so.sync_full = false;
  so.max_future_ms = 600000;
  so.retention_ms = 86400000;
  store_ = std::move(LogStore::Open(so).value());
  in_.json = true;
  in_.paths = {dir_ + "/*.log*"};
  Write("c.log",
        "before\n"
        "{\"time\":\"2262-01-01T00:00:00Z\",\"message\":\"future\"}\n"
        "{\"time\":\"2001-01-01T00:00:00Z\",\"message\":\"ancient\"}\n"
        "after\n");
  Write("c.log\xff", "latin-1 name\n");
  auto t = Make();
  ASSERT_TRUE(t->PollOnce().ok());
  auto m = Messages();
  std::sort(m.begin(), m.end());
  EXPECT_EQ(m, (std::vector<std::string>{"after", "before", "latin-1 name"}));
  LogStore::Stats st = store_->GetStats();
  EXPECT_EQ(st.rejected_too_far_in_future, 1u);
  EXPECT_EQ(st.rejected_too_old, 1u);
  Write("c.log", "later\n");
  ASSERT_TRUE(t->PollOnce().ok());
  EXPECT_EQ(Messages().size(), 4u);  // not stuck behind the dropped lines
  auto r = store_->Select(*Query::Parse("latin"), {});
  ASSERT_EQ(r->lines.size(), 1u);
  EXPECT_EQ(r->lines[0].labels.Get("filename"), dir_ + "/c.log\xEF\xBF\xBD");
  // The offsets of both files were saved (the non-UTF-8 name as hex): a restart repeats nothing.
  t.reset();
  t = Make();
  ASSERT_TRUE(t->PollOnce().ok());
  EXPECT_EQ(Messages().size(), 4u);
}

TEST_F(TailerTest, BadMultilineRegexNamesTheField) {
  in_.multiline_start = "(";
  TailerOptions o;
  o.inputs = {in_};
  auto t = Tailer::Make(o, store_.get());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message().find("multiline.start"), std::string::npos);
}

}  // namespace
}  // namespace trainwatch::logs
