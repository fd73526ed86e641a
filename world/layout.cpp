// Where the ranks are: the node layout (real or pretended for tests), the machines' shares of
// CPUs, world ranks of a group, and commtap's own waits.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>

#include "world/world.hpp"

namespace commtap::world {

namespace {

// The running kernel's boot id (random per boot, the same in every namespace and container of the
// machine); the host name where /proc does not say.
std::string machine_id() {
  std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (std::getline(boot_id, id) && !id.empty()) return id;
  std::array<char, 256> name{};
  gethostname(name.data(), name.size() - 1);
  return name.data();
}

}  // namespace

MachineShare machine_share(MPI_Comm comm) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  const std::string id = machine_id();
  // Split by a hash of the id first (FNV-1a), then tell apart machines whose hashes collide by
  // the ids themselves, exchanged among those few ranks only.
  std::uint32_t hash = 2166136261u;
  for (const char c : id) hash = (hash ^ static_cast<unsigned char>(c)) * 16777619u;
  MPI_Comm same_hash = MPI_COMM_NULL, machine = MPI_COMM_NULL;
  PMPI_Comm_split(comm, static_cast<int>(hash & 0x7fffffffu), rank, &same_hash);
  int hashed = 1;
  PMPI_Comm_size(same_hash, &hashed);
  constexpr int kIdBytes = 64;
  std::array<char, kIdBytes> mine{};
  std::copy_n(id.begin(), std::min<std::size_t>(id.size(), kIdBytes - 1), mine.begin());
  std::vector<char> ids(static_cast<std::size_t>(hashed) * kIdBytes);
  MPI_Request request = MPI_REQUEST_NULL;
  PMPI_Iallgather(mine.data(), kIdBytes, MPI_BYTE, ids.data(), kIdBytes, MPI_BYTE, same_hash,
                  &request);
  wait_all(1, &request, true);
  int first_alike = 0;
  while (!std::equal(mine.begin(), mine.end(), ids.begin() + first_alike * kIdBytes)) ++first_alike;
  PMPI_Comm_split(same_hash, first_alike, rank, &machine);
  MachineShare share;
  PMPI_Comm_size(machine, &share.ranks);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) {
    // More CPUs than a cpu_set_t holds: every online one (they cannot be oversubscribed by
    // fewer than a thousand ranks anyway).
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    for (long cpu = 0; cpu < std::min<long>(online, CPU_SETSIZE); ++cpu) CPU_SET(cpu, &cpus);
  }
  PMPI_Iallreduce(MPI_IN_PLACE, &cpus, sizeof cpus, MPI_BYTE, MPI_BOR, machine, &request);
  wait_all(1, &request, true);
  share.cpus = std::max(1, CPU_COUNT(&cpus));
  PMPI_Comm_free(&machine);
  PMPI_Comm_free(&same_hash);
  return share;
}

NodeLayout node_layout(MPI_Comm comm, int test_nodes) {
  NodeLayout layout;
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  if (test_nodes > 0)
    PMPI_Comm_split(comm, rank % test_nodes, rank, &layout.node);
  else
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &layout.node);
  PMPI_Comm_size(layout.node, &layout.local_size);
  PMPI_Comm_rank(layout.node, &layout.local_rank);
  PMPI_Comm_split(comm, layout.local_rank == 0 ? 0 : MPI_UNDEFINED, rank, &layout.leaders);
  if (layout.leaders != MPI_COMM_NULL) {
    PMPI_Comm_size(layout.leaders, &layout.nodes);
    PMPI_Comm_rank(layout.leaders, &layout.node_index);
  }
  int facts[2] = {layout.nodes, layout.node_index};
  MPI_Request request = MPI_REQUEST_NULL;
  PMPI_Ibcast(facts, 2, MPI_INT, 0, layout.node, &request);
  wait_all(1, &request, true);
  layout.nodes = facts[0];
  layout.node_index = facts[1];
  return layout;
}

void free_layout(NodeLayout& layout) {
  for (MPI_Comm* c : {&layout.leaders, &layout.node})
    if (*c != MPI_COMM_NULL) PMPI_Comm_free(c);
}

std::vector<int> world_ranks_of(MPI_Group group) {
  MPI_Group world = MPI_GROUP_NULL;
  PMPI_Comm_group(MPI_COMM_WORLD, &world);
  int size = 0;
  PMPI_Group_size(group, &size);
  std::vector<int> local(static_cast<std::size_t>(size)), global(local.size());
  for (int i = 0; i < size; ++i) local[static_cast<std::size_t>(i)] = i;
  PMPI_Group_translate_ranks(group, size, local.data(), world, global.data());
  PMPI_Group_free(&world);
  return global;
}

int wait_all(int count, MPI_Request requests[], bool yield) {
  if (!yield) return PMPI_Waitall(count, requests, MPI_STATUSES_IGNORE);
  for (;;) {
    int done = 0;
    const int rc = PMPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS || done) return rc;
    sched_yield();
  }
}

}  // namespace commtap::world
