// Who a process is, from its launcher's environment (interpose/launcher_identity.hpp).
#include "interpose/launcher_identity.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

namespace commtap::interpose {

namespace {

// A non-negative int, or -1 if `text` is missing or not entirely one.
int read_count(const char* text) {
  if (text == nullptr || *text == '\0') return -1;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 0 || value > 1'000'000'000) return -1;
  return static_cast<int>(value);
}

struct Convention {
  const char* rank;
  const char* size;
  const char* local_rank;  // nullptr: the convention has none
  const char* local_size;
  const char* node;
};

// In order of preference: a launcher sets its own, and a job launched by torchrun inside a
// Slurm allocation has both torchrun's (per process) and Slurm's (per launcher task) variables,
// of which only torchrun's name the process.
constexpr Convention kConventions[] = {
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", nullptr},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr, "SLURM_NODEID"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", nullptr},
    {"PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK", "PMIX_LOCAL_SIZE", "PMIX_NODEID"},
};

}  // namespace

LauncherIdentity identity_from_environment(const Environment& environment) {
  LauncherIdentity identity;
  auto read = [&](const char* name) { return name ? read_count(environment(name)) : -1; };
  for (const Convention& convention : kConventions) {
    const int rank = read(convention.rank), size = read(convention.size);
    if (rank < 0 || size <= rank) continue;
    identity.rank = rank;
    identity.size = size;
    identity.rank_from = convention.rank;
    identity.local_rank = read(convention.local_rank);
    identity.node = read(convention.node);
    const int local_size = read(convention.local_size);
    if (identity.node < 0 && local_size > 0) identity.node = rank / local_size;
    break;
  }
  return identity;
}

std::string job_id_without_mpi(const std::string& configured, const Environment& environment,
                               std::int64_t shared_id) {
  std::string id = configured;
  for (const char* variable :
       {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID", "TORCHELASTIC_RUN_ID"}) {
    if (!id.empty()) break;
    const char* value = environment(variable);
    if (value == nullptr || *value == '\0') continue;
    if (std::string(variable) == "TORCHELASTIC_RUN_ID" && std::string(value) == "none") continue;
    id = value;
  }
  if (id.empty()) {
    char hex[32] = {};
    std::snprintf(hex, sizeof hex, "nccl-%016" PRIx64, static_cast<std::uint64_t>(shared_id));
    id = hex;
  }
  for (char& c : id)
    if (c == '/' || c == ' ' || c == '\0' || c == '\n') c = '_';
  if (id == "." || id == "..") id = "_";
  return id;
}

}  // namespace commtap::interpose
