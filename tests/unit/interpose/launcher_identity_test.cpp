// Who a process is in a job without MPI, from its launcher's environment.
#include "interpose/launcher_identity.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

using commtap::interpose::Environment;
using commtap::interpose::identity_from_environment;
using commtap::interpose::job_id_without_mpi;

namespace {

Environment environment_of(const std::map<std::string, std::string>& variables) {
  return [variables](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  };
}

}  // namespace

TEST(LauncherIdentity, TorchrunNamesTheProcessEvenInsideASlurmAllocation) {
  // torchrun under srun: Slurm's variables name the launcher task, torchrun's the process.
  const auto identity = identity_from_environment(environment_of({{"RANK", "5"},
                                                                  {"WORLD_SIZE", "8"},
                                                                  {"LOCAL_RANK", "1"},
                                                                  {"LOCAL_WORLD_SIZE", "4"},
                                                                  {"GROUP_RANK", "1"},
                                                                  {"SLURM_PROCID", "1"},
                                                                  {"SLURM_NTASKS", "2"},
                                                                  {"SLURM_NODEID", "1"}}));
  EXPECT_EQ(identity.rank, 5);
  EXPECT_EQ(identity.size, 8);
  EXPECT_EQ(identity.local_rank, 1);
  EXPECT_EQ(identity.node, 1);
  EXPECT_EQ(identity.rank_from, "RANK");
}

TEST(LauncherIdentity, EachLauncherConvention) {
  struct Case {
    std::map<std::string, std::string> variables;
    int rank, size, local_rank, node;
  };
  const Case cases[] = {
      {{{"SLURM_PROCID", "9"},
        {"SLURM_NTASKS", "16"},
        {"SLURM_LOCALID", "1"},
        {"SLURM_NODEID", "4"}},
       9,
       16,
       1,
       4},
      {{{"OMPI_COMM_WORLD_RANK", "3"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
       3,
       4,
       1,
       1},
      {{{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}}, 2, 3, -1, -1},
      {{{"PMIX_RANK", "0"}, {"PMIX_SIZE", "1"}}, 0, 1, -1, -1},
  };
  for (const Case& c : cases) {
    const auto identity = identity_from_environment(environment_of(c.variables));
    EXPECT_EQ(identity.rank, c.rank);
    EXPECT_EQ(identity.size, c.size);
    EXPECT_EQ(identity.local_rank, c.local_rank);
    EXPECT_EQ(identity.node, c.node);
  }
}

TEST(LauncherIdentity, InvalidValuesAreIgnoredAndTheNextConventionIsTried) {
  // A rank that is not a number, or not below the size, says nothing.
  for (const auto& [rank, size] : std::map<std::string, std::string>{
           {"x", "4"}, {"4", "4"}, {"-1", "4"}, {"1 ", "4"}, {"", "4"}, {"1", "99999999999"}}) {
    const auto identity = identity_from_environment(environment_of(
        {{"RANK", rank}, {"WORLD_SIZE", size}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}}));
    EXPECT_EQ(identity.rank, 2) << rank << "/" << size;
    EXPECT_EQ(identity.rank_from, "SLURM_PROCID");
  }
  const auto none = identity_from_environment(environment_of({}));
  EXPECT_EQ(none.rank, -1);
  EXPECT_EQ(none.size, -1);
  EXPECT_EQ(none.rank_from, "");
}

TEST(LauncherIdentity, JobIdFromSettingBatchSystemTorchrunOrTheSharedCommunicator) {
  EXPECT_EQ(job_id_without_mpi("mine", environment_of({{"SLURM_JOB_ID", "7"}}), 1), "mine");
  EXPECT_EQ(job_id_without_mpi(
                "", environment_of({{"SLURM_JOB_ID", "7"}, {"TORCHELASTIC_RUN_ID", "r"}}), 1),
            "7");
  EXPECT_EQ(job_id_without_mpi("", environment_of({{"TORCHELASTIC_RUN_ID", "run/1 a"}}), 1),
            "run_1_a");
  // torchrun's default run id is "none": not a job id. Then every rank derives the same id
  // from the communicator they share, and different communicators give different ids.
  const std::string shared =
      job_id_without_mpi("", environment_of({{"TORCHELASTIC_RUN_ID", "none"}}), 0x123456789abcd);
  EXPECT_EQ(shared, "nccl-000123456789abcd");
  EXPECT_NE(shared, job_id_without_mpi("", environment_of({}), 0x223456789abcd));
  EXPECT_EQ(job_id_without_mpi("..", environment_of({}), 1), "_");
}
