#include "app/collect_loop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "base/file.h"
#include "model/sample.h"
#include "tsdb/temp_db_test_util.h"

namespace trainwatch::app {
namespace {

class CollectLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_collect_loop_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(file::MkdirAll(dir_ + "/proc/net").ok());
    ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/proc/loadavg", "0.5 0.25 0.125 1/2 3\n").ok());
    WriteNetdev(true);
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }

  void WriteNetdev(bool with_eth1) {
    std::string text =
        "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets "
        "errs drop fifo colls carrier compressed\n  eth0: 100 1 0 0 0 0 0 0 200 2 0 0 0 0 0 0\n";
    if (with_eth1) text += "  eth1: 300 3 0 0 0 0 0 0 400 4 0 0 0 0 0 0\n";
    ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/proc/net/dev", text).ok());
  }

  CollectOptions Options() {
    CollectOptions o;
    o.gpu = false;
    o.instance = "node7:9800";
    o.hostname = "node7";
    o.host_options.proc = dir_ + "/proc";
    o.host_options.sys = dir_ + "/sys";
    o.host_options.uname = false;
    o.host_options.now = [] { return 1700000000.0; };
    return o;
  }

  std::string dir_;
};

TEST_F(CollectLoopTest, StoresWithJobAndInstanceAndMarksVanishedSeriesStale) {
  tsdb::testing::TempDB db;
  const int64_t t1 = 1000000, t2 = 1015000;
  CollectLoop c(Options(), db.get(), nullptr);
  c.Open();
  c.CollectOnce(t1);
  WriteNetdev(false);
  c.CollectOnce(t2);

  auto data = db.Data();
  model::Labels load1{{"__name__", "node_load1"}, {"instance", "node7:9800"}, {"job", "node"}};
  ASSERT_TRUE(data.count(load1));
  const auto& l1 = data[load1];
  ASSERT_GE(l1.size(), 2u);
  EXPECT_EQ(l1[l1.size() - 2].t, t1);
  EXPECT_EQ(l1[l1.size() - 2].v, 0.5);
  EXPECT_EQ(l1.back().t, t2);

  model::Labels eth1{{"__name__", "node_network_receive_bytes_total"},
                     {"device", "eth1"},
                     {"instance", "node7:9800"},
                     {"job", "node"}};
  ASSERT_TRUE(data.count(eth1));
  const auto& e1 = data[eth1];
  ASSERT_GE(e1.size(), 2u);
  EXPECT_EQ(e1[e1.size() - 2].t, t1);
  EXPECT_EQ(e1[e1.size() - 2].v, 300);
  EXPECT_EQ(e1.back().t, t2);
  EXPECT_TRUE(model::IsStaleNaN(e1.back().v)) << "eth1 vanished at t2: want a stale marker";

  // /metrics gets the latest families.
  std::string text;
  c.snapshot()->Render(&text);
  EXPECT_NE(text.find("node_network_receive_bytes_total{device=\"eth0\"} 100\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("eth1"), std::string::npos);
}

}  // namespace
}  // namespace trainwatch::app
