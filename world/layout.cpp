// Where the ranks are: the node layout (real or pretended for tests), world ranks of a group,
// and commtap's own waits.
#include <sched.h>

#include "world/world.hpp"

namespace commtap::world {

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
