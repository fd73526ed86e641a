// Where a communicator's ranks live (nodes, leaders, commtap's private communicators) and how
// commtap's all-reduce routes around avoided hosts and flagged links: star roots, ring orders,
// the pair of nodes that measures the network, and what a flagged link costs the cost model.
// Internal to collectives/ (its tests and benchmarks use it too).
#pragma once

#include <mpi.h>

#include <unordered_map>
#include <utility>
#include <vector>

#include "avoid_list/avoid_list.hpp"
#include "collectives/collectives.hpp"
#include "collectives/online_choice.hpp"

namespace commtap::collectives {

// The per-call parameters of the forms that have them, from the cost model for the call's size
// (choose()): the k of the two k-nomial forms, and the segment size of the pipelined one.
struct Tuning {
  int flat_radix = 2;                    // knomial: among all ranks
  int leaders_radix = 2;                 // hier-knomial: among the node leaders
  MPI_Count segment_bytes = 256 * 1024;  // hier-pipe: bytes per segment
};

// Where a communicator's ranks live, and commtap's private communicators for it: made by the
// first commtap all-reduce on the communicator (a collective call on all its ranks) and cached
// on it as an attribute, freed with it.
struct Topology {
  MPI_Comm flat = MPI_COMM_NULL;     // all ranks (a private duplicate)
  MPI_Comm node = MPI_COMM_NULL;     // the ranks of this rank's node
  MPI_Comm leaders = MPI_COMM_NULL;  // one rank per node (local rank 0); NULL on the others
  MPI_Comm peers = MPI_COMM_NULL;    // the ranks with this local rank on every node (regular)
  int size = 0, rank = 0;
  int nodes = 0, node_index = 0, local_size = 0, local_rank = 0;
  int max_local_size = 0;  // the largest node's ranks (equal on all ranks)
  bool regular = false;    // every node has the same number of ranks
  // Of recursive doubling's ceil(log2 size) rounds (the fold of the ranks past a power of two
  // counted as one), those whose every pair shares a node (round-robin placements have some).
  int rd_rounds_within_nodes = 0;
  // Of the buffer a recursive-halving reduce-scatter over the same pairs moves (1/2 in its first
  // round, 1/4 in the next...), the share sent in rounds that cross nodes.
  double halving_share_across_nodes = 0;
  // The two nodes whose leaders measure the network for the cost model (node indices, and the
  // first one's leader in `flat`): the first pair that no flagged link joins, neither of them
  // avoided, so that a slow link or host is charged as what crossing it costs and not as what
  // every link costs.
  int calibration_nodes[2] = {0, 1};
  int calibration_leader = 0;
  int star_root = 0;          // the star's root in `flat`: the first rank not on an avoided host
  int leaders_star_root = 0;  // the same among the leaders (hier-star), in `leaders`
  // Routing around flagged links (COMMTAP_AVOID_HOSTS). The ring's order of `flat` ranks, each
  // node's ranks together, the nodes ordered so that no ring step crosses a flagged link where
  // that can be done; the same for `leaders` (their ranks are node indices).
  std::vector<int> ring_order, leaders_ring_order;
  // Whether each form keeps off every flagged link between this communicator's hosts.
  bool ring_clear = true, leaders_ring_clear = true, star_clear = true, leaders_star_clear = true;
  // What crossing the worst flagged link here costs over a healthy one: latency (s), time per
  // byte (s/B), and whether one was named without figures (a list in the setting). 0: none.
  double flagged_alpha = 0, flagged_beta = 0;
  bool flagged_unmeasured = false;
  bool has_flagged_link() const noexcept {
    return flagged_alpha > 0 || flagged_beta > 0 || flagged_unmeasured;
  }
  // The tuned forms' parameters for the call about to run (set per call).
  Tuning tuning;
  // choose()'s answers (algorithm, tuning) by call size in bytes, which depend on nothing else
  // that changes after MPI_Init; cleared when it grows past a few thousand sizes.
  std::unordered_map<MPI_Count, std::pair<Algorithm, Tuning>> chosen;
  // auto's trials by size class (online_choice.hpp; at most 64 classes).
  std::unordered_map<int, SizeTrial> trials;
  std::vector<char> scratch;  // reused between calls (collectives on one communicator
                              // never run concurrently)
  // MPI_COMM_WORLD ranks of each private communicator's ranks, made when first needed (for
  // the steps of recorded calls).
  std::vector<std::pair<MPI_Comm, std::vector<int>>> world_ranks;
};

// The topology of `comm`, made on first use (collective). `test_nodes` > 0 makes that many
// pretend nodes, ranks dealt round-robin (for tests of non-block placements on one machine); 0
// asks MPI (MPI_COMM_TYPE_SHARED). `avoid` (equal on all ranks; host names as
// MPI_Get_processor_name gives them, or "test-node-K" for pretend node K) sets the star roots,
// the ring orders and what a flagged link costs the cost model: a star's root is not put on an
// avoided host, and no ring step or star message crosses a listed link where that can be done.
Topology* topology_of(MPI_Comm comm, int test_nodes, const avoid_list::AvoidList& avoid = {});

// The topology of `comm` if one was made, else nullptr (local).
Topology* existing_topology(MPI_Comm comm);

// The ring order of nodes 0..nodes-1 (node 0 first) that crosses the fewest `flagged` directed
// node pairs (from, to) from one node to the next, and how many it crosses: every order for up
// to 9 nodes, otherwise the rank order, its reverse and seeded shuffles. The same on every rank.
std::pair<std::vector<int>, int> ring_of_nodes(int nodes,
                                               const std::vector<std::pair<int, int>>& flagged);

}  // namespace commtap::collectives
