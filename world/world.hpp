// world: what the ranks of a job agree on, and how they come to agree. Node layout, world-rank
// translation, offsets to rank 0's clock, and (world/communicators.hpp) an id for every
// communicator. Everything here is collective over the communicator it is given and runs on
// commtap's private communicators, never on the application's.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "monitor/trace_schema.hpp"

namespace commtap::world {

// Nodes of `comm` (collective over it): `test_nodes` > 0 makes that many pretend nodes, ranks
// dealt round-robin; 0 asks MPI (MPI_COMM_TYPE_SHARED). The node leaders (local rank 0), in rank
// order, number the nodes. The caller owns (and frees) the two communicators.
struct NodeLayout {
  MPI_Comm node = MPI_COMM_NULL;     // the ranks of this rank's node
  MPI_Comm leaders = MPI_COMM_NULL;  // one rank per node; MPI_COMM_NULL on the others
  int nodes = 0, node_index = 0, local_size = 0, local_rank = 0;
};
NodeLayout node_layout(MPI_Comm comm, int test_nodes);
// Frees the layout's communicators (collective over the layout's ranks while MPI runs).
void free_layout(NodeLayout& layout);

// The ranks of `comm` on this rank's machine and the CPUs they may run on between them
// (collective over `comm`). A machine is one running kernel, told by its boot id, which its
// containers and network namespaces share while each may have a host name of its own; its CPUs
// are the union of those ranks' affinity masks. A machine is oversubscribed where `ranks` >
// `cpus`: ranks that spin in their waits then take the CPU from the ones they wait for.
struct MachineShare {
  int ranks = 1, cpus = 1;
};
MachineShare machine_share(MPI_Comm comm);

// The MPI_COMM_WORLD rank of each rank of `group`, in order (MPI_UNDEFINED for ranks outside
// MPI_COMM_WORLD, as with spawned processes).
std::vector<int> world_ranks_of(MPI_Group group);

// Rank 0's `text` on every rank of `comm`.
std::string broadcast_string(std::string text, MPI_Comm comm, int rank);

// The lowest rank of `comm` where `condition` holds, or -1 where it holds nowhere (collective
// over `comm`). When many ranks hit the same problem, that rank alone says so.
int lowest_rank_where(bool condition, MPI_Comm comm);

// Completes commtap's own requests by testing with sched_yield between tests (`yield`), so that
// oversubscribed ranks do not starve the one they wait for, or by blocking. An MPI error code.
int wait_all(int count, MPI_Request requests[], bool yield);

// Offsets to rank 0's monotonic clock (monitor::now_ns), estimated along a tree so that no rank
// exchanges with more than a few others and the job waits O(log p) message latencies, not p: each
// node's ranks compare clocks with a parent among them (a binary tree rooted at the node's
// leader, over shared memory), and the leaders with a parent among the leaders (a binary tree
// rooted at rank 0's node). Every edge is Cristian's method (the shortest of `exchanges` timed
// round trips); all edges are measured at once, then the offsets are summed from rank 0 down, and
// so are their error bounds: a rank's error is the sum of half the shortest round trip of each
// edge on its path to rank 0 (depth log2(nodes) + log2(ranks per node)).
class ClockTree {
 public:
  // Along `layout`'s nodes, whose communicators the caller keeps (and frees after the last
  // estimate).
  explicit ClockTree(const NodeLayout& layout);
  ~ClockTree();
  ClockTree(const ClockTree&) = delete;
  ClockTree& operator=(const ClockTree&) = delete;

  // Collective over the layout's ranks, all of them calling the same sequence of estimate and
  // estimate_in_background. Point-to-point messages per rank and estimate: 2 x exchanges + 1 as
  // a child, as many per child (at most 2 children per tree, a leader is in two trees).
  //
  // Measures and sums down the tree before it returns (MPI_Init, MPI_Finalize): the estimates
  // finished by this call, this one last (an earlier background one first). Rank 0 gets {0, 0}.
  std::vector<monitor::ClockEstimate> estimate(int exchanges);
  // Mid-job: returns once this rank's edge is measured and its children's are; the offset
  // follows when the parent's arrives, which progress() picks up (the job does not wait for the
  // sum's log2 p steps down the tree). Returns the estimates an earlier background one left.
  std::vector<monitor::ClockEstimate> estimate_in_background(int exchanges);
  // Whether a background estimate awaits its parent's offset (cheap: for every world collective).
  bool pending() const noexcept { return pending_.load(std::memory_order_relaxed); }
  // Completes what arrived without waiting: the background estimate, once it is known here.
  std::vector<monitor::ClockEstimate> progress();

  class Estimate;

 private:
  std::vector<monitor::ClockEstimate> finish_background();

  NodeLayout layout_;
  std::unique_ptr<Estimate> background_;
  std::atomic<bool> pending_{false};
};

// Exchanges the clock estimates use: at MPI_Init and MPI_Finalize, and mid-job (where the job
// waits for them: fewer, each edge's error then a little wider).
inline constexpr int kClockExchanges = 12;
inline constexpr int kClockExchangesMidJob = 2;

}  // namespace commtap::world
