// Who a process is in a job that never calls MPI_Init (NCCL training launched by torchrun, srun,
// mpirun or a PMI launcher): its rank, the job's size, its place on its node and the job's id,
// read from the launcher's environment. Nothing here communicates: where the environment says
// nothing, the first NCCL communicator's own rank and size stand in (see runtime.cpp).
#pragma once

#include <functional>
#include <string>

namespace commtap::interpose {

struct LauncherIdentity {
  int rank = -1;  // -1: the environment does not say
  int size = -1;
  int local_rank = -1;  // rank on this node
  int node = -1;        // index of this node among the job's
  // The launcher's job id (SLURM_JOB_ID, ..., TORCHELASTIC_RUN_ID); empty if none.
  std::string job_id;
  // Which variables gave the rank: "RANK", "SLURM_PROCID", ... ("" if none did).
  std::string rank_from;
};

using Environment = std::function<const char*(const char*)>;

// Reads the first launcher convention whose rank and size are both set and valid (0 <= rank <
// size): torchrun's RANK/WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_*, Slurm's SLURM_PROCID/
// SLURM_NTASKS, PMI's PMI_RANK/PMI_SIZE, PMIx's PMIX_RANK/PMIX_SIZE... The same convention
// gives the local rank and node where it has them (torchrun: LOCAL_RANK, GROUP_RANK; Slurm:
// SLURM_LOCALID, SLURM_NODEID; else rank / LOCAL_WORLD_SIZE where that is set).
LauncherIdentity identity_from_environment(const Environment& environment);

// The job id every rank derives alike without talking to the others: `configured`
// (COMMTAP_JOB_ID) if set, else the batch system's (SLURM_JOB_ID, PBS_JOBID, LSB_JOBID,
// FLUX_JOB_ID), else torchrun's TORCHELASTIC_RUN_ID unless it is "none" (torchrun's default),
// else "nccl-" and the hex digits of `shared_id`, an id every rank holds alike (the first NCCL
// communicator's). Characters that cannot be in a directory name become '_'.
std::string job_id_without_mpi(const std::string& configured, const Environment& environment,
                               std::int64_t shared_id);

}  // namespace commtap::interpose
