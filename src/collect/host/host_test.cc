#include "collect/host/host.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

#include "base/file.h"

namespace trainwatch::collect::host {
namespace {

std::string Testdata() {
  const char* src = std::getenv("TW_SOURCE_DIR");
  return std::string(src != nullptr ? src : ".") + "/src/collect/host/testdata";
}

// name{a="b",c="d"} -> value, for every series.
std::map<std::string, double> Flatten(const Families& fams) {
  std::map<std::string, double> out;
  for (const Family& f : fams) {
    for (const Metric& m : f.metrics) {
      std::string key = f.name;
      if (!m.labels.empty()) {
        key += "{";
        bool first = true;
        for (const model::Label& l : m.labels) {
          if (!first) key += ",";
          first = false;
          key += l.name + "=\"" + l.value + "\"";
        }
        key += "}";
      }
      EXPECT_TRUE(out.emplace(key, m.value).second) << "duplicate series " << key;
    }
  }
  return out;
}

size_t CountPrefix(const std::map<std::string, double>& m, const std::string& prefix) {
  size_t n = 0;
  for (const auto& [k, v] : m) n += k.starts_with(prefix) ? 1 : 0;
  return n;
}

Options FixtureOptions() {
  Options o;
  o.proc = Testdata() + "/proc";
  o.sys = Testdata() + "/sys";
  o.udev_data = Testdata() + "/udev";
  o.statfs = [](const std::string& path, FsStats* st) -> Status {
    if (path == "/") {
      *st = FsStats{4096, 1000, 500, 400, 100, 50};
    } else if (path == "/data disk") {
      *st = FsStats{512, 10, 5, 5, 7, 6};
    } else {
      return Status::IOError("statfs " + path + ": permission denied");
    }
    return Status::OK();
  };
  o.now = [] { return 1700000000.5; };
  o.uname = false;
  return o;
}

class HostFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HostCollector c(FixtureOptions());
    c.Collect(&fams_);
    series_ = Flatten(fams_);
  }
  Families fams_;
  std::map<std::string, double> series_;
};

TEST_F(HostFixtureTest, Cpu) {
  EXPECT_DOUBLE_EQ(series_.at("node_cpu_seconds_total{cpu=\"0\",mode=\"user\"}"), 13932.80);
  EXPECT_DOUBLE_EQ(series_.at("node_cpu_seconds_total{cpu=\"1\",mode=\"idle\"}"), 134758.98);
  EXPECT_DOUBLE_EQ(series_.at("node_cpu_seconds_total{cpu=\"1\",mode=\"softirq\"}"), 32.16);
  EXPECT_DOUBLE_EQ(series_.at("node_cpu_guest_seconds_total{cpu=\"0\",mode=\"user\"}"), 239.33);
  EXPECT_EQ(CountPrefix(series_, "node_cpu_seconds_total{"), 16u);  // 2 cpus x 8 modes; the "cpu" total line is not a cpu
  EXPECT_EQ(CountPrefix(series_, "node_cpu_guest_seconds_total{"), 4u);
  EXPECT_EQ(series_.at("node_intr_total"), 8885917);
  EXPECT_EQ(series_.at("node_context_switches_total"), 38014093);
  EXPECT_EQ(series_.at("node_boot_time_seconds"), 1418183276);
  EXPECT_EQ(series_.at("node_forks_total"), 26442);
  EXPECT_EQ(series_.at("node_procs_running"), 2);
  EXPECT_EQ(series_.at("node_procs_blocked"), 1);
}

TEST_F(HostFixtureTest, LoadPressureMemoryVmstatFilefd) {
  EXPECT_EQ(series_.at("node_load1"), 0.21);
  EXPECT_EQ(series_.at("node_load5"), 0.37);
  EXPECT_EQ(series_.at("node_load15"), 0.39);
  EXPECT_DOUBLE_EQ(series_.at("node_pressure_cpu_waiting_seconds_total"), 14.036781);
  EXPECT_EQ(series_.count("node_pressure_cpu_stalled_seconds_total"), 0u);  // node_exporter 1.5 has no cpu "full"
  EXPECT_DOUBLE_EQ(series_.at("node_pressure_io_waiting_seconds_total"), 1.0);
  EXPECT_DOUBLE_EQ(series_.at("node_pressure_io_stalled_seconds_total"), 2.5);
  EXPECT_DOUBLE_EQ(series_.at("node_pressure_memory_waiting_seconds_total"), 3.0);
  EXPECT_DOUBLE_EQ(series_.at("node_pressure_memory_stalled_seconds_total"), 0.5);
  EXPECT_EQ(series_.at("node_memory_MemTotal_bytes"), 15666184.0 * 1024);
  EXPECT_EQ(series_.at("node_memory_Active_anon_bytes"), 2062712.0 * 1024);
  EXPECT_EQ(series_.at("node_memory_HugePages_Total"), 0);
  EXPECT_EQ(series_.at("node_memory_Hugepagesize_bytes"), 2048.0 * 1024);
  EXPECT_EQ(series_.at("node_vmstat_pgpgin"), 4523412);
  EXPECT_EQ(series_.at("node_vmstat_pgpgout"), 12345678);
  EXPECT_EQ(series_.at("node_vmstat_pswpin"), 3);
  EXPECT_EQ(series_.at("node_vmstat_pswpout"), 4);
  EXPECT_EQ(series_.at("node_vmstat_pgfault"), 987654321);
  EXPECT_EQ(series_.at("node_vmstat_pgmajfault"), 4321);
  EXPECT_EQ(series_.at("node_vmstat_oom_kill"), 1);
  EXPECT_EQ(CountPrefix(series_, "node_vmstat_"), 7u);  // not nr_free_pages, pgrefill, workingset_*
  EXPECT_EQ(series_.at("node_filefd_allocated"), 1024);
  EXPECT_EQ(series_.at("node_filefd_maximum"), 1631329);
  EXPECT_EQ(series_.at("node_time_seconds"), 1700000000.5);
}

TEST_F(HostFixtureTest, FilesystemWithDefaultExclusions) {
  const std::string root = "{device=\"/dev/sda1\",fstype=\"ext4\",mountpoint=\"/\"}";
  const std::string data = "{device=\"/dev/sdb1\",fstype=\"xfs\",mountpoint=\"/data disk\"}";
  const std::string broken = "{device=\"/dev/sdc1\",fstype=\"ext4\",mountpoint=\"/broken\"}";
  EXPECT_EQ(series_.at("node_filesystem_size_bytes" + root), 4096.0 * 1000);
  EXPECT_EQ(series_.at("node_filesystem_free_bytes" + root), 4096.0 * 500);
  EXPECT_EQ(series_.at("node_filesystem_avail_bytes" + root), 4096.0 * 400);
  EXPECT_EQ(series_.at("node_filesystem_files" + root), 100);
  EXPECT_EQ(series_.at("node_filesystem_files_free" + root), 50);
  EXPECT_EQ(series_.at("node_filesystem_readonly" + root), 0);
  EXPECT_EQ(series_.at("node_filesystem_device_error" + root), 0);
  EXPECT_EQ(series_.at("node_filesystem_readonly" + data), 1);
  EXPECT_EQ(series_.at("node_filesystem_size_bytes" + data), 5120);
  EXPECT_EQ(series_.at("node_filesystem_device_error" + broken), 1);
  EXPECT_EQ(series_.count("node_filesystem_size_bytes" + broken), 0u);
  // /proc, /run (mount point), overlay (fs type) are excluded; the duplicate / is once.
  EXPECT_EQ(CountPrefix(series_, "node_filesystem_device_error{"), 3u);
  EXPECT_EQ(CountPrefix(series_, "node_filesystem_size_bytes{"), 2u);
}

TEST_F(HostFixtureTest, Diskstats) {
  EXPECT_EQ(series_.at("node_disk_reads_completed_total{device=\"sda\"}"), 25354637);
  EXPECT_EQ(series_.at("node_disk_read_bytes_total{device=\"sda\"}"), 1003346126.0 * 512);
  EXPECT_DOUBLE_EQ(series_.at("node_disk_read_time_seconds_total{device=\"sda\"}"), 18492.372);
  EXPECT_EQ(series_.at("node_disk_written_bytes_total{device=\"sda\"}"), 505697032.0 * 512);
  EXPECT_DOUBLE_EQ(series_.at("node_disk_io_time_weighted_seconds_total{device=\"sda\"}"), 82621.804);
  EXPECT_EQ(series_.at("node_disk_flush_requests_total{device=\"sda\"}"), 1000);
  EXPECT_EQ(series_.at("node_disk_io_now{device=\"nvme0n1\"}"), 3);
  EXPECT_EQ(series_.at("node_disk_discarded_sectors_total{device=\"nvme0n1\"}"), 30);
  EXPECT_DOUBLE_EQ(series_.at("node_disk_flush_requests_time_seconds_total{device=\"nvme0n1\"}"), 0.06);
  EXPECT_EQ(series_.at("node_disk_info{device=\"sda\",major=\"8\",minor=\"0\",model=\"Samsung_SSD_860_EVO_1TB\","
                       "path=\"pci-0000:00:1f.2-ata-1\",revision=\"RVT01B6Q\",serial=\"S3Z9NB0K123456\","
                       "wwn=\"0x5002538e40a1b2c3\"}"),
            1);
  // Partitions (sda1, nvme0n1p1) and loop devices are excluded.
  EXPECT_EQ(CountPrefix(series_, "node_disk_reads_completed_total{"), 2u);
}

TEST_F(HostFixtureTest, NetdevAndHwmon) {
  EXPECT_EQ(series_.at("node_network_receive_bytes_total{device=\"eth0\"}"), 68210035552.0);
  EXPECT_EQ(series_.at("node_network_receive_multicast_total{device=\"eth0\"}"), 6);
  EXPECT_EQ(series_.at("node_network_transmit_colls_total{device=\"eth0\"}"), 10);
  EXPECT_EQ(series_.at("node_network_transmit_compressed_total{device=\"eth0\"}"), 12);
  EXPECT_EQ(series_.at("node_network_receive_nohandler_total{device=\"eth0\"}"), 13);
  EXPECT_EQ(CountPrefix(series_, "node_network_"), 17u);  // lo is excluded
  EXPECT_EQ(series_.at("node_hwmon_temp_celsius{chip=\"coretemp\",sensor=\"temp1\"}"), 55);
  EXPECT_EQ(series_.at("node_hwmon_temp_celsius{chip=\"coretemp\",sensor=\"temp2\"}"), 41.5);
  EXPECT_EQ(series_.at("node_hwmon_temp_celsius{chip=\"hwmon1\",sensor=\"temp1\"}"), 30);
  EXPECT_EQ(CountPrefix(series_, "node_hwmon_"), 3u);
}

TEST_F(HostFixtureTest, FamiliesHaveNodeExporterTypes) {
  std::map<std::string, MetricType> types;
  for (const Family& f : fams_) {
    EXPECT_TRUE(types.emplace(f.name, f.type).second) << "family twice: " << f.name;
  }
  EXPECT_EQ(types.at("node_cpu_seconds_total"), MetricType::kCounter);
  EXPECT_EQ(types.at("node_load1"), MetricType::kGauge);
  EXPECT_EQ(types.at("node_vmstat_pgfault"), MetricType::kUntyped);
  EXPECT_EQ(types.at("node_disk_io_now"), MetricType::kGauge);
  EXPECT_EQ(types.at("node_network_receive_bytes_total"), MetricType::kCounter);
  EXPECT_EQ(types.at("node_filesystem_size_bytes"), MetricType::kGauge);
}

class HostBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tw_host_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)file::RemoveAll(dir_); }
  std::string dir_;
};

TEST_F(HostBadInputTest, ErrorsNameFileAndLineAndOtherPartsStillWork) {
  ASSERT_TRUE(file::MkdirAll(dir_ + "/proc").ok());
  ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/proc/stat", "cpu  1 2 3 4 5 6 7 8\ncpu0 1 2 x 4 5 6 7 8\n").ok());
  ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/proc/meminfo", "MemTotal: 10 kB\nBroken line here ok\n").ok());
  ASSERT_TRUE(file::WriteFileAtomic(dir_ + "/proc/loadavg", "1.5 2.5 3.5 1/2 3\n").ok());
  Options o;
  o.proc = dir_ + "/proc";
  o.sys = dir_ + "/sys";
  o.uname = false;
  HostCollector c(o);
  Families f;
  Status s = c.CollectStat(&f);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir_ + "/proc/stat line 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"x\""), std::string::npos) << s.message();
  s = c.CollectMeminfo(&f);
  EXPECT_NE(s.message().find("meminfo line 2"), std::string::npos) << s.message();
  s = c.CollectPressure(&f);
  EXPECT_NE(s.message().find("pressure/cpu"), std::string::npos) << s.message();
  // Collect() skips the broken and missing parts and keeps the rest.
  Families all;
  c.Collect(&all);
  auto series = Flatten(all);
  EXPECT_EQ(series.at("node_load5"), 2.5);
  EXPECT_EQ(CountPrefix(series, "node_cpu_"), 0u);
  EXPECT_EQ(CountPrefix(series, "node_memory_"), 0u);
  EXPECT_EQ(series.count("node_time_seconds"), 1u);
}

TEST(HostRealTest, CollectsThisMachine) {
  HostCollector c(Options{});
  Families f;
  c.Collect(&f);
  auto series = Flatten(f);
  EXPECT_GT(CountPrefix(series, "node_cpu_seconds_total{"), 0u);
  EXPECT_GT(series.at("node_memory_MemTotal_bytes"), 0);
  EXPECT_GT(series.at("node_boot_time_seconds"), 1e9);
  EXPECT_EQ(CountPrefix(series, "node_uname_info{"), 1u);
  EXPECT_GT(series.at("node_filefd_maximum"), 0);
}

}  // namespace
}  // namespace trainwatch::collect::host
