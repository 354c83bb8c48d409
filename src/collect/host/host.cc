#include "collect/host/host.h"

#include <fmt/format.h>
#include <re2/re2.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/file.h"
#include "base/log.h"

namespace trainwatch::collect::host {
namespace {

constexpr double kUserHz = 100.0;  // USER_HZ: /proc/stat ticks per second on every Linux ABI

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = text.find('\n', i);
    if (j == std::string_view::npos) j = text.size();
    out.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

bool ParseDouble(std::string_view s, double* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

Status BadLine(const std::string& path, size_t line_no, std::string_view what) {
  return Status::Corruption(fmt::format("{} line {}: {}", path, line_no + 1, what));
}

// node_exporter's cleanMetricName for hwmon chip names.
std::string CleanName(std::string_view s) {
  std::string out;
  for (char c : s) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    bool ok = (l >= 'a' && l <= 'z') || (l >= '0' && l <= '9') || l == ':' || l == '_';
    out.push_back(ok ? l : '_');
  }
  size_t b = out.find_first_not_of('_');
  if (b == std::string::npos) return "";
  size_t e = out.find_last_not_of('_');
  return out.substr(b, e - b + 1);
}

std::string Trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string_view::npos) return "";
  size_t e = s.find_last_not_of(" \t\n");
  return std::string(s.substr(b, e - b + 1));
}

// Mount table paths escape space, tab, newline and backslash as \ooo.
std::string UnescapeMount(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7' &&
        s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
      out.push_back(static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0')));
      i += 3;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

Status RealStatfs(const std::string& path, FsStats* out) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0) return Status::FromErrno("statfs " + path, errno);
  out->block_size = st.f_frsize ? st.f_frsize : st.f_bsize;
  out->blocks = st.f_blocks;
  out->blocks_free = st.f_bfree;
  out->blocks_avail = st.f_bavail;
  out->files = st.f_files;
  out->files_free = st.f_ffree;
  return Status::OK();
}

constexpr MetricType kG = MetricType::kGauge;
constexpr MetricType kC = MetricType::kCounter;

}  // namespace

struct HostCollector::Impl {
  Options o;
  RE2 mount_exclude;
  RE2 fstype_exclude;
  RE2 disk_exclude;
  RE2 netdev_exclude;
  std::map<std::string, bool> failing;  // part -> logged as failing

  explicit Impl(Options opts)
      : o(std::move(opts)),
        mount_exclude(o.mount_points_exclude),
        fstype_exclude(o.fs_types_exclude),
        disk_exclude(o.disk_exclude),
        netdev_exclude(o.netdev_exclude) {}

  std::string Proc(std::string_view rel) const { return o.proc + "/" + std::string(rel); }
  std::string Sys(std::string_view rel) const { return o.sys + "/" + std::string(rel); }

  void Report(const std::string& part, const Status& s) {
    bool& was = failing[part];
    if (!s.ok() && !was) {
      TW_LOG(Warn, "host collector: {} skipped: {}", part, s.ToString());
      was = true;
    } else if (s.ok() && was) {
      TW_LOG(Info, "host collector: {} collected again", part);
      was = false;
    }
  }
};

HostCollector::HostCollector(Options o) : impl_(std::make_unique<Impl>(std::move(o))) {
  if (!impl_->o.statfs) impl_->o.statfs = RealStatfs;
}

HostCollector::~HostCollector() = default;

void HostCollector::Collect(Families* out) {
  struct Part {
    const char* name;
    Status (HostCollector::*fn)(Families*);
  };
  static constexpr Part kParts[] = {
      {"stat", &HostCollector::CollectStat},          {"loadavg", &HostCollector::CollectLoad},
      {"pressure", &HostCollector::CollectPressure},  {"meminfo", &HostCollector::CollectMeminfo},
      {"vmstat", &HostCollector::CollectVmstat},      {"filesystem", &HostCollector::CollectFilesystem},
      {"diskstats", &HostCollector::CollectDiskstats}, {"netdev", &HostCollector::CollectNetdev},
      {"hwmon", &HostCollector::CollectHwmon},        {"filefd", &HostCollector::CollectFilefd},
  };
  for (const Part& p : kParts) {
    Families part;
    Status s = (this->*p.fn)(&part);
    impl_->Report(p.name, s);
    if (!s.ok()) continue;
    for (Family& f : part) out->push_back(std::move(f));
  }
  CollectUnameTime(out);
}

Status HostCollector::CollectStat(Families* out) {
  const std::string path = impl_->Proc("stat");
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(path, &text));
  static constexpr const char* kModes[] = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"};
  Family cpu{"node_cpu_seconds_total", "Seconds the CPUs spent in each mode.", kC, {}};
  Family guest{"node_cpu_guest_seconds_total", "Seconds the CPUs spent in guests (VMs) for each mode.", kC, {}};
  Families rest;
  auto lines = Lines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    auto f = Fields(lines[n]);
    if (f.empty()) continue;
    if (f[0].starts_with("cpu") && f[0].size() > 3) {
      std::string id(f[0].substr(3));
      if (f.size() < 9) return BadLine(path, n, fmt::format("{} has {} fields, want at least 8 values", f[0], f.size() - 1));
      double v[10] = {};
      for (size_t i = 1; i < f.size() && i <= 10; ++i) {
        if (!ParseDouble(f[i], &v[i - 1])) return BadLine(path, n, fmt::format("bad value \"{}\"", std::string(f[i])));
      }
      // node_exporter reports user/nice with the guest time included, as the kernel does.
      for (int m = 0; m < 8; ++m) cpu.metrics.push_back({model::Labels{{"cpu", id}, {"mode", kModes[m]}}, v[m] / kUserHz});
      if (f.size() >= 11) {
        guest.metrics.push_back({model::Labels{{"cpu", id}, {"mode", "user"}}, v[8] / kUserHz});
        guest.metrics.push_back({model::Labels{{"cpu", id}, {"mode", "nice"}}, v[9] / kUserHz});
      }
      continue;
    }
    if (f.size() < 2) continue;
    double v = 0;
    if (!ParseDouble(f[1], &v)) return BadLine(path, n, fmt::format("bad value \"{}\"", std::string(f[1])));
    if (f[0] == "intr") {
      Add(&rest, "node_intr_total", "Total number of interrupts serviced.", kC, {}, v);
    } else if (f[0] == "ctxt") {
      Add(&rest, "node_context_switches_total", "Total number of context switches.", kC, {}, v);
    } else if (f[0] == "btime") {
      Add(&rest, "node_boot_time_seconds", "Node boot time, in unixtime.", kG, {}, v);
    } else if (f[0] == "processes") {
      Add(&rest, "node_forks_total", "Total number of forks.", kC, {}, v);
    } else if (f[0] == "procs_running") {
      Add(&rest, "node_procs_running", "Number of processes in runnable state.", kG, {}, v);
    } else if (f[0] == "procs_blocked") {
      Add(&rest, "node_procs_blocked", "Number of processes blocked waiting for I/O to complete.", kG, {}, v);
    }
  }
  if (cpu.metrics.empty()) return Status::Corruption(path + ": no cpuN lines");
  out->push_back(std::move(cpu));
  if (!guest.metrics.empty()) out->push_back(std::move(guest));
  for (Family& f : rest) out->push_back(std::move(f));
  return Status::OK();
}

Status HostCollector::CollectLoad(Families* out) {
  const std::string path = impl_->Proc("loadavg");
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(path, &text));
  auto f = Fields(Lines(text).empty() ? "" : Lines(text)[0]);
  double v[3];
  if (f.size() < 3) return BadLine(path, 0, "want 3 load averages");
  for (int i = 0; i < 3; ++i) {
    if (!ParseDouble(f[i], &v[i])) return BadLine(path, 0, fmt::format("bad value \"{}\"", std::string(f[i])));
  }
  Add(out, "node_load1", "1m load average.", kG, {}, v[0]);
  Add(out, "node_load5", "5m load average.", kG, {}, v[1]);
  Add(out, "node_load15", "15m load average.", kG, {}, v[2]);
  return Status::OK();
}

Status HostCollector::CollectPressure(Families* out) {
  struct Res {
    const char* name;
    const char* waiting_help;
    const char* stalled_help;  // null: no "full" metric (cpu, as node_exporter 1.5)
  };
  static constexpr Res kRes[] = {
      {"cpu", "Total time in seconds that processes have waited for CPU time", nullptr},
      {"io", "Total time in seconds that processes have waited due to IO congestion",
       "Total time in seconds no process could make progress due to IO congestion"},
      {"memory", "Total time in seconds that processes have waited for memory",
       "Total time in seconds no process could make progress due to memory congestion"},
  };
  Families fams;
  for (const Res& r : kRes) {
    const std::string path = impl_->Proc(std::string("pressure/") + r.name);
    std::string text;
    RETURN_IF_ERROR(file::ReadFile(path, &text));
    auto lines = Lines(text);
    for (size_t n = 0; n < lines.size(); ++n) {
      auto f = Fields(lines[n]);
      if (f.empty()) continue;
      if (f[0] != "some" && f[0] != "full") return BadLine(path, n, fmt::format("unknown kind \"{}\"", std::string(f[0])));
      double total = -1;
      for (size_t i = 1; i < f.size(); ++i) {
        if (f[i].starts_with("total=") && !ParseDouble(f[i].substr(6), &total)) {
          return BadLine(path, n, fmt::format("bad \"{}\"", std::string(f[i])));
        }
      }
      if (total < 0) return BadLine(path, n, "no total=");
      if (f[0] == "some") {
        Add(&fams, fmt::format("node_pressure_{}_waiting_seconds_total", r.name), r.waiting_help, kC, {}, total / 1e6);
      } else if (r.stalled_help != nullptr) {
        Add(&fams, fmt::format("node_pressure_{}_stalled_seconds_total", r.name), r.stalled_help, kC, {}, total / 1e6);
      }
    }
  }
  for (Family& f : fams) out->push_back(std::move(f));
  return Status::OK();
}

Status HostCollector::CollectMeminfo(Families* out) {
  const std::string path = impl_->Proc("meminfo");
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(path, &text));
  Families fams;
  auto lines = Lines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    auto f = Fields(lines[n]);
    if (f.empty()) continue;
    if (f.size() < 2 || f.size() > 3 || !f[0].ends_with(":")) return BadLine(path, n, "want 'Key: value [kB]'");
    std::string key(f[0].substr(0, f[0].size() - 1));
    // Active(anon) -> Active_anon, as node_exporter.
    size_t p = key.find('(');
    if (p != std::string::npos && key.ends_with(")")) key = key.substr(0, p) + "_" + key.substr(p + 1, key.size() - p - 2);
    double v = 0;
    if (!ParseDouble(f[1], &v)) return BadLine(path, n, fmt::format("bad value \"{}\"", std::string(f[1])));
    if (f.size() == 3) {
      v *= 1024;
      key += "_bytes";
    }
    Add(&fams, "node_memory_" + key, "Memory information field " + key + ".", kG, {}, v);
  }
  for (Family& f : fams) out->push_back(std::move(f));
  return Status::OK();
}

Status HostCollector::CollectVmstat(Families* out) {
  const std::string path = impl_->Proc("vmstat");
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(path, &text));
  static const RE2 kFields("^(oom_kill|pgpg|pswp|pg.*fault).*");  // node_exporter's --collector.vmstat.fields default
  Families fams;
  auto lines = Lines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    auto f = Fields(lines[n]);
    if (f.empty()) continue;
    if (f.size() != 2) return BadLine(path, n, "want 'name value'");
    if (!RE2::FullMatch(f[0], kFields)) continue;
    double v = 0;
    if (!ParseDouble(f[1], &v)) return BadLine(path, n, fmt::format("bad value \"{}\"", std::string(f[1])));
    std::string key(f[0]);
    Add(&fams, "node_vmstat_" + key, "/proc/vmstat information field " + key + ".", MetricType::kUntyped, {}, v);
  }
  for (Family& f : fams) out->push_back(std::move(f));
  return Status::OK();
}

Status HostCollector::CollectFilesystem(Families* out) {
  std::string path = impl_->Proc("1/mounts");
  std::string text;
  if (!file::ReadFile(path, &text).ok()) {
    path = impl_->Proc("mounts");
    RETURN_IF_ERROR(file::ReadFile(path, &text));
  }
  Family size{"node_filesystem_size_bytes", "Filesystem size in bytes.", kG, {}};
  Family free{"node_filesystem_free_bytes", "Filesystem free space in bytes.", kG, {}};
  Family avail{"node_filesystem_avail_bytes", "Filesystem space available to non-root users in bytes.", kG, {}};
  Family files{"node_filesystem_files", "Filesystem total file nodes.", kG, {}};
  Family files_free{"node_filesystem_files_free", "Filesystem total free file nodes.", kG, {}};
  Family ro{"node_filesystem_readonly", "Filesystem read-only status.", kG, {}};
  Family err{"node_filesystem_device_error",
             "Whether an error occurred while getting statistics for the given device.", kG, {}};
  std::set<model::Labels> seen;
  auto lines = Lines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    auto f = Fields(lines[n]);
    if (f.empty()) continue;
    if (f.size() < 4) return BadLine(path, n, "want 'device mountpoint fstype options ...'");
    std::string device = UnescapeMount(f[0]), mountpoint = UnescapeMount(f[1]), fstype(f[2]);
    if (RE2::PartialMatch(mountpoint, impl_->mount_exclude) || RE2::PartialMatch(fstype, impl_->fstype_exclude)) continue;
    model::Labels labels{{"device", device}, {"fstype", fstype}, {"mountpoint", mountpoint}};
    if (!seen.insert(labels).second) continue;
    bool readonly = false;
    for (std::string_view opts = f[3]; !opts.empty();) {
      size_t c = opts.find(',');
      if (opts.substr(0, c) == "ro") readonly = true;
      opts = c == std::string_view::npos ? std::string_view() : opts.substr(c + 1);
    }
    std::string root = impl_->o.rootfs;
    while (root.size() > 1 && root.ends_with("/")) root.pop_back();
    std::string stat_path = root == "/" ? mountpoint : root + mountpoint;
    FsStats st;
    Status s = impl_->o.statfs(stat_path, &st);
    err.metrics.push_back({labels, s.ok() ? 0.0 : 1.0});
    if (!s.ok()) continue;  // node_exporter exports only device_error for it
    double bs = static_cast<double>(st.block_size);
    size.metrics.push_back({labels, static_cast<double>(st.blocks) * bs});
    free.metrics.push_back({labels, static_cast<double>(st.blocks_free) * bs});
    avail.metrics.push_back({labels, static_cast<double>(st.blocks_avail) * bs});
    files.metrics.push_back({labels, static_cast<double>(st.files)});
    files_free.metrics.push_back({labels, static_cast<double>(st.files_free)});
    ro.metrics.push_back({labels, readonly ? 1.0 : 0.0});
  }
  for (Family* f : {&avail, &err, &files, &files_free, &free, &ro, &size}) out->push_back(std::move(*f));
  return Status::OK();
}

Status HostCollector::CollectDiskstats(Families* out) {
  const std::string path = impl_->Proc("diskstats");
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(path, &text));
  struct Col {
    const char* name;
    const char* help;
    MetricType type;
    double scale;
  };
  // /proc/diskstats columns after major, minor, name (Documentation/admin-guide/iostats.rst).
  static constexpr Col kCols[] = {
      {"node_disk_reads_completed_total", "The total number of reads completed successfully.", kC, 1},
      {"node_disk_reads_merged_total", "The total number of reads merged.", kC, 1},
      {"node_disk_read_bytes_total", "The total number of bytes read successfully.", kC, 512},
      {"node_disk_read_time_seconds_total", "The total number of seconds spent by all reads.", kC, 0.001},
      {"node_disk_writes_completed_total", "The total number of writes completed successfully.", kC, 1},
      {"node_disk_writes_merged_total", "The number of writes merged.", kC, 1},
      {"node_disk_written_bytes_total", "The total number of bytes written successfully.", kC, 512},
      {"node_disk_write_time_seconds_total", "This is the total number of seconds spent by all writes.", kC, 0.001},
      {"node_disk_io_now", "The number of I/Os currently in progress.", kG, 1},
      {"node_disk_io_time_seconds_total", "Total seconds spent doing I/Os.", kC, 0.001},
      {"node_disk_io_time_weighted_seconds_total", "The weighted # of seconds spent doing I/Os.", kC, 0.001},
      {"node_disk_discards_completed_total", "The total number of discards completed successfully.", kC, 1},
      {"node_disk_discards_merged_total", "The total number of discards merged.", kC, 1},
      {"node_disk_discarded_sectors_total", "The total number of sectors discarded successfully.", kC, 1},
      {"node_disk_discard_time_seconds_total", "This is the total number of seconds spent by all discards.", kC, 0.001},
      {"node_disk_flush_requests_total", "The total number of flush requests completed successfully", kC, 1},
      {"node_disk_flush_requests_time_seconds_total", "This is the total number of seconds spent by all flush requests.",
       kC, 0.001},
  };
  constexpr size_t kNumCols = sizeof kCols / sizeof kCols[0];
  std::vector<Family> fams;
  for (const Col& c : kCols) fams.push_back(Family{c.name, c.help, c.type, {}});
  Family info{"node_disk_info", "Info of /sys/block/<block_device>.", kG, {}};
  auto lines = Lines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    auto f = Fields(lines[n]);
    if (f.empty()) continue;
    if (f.size() < 14) continue;  // partitions on old kernels: 4 values only; node_exporter skips them too
    std::string dev(f[2]);
    if (RE2::FullMatch(dev, impl_->disk_exclude)) continue;
    model::Labels labels{{"device", dev}};
    for (size_t i = 0; i < kNumCols && 3 + i < f.size(); ++i) {
      double v = 0;
      if (!ParseDouble(f[3 + i], &v)) return BadLine(path, n, fmt::format("bad value \"{}\"", std::string(f[3 + i])));
      fams[i].metrics.push_back({labels, v * kCols[i].scale});
    }
    // udev's database gives the model, path, revision, serial and WWN.
    std::map<std::string, std::string> udev;
    std::string udev_text;
    if (file::ReadFile(fmt::format("{}/b{}:{}", impl_->o.udev_data, f[0], f[1]), &udev_text).ok()) {
      for (std::string_view l : Lines(udev_text)) {
        if (!l.starts_with("E:")) continue;
        size_t eq = l.find('=');
        if (eq != std::string_view::npos) udev[std::string(l.substr(2, eq - 2))] = std::string(l.substr(eq + 1));
      }
    }
    info.metrics.push_back({model::Labels{{"device", dev},
                                          {"major", f[0]},
                                          {"minor", f[1]},
                                          {"model", udev["ID_MODEL"]},
                                          {"path", udev["ID_PATH"]},
                                          {"revision", udev["ID_REVISION"]},
                                          {"serial", udev["ID_SERIAL_SHORT"]},
                                          {"wwn", udev["ID_WWN"]}},
                            1});
  }
  out->push_back(std::move(info));
  for (Family& f : fams) out->push_back(std::move(f));
  return Status::OK();
}

Status HostCollector::CollectNetdev(Families* out) {
  const std::string path = impl_->Proc("net/dev");
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(path, &text));
  static constexpr const char* kRx[] = {"bytes", "packets", "errs", "drop", "fifo", "frame", "compressed", "multicast"};
  static constexpr const char* kTx[] = {"bytes", "packets", "errs", "drop", "fifo", "colls", "carrier", "compressed"};
  std::map<std::string, Family> fams;  // sorted by name, as client_golang prints
  auto add = [&](const std::string& stat, const std::string& dev, double v) {
    std::string name = "node_network_" + stat + "_total";
    auto [it, inserted] = fams.try_emplace(name);
    if (inserted) it->second = Family{name, "Network device statistic " + stat + ".", kC, {}};
    it->second.metrics.push_back({model::Labels{{"device", dev}}, v});
  };
  auto lines = Lines(text);
  for (size_t n = 0; n < lines.size(); ++n) {
    std::string_view l = lines[n];
    size_t colon = l.find(':');
    if (colon == std::string_view::npos) continue;  // the two header lines
    std::string dev = Trim(l.substr(0, colon));
    if (dev == "Inter-" || dev.empty()) continue;
    auto f = Fields(l.substr(colon + 1));
    if (f.size() != 16) return BadLine(path, n, fmt::format("{} has {} values, want 16", dev, f.size()));
    if (RE2::PartialMatch(dev, impl_->netdev_exclude)) continue;
    for (int i = 0; i < 16; ++i) {
      double v = 0;
      if (!ParseDouble(f[i], &v)) return BadLine(path, n, fmt::format("bad value \"{}\"", std::string(f[i])));
      add(std::string(i < 8 ? "receive_" : "transmit_") + (i < 8 ? kRx[i] : kTx[i - 8]), dev, v);
    }
    // rx_nohandler is not in /proc/net/dev; node_exporter gets it by netlink, we from sysfs.
    std::string nh;
    double v = 0;
    if (file::ReadFile(impl_->Sys("class/net/" + dev + "/statistics/rx_nohandler"), &nh).ok() &&
        ParseDouble(Trim(nh), &v)) {
      add("receive_nohandler", dev, v);
    }
  }
  for (auto& [name, f] : fams) out->push_back(std::move(f));
  return Status::OK();
}

Status HostCollector::CollectHwmon(Families* out) {
  const std::string dir = impl_->Sys("class/hwmon");
  if (!file::Exists(dir)) return Status::OK();  // no sensors (VMs, containers): nothing to export
  ASSIGN_OR_RETURN(auto entries, file::ListDir(dir));
  std::sort(entries.begin(), entries.end());
  Family temp{"node_hwmon_temp_celsius", "Hardware monitor for temperature (input)", kG, {}};
  for (const std::string& e : entries) {
    const std::string hw = dir + "/" + e;
    std::string chip;
    char buf[PATH_MAX];
    if (::realpath((hw + "/device").c_str(), buf) != nullptr) {
      std::string_view dev(buf);
      size_t slash = dev.rfind('/');
      std::string dev_name = CleanName(dev.substr(slash + 1));
      std::string_view parent = dev.substr(0, slash);
      std::string dev_type = CleanName(parent.substr(parent.rfind('/') + 1));
      chip = !dev_type.empty() && !dev_name.empty() ? dev_type + "_" + dev_name : dev_name;
    }
    std::string name_text;
    if (chip.empty() && file::ReadFile(hw + "/name", &name_text).ok()) chip = CleanName(Trim(name_text));
    if (chip.empty()) chip = CleanName(e);
    auto files = file::ListDir(hw);
    if (!files.ok()) continue;
    std::sort(files->begin(), files->end());
    for (const std::string& f : *files) {
      if (!f.starts_with("temp") || !f.ends_with("_input")) continue;
      std::string v_text;
      double v = 0;
      if (!file::ReadFile(hw + "/" + f, &v_text).ok() || !ParseDouble(Trim(v_text), &v)) continue;  // sensor busy
      temp.metrics.push_back({model::Labels{{"chip", chip}, {"sensor", f.substr(0, f.size() - 6)}}, v / 1000});
    }
  }
  out->push_back(std::move(temp));
  return Status::OK();
}

Status HostCollector::CollectFilefd(Families* out) {
  const std::string path = impl_->Proc("sys/fs/file-nr");
  std::string text;
  RETURN_IF_ERROR(file::ReadFile(path, &text));
  auto f = Fields(Trim(text));
  double alloc = 0, max = 0;
  if (f.size() != 3 || !ParseDouble(f[0], &alloc) || !ParseDouble(f[2], &max)) {
    return BadLine(path, 0, "want 'allocated unused maximum'");
  }
  Add(out, "node_filefd_allocated", "File descriptor statistics: allocated.", kG, {}, alloc);
  Add(out, "node_filefd_maximum", "File descriptor statistics: maximum.", kG, {}, max);
  return Status::OK();
}

void HostCollector::CollectUnameTime(Families* out) {
  double now = impl_->o.now ? impl_->o.now()
                            : static_cast<double>(NowNanos()) / 1e9;
  Add(out, "node_time_seconds", "System time in seconds since epoch (1970).", kG, {}, now);
  struct utsname u;
  if (impl_->o.uname && ::uname(&u) == 0) {
    Add(out, "node_uname_info", "Labeled system information as provided by the uname system call.", kG,
        model::Labels{{"domainname", u.domainname},
                      {"machine", u.machine},
                      {"nodename", u.nodename},
                      {"release", u.release},
                      {"sysname", u.sysname},
                      {"version", u.version}},
        1);
  }
}

}  // namespace trainwatch::collect::host
