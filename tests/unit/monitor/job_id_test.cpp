#include <gtest/gtest.h>
#include <stdlib.h>

#include <regex>

#include "monitor/monitor.hpp"

using commtap::monitor::choose_job_id;

namespace {
// Clears the batch systems' variables for one test and restores them after.
class NoBatchSystem : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) {
      if (const char* value = getenv(name)) saved_.emplace_back(name, value);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kNames) unsetenv(name);
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }
  static constexpr const char* kNames[] = {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID"};
  std::vector<std::pair<std::string, std::string>> saved_;
};
}  // namespace

TEST_F(NoBatchSystem, ExplicitIdWinsAndIsMadeSafeForADirectoryName) {
  setenv("SLURM_JOB_ID", "999", 1);
  EXPECT_EQ(choose_job_id("my run/2"), "my_run_2");
}

TEST_F(NoBatchSystem, BatchSystemIdIsUsedNext) {
  setenv("PBS_JOBID", "4711.server", 1);
  EXPECT_EQ(choose_job_id(""), "4711.server");
}

TEST_F(NoBatchSystem, OtherwiseTimeAndProcessId) {
  const std::string id = choose_job_id("");
  EXPECT_TRUE(std::regex_match(id, std::regex(R"(\d{8}-\d{6}-\d+)"))) << id;
}
