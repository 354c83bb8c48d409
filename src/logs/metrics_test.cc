#include "logs/metrics.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include "tsdb/temp_db_test_util.h"

namespace trainwatch::logs {
namespace {

Record Rec(std::string run, std::string level, std::string msg) {
  Record r;
  r.labels = model::Labels{{"project", "p"}, {"run", run}};
  r.level = std::move(level);
  r.message = std::move(msg);
  return r;
}

TEST(LogMetricsTest, DefaultPatternsMatchTypicalTrainingFailures) {
  auto f = [](std::string_view msg) {
    std::vector<std::string> hits;
    for (const Pattern& p : DefaultPatterns()) {
      if (RE2::PartialMatch(msg, RE2(p.regex))) hits.push_back(p.name);
    }
    return hits;
  };
  EXPECT_EQ(f("RuntimeError: CUDA error: an illegal memory access was encountered"),
            (std::vector<std::string>{"cuda_error"}));
  EXPECT_EQ(f("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
            (std::vector<std::string>{"out_of_memory"}));
  EXPECT_EQ(f("[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)"),
            (std::vector<std::string>{"nccl_timeout"}));
  EXPECT_EQ(f("NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, unhandled system error"),
            (std::vector<std::string>{"nccl_error"}));
  EXPECT_EQ(f("Traceback (most recent call last):"), (std::vector<std::string>{"traceback"}));
  EXPECT_EQ(f("step 100 loss nan lr 0.001"), (std::vector<std::string>{"nan"}));
  EXPECT_TRUE(f("step 100 loss 2.31 lr 0.001 (finance report)").empty());
}

TEST(LogMetricsTest, FlushWritesCountersToTsdb) {
  tsdb::testing::TempDB db;
  auto m = LogMetrics::Make(DefaultPatterns(), db.get(), 1000);
  ASSERT_TRUE(m.ok());
  (*m)->Observe({Rec("a", "ERROR", "CUDA error: out of memory"), Rec("a", "INFO", "step 1"), Rec("a", "INFO", "step 2")});
  ASSERT_TRUE((*m)->Flush(1700000000000).ok());
  (*m)->Observe({Rec("a", "INFO", "step 3")});
  ASSERT_TRUE((*m)->Flush(1700000001000).ok());
  auto data = db.Data();
  model::Labels info{{"__name__", "trainwatch_log_lines_total"}, {"level", "INFO"}, {"project", "p"}, {"run", "a"}};
  ASSERT_TRUE(data.count(info));
  const auto& s = data[info];
  ASSERT_EQ(s.size(), 3u);  // 0 one interval before the first write, then 2, then 3
  EXPECT_EQ(s[0].v, 0);
  EXPECT_EQ(s[1].v, 2);
  EXPECT_EQ(s[2].v, 3);
  model::Labels cuda{{"__name__", "trainwatch_log_pattern_matches_total"}, {"pattern", "cuda_error"}, {"project", "p"},
                     {"run", "a"}};
  ASSERT_TRUE(data.count(cuda));
  EXPECT_EQ(data[cuda].back().v, 1);
  model::Labels oom{{"__name__", "trainwatch_log_pattern_matches_total"}, {"pattern", "out_of_memory"}, {"project", "p"},
                    {"run", "a"}};
  ASSERT_TRUE(data.count(oom));
}

TEST(LogMetricsTest, BadPatternNamesIt) {
  auto m = LogMetrics::Make({{"broken", "("}}, nullptr, 1000);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message().find("broken"), std::string::npos);
}

}  // namespace
}  // namespace trainwatch::logs
