#pragma once
// Host collector: node_exporter 1.5-compatible metrics (names, labels, units,
// types, default exclusions as Debian's prometheus-node-exporter 1.5 ships
// them) read from /proc and /sys. Every path is under Options roots so tests
// point the collector at a fixture tree. Not thread-safe: one caller.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/status.h"
#include "collect/family.h"

namespace trainwatch::collect::host {

// What statfs(2) says about one mount point.
struct FsStats {
  uint64_t block_size = 0;
  uint64_t blocks = 0;
  uint64_t blocks_free = 0;
  uint64_t blocks_avail = 0;
  uint64_t files = 0;
  uint64_t files_free = 0;
};

struct Options {
  std::string proc = "/proc";
  std::string sys = "/sys";
  std::string rootfs = "/";  // prefix for mount points given to statfs
  std::string udev_data = "/run/udev/data";
  // Null: statfs(2). Tests substitute their own.
  std::function<Status(const std::string& path, FsStats* out)> statfs;
  // node_exporter 1.5 (Debian) defaults.
  std::string mount_points_exclude = "^/(dev|proc|run|sys|mnt|media|var/lib/docker/.+|var/lib/containers/storage/.+)($|/)";
  std::string fs_types_exclude =
      "^(autofs|binfmt_misc|bpf|cgroup2?|configfs|debugfs|devpts|devtmpfs|fusectl|hugetlbfs|iso9660|mqueue|nsfs|"
      "overlay|proc|procfs|pstore|rpc_pipefs|securityfs|selinuxfs|squashfs|sysfs|tracefs)$";
  std::string disk_exclude = "^(ram|loop|fd|(h|s|v|xv)d[a-z]|nvme\\d+n\\d+p)\\d+$";
  std::string netdev_exclude = "^lo$";
  // Wall clock for node_time_seconds (seconds since the epoch); null: the real one.
  std::function<double()> now;
  bool uname = true;  // node_uname_info from uname(2)
};

class HostCollector {
 public:
  explicit HostCollector(Options o);
  ~HostCollector();

  // Appends every family. A part that cannot be read or parsed is skipped;
  // its error is logged the first time it happens (and once more when it
  // recovers), so a missing /proc/pressure costs one log line, not one per cycle.
  void Collect(Families* out);

  // The parts, each all-or-nothing; errors name the file and line.
  Status CollectStat(Families* out);      // /proc/stat: cpu, intr, ctxt, btime, forks, procs
  Status CollectLoad(Families* out);      // /proc/loadavg
  Status CollectPressure(Families* out);  // /proc/pressure/{cpu,io,memory}
  Status CollectMeminfo(Families* out);   // /proc/meminfo
  Status CollectVmstat(Families* out);    // /proc/vmstat
  Status CollectFilesystem(Families* out);  // /proc/1/mounts (else /proc/mounts) + statfs
  Status CollectDiskstats(Families* out);   // /proc/diskstats (+ udev data for node_disk_info)
  Status CollectNetdev(Families* out);      // /proc/net/dev
  Status CollectHwmon(Families* out);       // /sys/class/hwmon
  Status CollectFilefd(Families* out);      // /proc/sys/fs/file-nr
  void CollectUnameTime(Families* out);     // uname(2), clock

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainwatch::collect::host
