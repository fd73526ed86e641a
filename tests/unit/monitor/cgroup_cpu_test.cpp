// CgroupCpuLimit over a cgroup tree written by the test: which cpu.stat it finds for the cgroup
// v1 and v2 layouts, a group without the CPU controller, a cgroup namespace, a process moved to
// another group while it runs, and none at all.
#include "monitor/cgroup_cpu.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/unit/temp_dir.hpp"

namespace commtap::monitor {
namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

std::string v1_stat(std::uint64_t throttled_ns) {
  return "nr_periods 120\nnr_throttled 40\nthrottled_time " + std::to_string(throttled_ns) + "\n";
}

std::string v2_stat(std::uint64_t throttled_us) {
  return "usage_usec 900\nuser_usec 800\nsystem_usec 100\nnr_periods 120\nnr_throttled 40\n"
         "throttled_usec " +
         std::to_string(throttled_us) + "\n";
}

TEST(CgroupCpuLimit, ParsesEitherVersionsThrottledTime) {
  EXPECT_EQ(parse_throttled_ns(v1_stat(5'000'000)), 5'000'000u);
  EXPECT_EQ(parse_throttled_ns(v2_stat(2'000)), 2'000'000u);
  EXPECT_FALSE(parse_throttled_ns("usage_usec 10\nuser_usec 5\nsystem_usec 5\n"));
  EXPECT_FALSE(parse_throttled_ns("throttled_time not-a-number\n"));
  EXPECT_FALSE(parse_throttled_ns(""));
}

TEST(CgroupCpuLimit, CountsFromTheFirstReadInTheV1CpuHierarchy) {
  testing::TempDir dir;
  const auto sys = dir.path() / "sys";
  write_file(dir.path() / "cgroup", "5:memory:/job\n4:cpu,cpuacct:/job/step0\n0::/job\n");
  write_file(sys / "cpu,cpuacct/job/step0/cpu.stat", v1_stat(7'000'000));
  CgroupCpuLimit limit(sys.string(), (dir.path() / "cgroup").string());
  EXPECT_EQ(limit.throttled_ns(), 0u);
  EXPECT_EQ(limit.stat_path(), (sys / "cpu,cpuacct/job/step0/cpu.stat").string());
  write_file(sys / "cpu,cpuacct/job/step0/cpu.stat", v1_stat(10'000'000));
  EXPECT_EQ(limit.throttled_ns(), 3'000'000u);
}

TEST(CgroupCpuLimit, FindsTheNearestV2GroupWithTheCpuController) {
  testing::TempDir dir;
  const auto sys = dir.path() / "sys";
  write_file(dir.path() / "cgroup", "0::/pod/container\n");
  write_file(sys / "cgroup.controllers", "cpuset cpu io memory pids\n");
  // The container's group has no CPU controller enabled: no throttling counts of its own.
  write_file(sys / "pod/container/cpu.stat", "usage_usec 900\nuser_usec 800\nsystem_usec 100\n");
  write_file(sys / "pod/cpu.stat", v2_stat(1'000));
  CgroupCpuLimit limit(sys.string(), (dir.path() / "cgroup").string());
  EXPECT_EQ(limit.throttled_ns(), 0u);
  EXPECT_EQ(limit.stat_path(), (sys / "pod/cpu.stat").string());
  write_file(sys / "pod/cpu.stat", v2_stat(4'000));
  EXPECT_EQ(limit.throttled_ns(), 3'000'000u);
}

TEST(CgroupCpuLimit, ACgroupNamespaceReadsItsRoot) {
  testing::TempDir dir;
  const auto sys = dir.path() / "sys";
  // The path is the host's view; inside the namespace the group is mounted as the root.
  write_file(dir.path() / "cgroup", "0::/kubepods/burstable/pod1/abc\n");
  write_file(sys / "cpu.stat", v2_stat(500));
  CgroupCpuLimit limit(sys.string(), (dir.path() / "cgroup").string());
  EXPECT_EQ(limit.throttled_ns(), 0u);
  EXPECT_EQ(limit.stat_path(), (sys / "cpu.stat").string());
}

TEST(CgroupCpuLimit, AMoveToAnotherGroupCountsOnFromItsCounter) {
  testing::TempDir dir;
  const auto sys = dir.path() / "sys";
  write_file(dir.path() / "cgroup", "2:cpu:/\n");
  write_file(sys / "cpu/cpu.stat", v1_stat(0));
  write_file(sys / "cpu/limited/cpu.stat", v1_stat(50'000'000));
  CgroupCpuLimit limit(sys.string(), (dir.path() / "cgroup").string());
  EXPECT_EQ(limit.throttled_ns(), 0u);
  write_file(sys / "cpu/cpu.stat", v1_stat(1'000'000));
  EXPECT_EQ(limit.throttled_ns(), 1'000'000u);
  // Moved into a group throttled 50 ms before: counting goes on from there, no jump.
  write_file(dir.path() / "cgroup", "2:cpu:/limited\n");
  EXPECT_EQ(limit.throttled_ns(), 1'000'000u);
  write_file(sys / "cpu/limited/cpu.stat", v1_stat(80'000'000));
  EXPECT_EQ(limit.throttled_ns(), 31'000'000u);
}

TEST(CgroupCpuLimit, NoGroupNoCount) {
  testing::TempDir dir;
  CgroupCpuLimit missing((dir.path() / "sys").string(), (dir.path() / "no-such-file").string());
  EXPECT_FALSE(missing.throttled_ns());
  write_file(dir.path() / "cgroup", "0::/job\n");
  CgroupCpuLimit empty((dir.path() / "sys").string(), (dir.path() / "cgroup").string());
  EXPECT_FALSE(empty.throttled_ns());
  EXPECT_TRUE(empty.stat_path().empty());
}

}  // namespace
}  // namespace commtap::monitor
