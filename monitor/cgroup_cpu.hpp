// monitor/cgroup_cpu: how long this process's CPU limit has held it, read by the trace writer.
// A batch system or a container runtime can cap a job's CPU time with CFS bandwidth control
// (cgroup v2 cpu.max, v1 cpu.cfs_quota_us): once the group has used its quota of a period (100 ms
// by default), every thread in it waits for the next period. A rank so capped computes in bursts
// and is held the rest of each period, which the writer's ticks see as time held off the CPU like
// any other, and the kernel counts as the group's throttled time (cpu.stat). That count says the
// hold was the limit's and not the scheduler's sharing of a busy machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace commtap::monitor {

// The cpu.stat this process's CPU limit is counted in: the process's own cgroup (from
// /proc/self/cgroup) under the cgroup v2 tree or the v1 `cpu` hierarchy, or, where that folder has
// no throttling counts (no CPU controller there), its nearest ancestor that has. A container that
// sees its own group as the root (a cgroup namespace) reads the root's. No file: no limit counted.
// Found again whenever /proc/self/cgroup changes (a process moved into a limited group while it
// runs, as a resource manager may do).
class CgroupCpuLimit {
 public:
  // `sys_root`: where the cgroup filesystems are mounted; `proc_cgroup`: the process's cgroup
  // list. Both are parameters for tests.
  explicit CgroupCpuLimit(std::string sys_root = "/sys/fs/cgroup",
                          std::string proc_cgroup = "/proc/self/cgroup");

  // The time this process's group was throttled since the first call, in ns: only growing, the
  // differences of the group's counter added up (a move to another group starts counting that
  // group's from the move). None while no group with throttling counts was found. Reads two
  // small files: microseconds.
  std::optional<std::uint64_t> throttled_ns();

  const std::string& stat_path() const { return stat_path_; }  // empty: none found

 private:
  void find_stat();

  std::string sys_root_, proc_cgroup_;
  std::string groups_;                 // /proc/self/cgroup as last read
  std::string stat_path_;              // the cpu.stat counted in (empty: none)
  std::optional<std::uint64_t> last_;  // its counter at the last read
  std::uint64_t total_ = 0;
  bool counted_ = false;  // some group's counter was read
};

// The throttled time in one cpu.stat's text: v2's `throttled_usec` or v1's `throttled_time` (ns).
std::optional<std::uint64_t> parse_throttled_ns(const std::string& cpu_stat);

}  // namespace commtap::monitor
