#include "logs/tailer.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

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
