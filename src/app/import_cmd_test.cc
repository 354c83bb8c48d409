#include "app/import_cmd.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "base/file.h"

namespace trainwatch::app {
namespace {

namespace fs = std::filesystem;

class MlflowStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_mlflow_test_XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::path p = fs::path(dir_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  std::string dir_;
};

// The layout MLflow's FileStore writes: <experiment id>/meta.yaml, then per
// run <run id>/meta.yaml, params/<key>, tags/<key>, metrics/<key> (lines
// "timestamp value step"; a key with '/' as nested directories).
TEST_F(MlflowStoreTest, ReadsExperimentsRunsParamsTagsAndMetricLines) {
  Write("0/meta.yaml", "artifact_location: file:///tmp/mlruns/0\nexperiment_id: '0'\nlifecycle_stage: active\nname: Default\n");
  Write("42/meta.yaml", "artifact_location: file:///tmp/mlruns/42\nexperiment_id: '42'\nlifecycle_stage: active\nname: 'llama sweep'\n");
  Write("42/aa11/meta.yaml",
        "artifact_uri: file:///tmp/mlruns/42/aa11/artifacts\nend_time: 1700000100500\nentry_point_name: ''\n"
        "experiment_id: '42'\nlifecycle_stage: active\nrun_id: aa11\nrun_name: lr-3e-4\nrun_uuid: aa11\n"
        "source_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: 1700000000000\nstatus: 3\ntags: []\n"
        "user_id: alice\n");
  Write("42/aa11/params/lr", "0.0003");
  Write("42/aa11/params/optimizer", "adamw");
  Write("42/aa11/tags/mlflow.runName", "lr-3e-4");
  Write("42/aa11/tags/mlflow.source.git.commit", "9b96403");
  Write("42/aa11/tags/team", "nlp");
  Write("42/aa11/metrics/loss", "1700000001000 2.5 0\n1700000002000 nan 1\n1700000003000 1.5 2\n1700000004000 0.5 1\n");
  Write("42/aa11/metrics/train/acc", "1700000001000 0.1 0\nnot a line\n1700000002000 0.2\n");
  Write("42/bb22/meta.yaml", "run_id: bb22\nrun_uuid: bb22\nstatus: 4\nstart_time: 1700000000000\nlifecycle_stage: active\n");
  Write("42/bb22/tags/mlflow.runName", "from-tag");
  Write("42/cc33/meta.yaml", "run_id: cc33\nstatus: 3\nlifecycle_stage: deleted\n");  // deleted: not imported
  Write("7/meta.yaml", "experiment_id: '7'\nlifecycle_stage: deleted\nname: gone\n");
  Write("7/dd44/meta.yaml", "run_id: dd44\nstatus: 3\nlifecycle_stage: active\n");
  Write(".trash/meta.yaml", "name: trash\n");
  std::vector<std::string> warnings;
  auto runs = ReadMlflowStore(dir_, &warnings);
  ASSERT_TRUE(runs.ok()) << runs.error().ToString();
  ASSERT_EQ(runs->size(), 2u);
  const MlflowRun& a = (*runs)[0];
  EXPECT_EQ(a.experiment, "llama sweep");
  EXPECT_EQ(a.run_id, "aa11");
  EXPECT_EQ(a.name, "lr-3e-4");
  EXPECT_EQ(a.status, "FINISHED");
  EXPECT_EQ(a.start_time_ms, 1700000000000);
  EXPECT_EQ(a.end_time_ms, 1700000100500);
  EXPECT_EQ(a.params, (std::vector<std::pair<std::string, std::string>>{{"lr", "0.0003"}, {"optimizer", "adamw"}}));
  ASSERT_EQ(a.tags.size(), 3u);
  EXPECT_EQ(a.tags[2], (std::pair<std::string, std::string>{"team", "nlp"}));
  ASSERT_EQ(a.metrics.size(), 2u);
  EXPECT_EQ(a.metrics[0].first, "loss");
  ASSERT_EQ(a.metrics[0].second.size(), 4u);
  EXPECT_TRUE(std::isnan(a.metrics[0].second[1].value));
  EXPECT_EQ(a.metrics[0].second[3].step, 1);  // a step logged again: kept in file order
  EXPECT_EQ(a.metrics[0].second[3].ts_ms, 1700000004000);
  EXPECT_EQ(a.metrics[1].first, "train/acc");
  ASSERT_EQ(a.metrics[1].second.size(), 2u);
  EXPECT_EQ(a.metrics[1].second[1].step, 0);  // an old line without a step: step 0
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("train/acc:2: expected \"timestamp value [step]\""), std::string::npos) << warnings[0];
  const MlflowRun& b = (*runs)[1];
  EXPECT_EQ(b.name, "from-tag");
  EXPECT_EQ(b.status, "FAILED");
  EXPECT_EQ(b.end_time_ms, 0);
}

TEST_F(MlflowStoreTest, ADirThatIsNoStoreIsAnError) {
  std::vector<std::string> warnings;
  auto r = ReadMlflowStore(dir_, &warnings);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("no MLflow experiment"), std::string::npos);
  EXPECT_FALSE(ReadMlflowStore(dir_ + "/nope", &warnings).ok());
}

}  // namespace
}  // namespace trainwatch::app
