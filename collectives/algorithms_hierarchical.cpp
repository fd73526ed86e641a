// The hierarchical all-reduce forms: node stages by the library's (shared-memory) collectives on
// commtap's private communicators around a flat form among the node leaders (hier, hier-star,
// hier-direct, hier-knomial) or among the peers of each local rank (hier-rs), and the pipelined
// form whose node and network stages overlap (hier-pipe).
#include <algorithm>
#include <vector>

#include "collectives/algorithms.hpp"
#include "collectives/point_to_point.hpp"

namespace commtap::collectives {

namespace {

// Hierarchical in segments: while the leaders all-reduce segment s across nodes, the node
// reduces segment s+1 and broadcasts segment s-1, so that the node's shared memory and the
// network work at once. Every stage is the library's nonblocking collective on commtap's
// private communicators, started in the same order on every rank (as MPI requires); a
// non-leader waits for its own reduction of a segment before the broadcast overwrites it.
//
// The segment size is the cost model's for this call (Tuning::segment_bytes), equal on all ranks.
int pipelined_hierarchical(const Call& c, Topology& t, void* buffer, MPI_Count count) {
  const MPI_Count segment_bytes = std::max<MPI_Count>(1, t.tuning.segment_bytes);
  const MPI_Count per_segment = std::max<MPI_Count>(1, (segment_bytes + c.extent - 1) / c.extent);
  const MPI_Count segments = (count + per_segment - 1) / per_segment;
  const bool leader = t.local_rank == 0;
  auto first = [&](MPI_Count s) { return s * per_segment; };
  auto length = [&](MPI_Count s) { return std::min(per_segment, count - first(s)); };
  std::vector<MPI_Request> reduced(static_cast<std::size_t>(segments), MPI_REQUEST_NULL);
  std::vector<MPI_Request> combined(static_cast<std::size_t>(segments), MPI_REQUEST_NULL);
  std::vector<MPI_Request> broadcast(static_cast<std::size_t>(segments), MPI_REQUEST_NULL);
  for (MPI_Count step = 0; step < segments + 2; ++step) {
    if (step < segments) {
      void* at = c.at(buffer, first(step));
      COMMTAP_TRY(PMPI_Ireduce_c(leader ? MPI_IN_PLACE : at, leader ? at : nullptr, length(step),
                                 c.type, c.op, 0, t.node,
                                 &reduced[static_cast<std::size_t>(step)]));
    }
    if (leader && step >= 1 && step <= segments) {
      const MPI_Count s = step - 1;
      COMMTAP_TRY(wait_all(c, 1, &reduced[static_cast<std::size_t>(s)]));
      COMMTAP_TRY(PMPI_Iallreduce_c(MPI_IN_PLACE, c.at(buffer, first(s)), length(s), c.type, c.op,
                                    t.leaders, &combined[static_cast<std::size_t>(s)]));
    }
    if (step >= 2) {
      const MPI_Count s = step - 2;
      MPI_Request& before =
          leader ? combined[static_cast<std::size_t>(s)] : reduced[static_cast<std::size_t>(s)];
      COMMTAP_TRY(wait_all(c, 1, &before));
      COMMTAP_TRY(PMPI_Ibcast_c(c.at(buffer, first(s)), length(s), c.type, 0, t.node,
                                &broadcast[static_cast<std::size_t>(s)]));
    }
  }
  return wait_all(c, static_cast<int>(segments), broadcast.data());
}

// The leaders' (or peers') algorithm inside a hierarchical one: few ranks, so recursive
// doubling for small buffers and a ring for large ones.
Algorithm inter_algorithm(MPI_Count bytes) {
  return bytes <= 64 * 1024 ? Algorithm::rd : Algorithm::ring;
}

}  // namespace

int hierarchical(Algorithm algorithm, const Call& c, Topology& t, void* buffer, MPI_Count count) {
  const MPI_Count bytes = count * c.extent;
  switch (algorithm) {
    case Algorithm::hier_pipe:
      // Rank-independent facts only: a rank alone on its node takes part all the same.
      if (t.nodes > 1 && t.max_local_size > 1) return pipelined_hierarchical(c, t, buffer, count);
      [[fallthrough]];
    case Algorithm::hier_rs:
      if (t.regular && t.local_size > 1 && t.nodes > 1) {
        // Each local rank owns a slice: reduce-scatter inside the node, all-reduce the slice
        // with the same local rank of every other node, all-gather inside the node.
        std::vector<MPI_Count> counts(static_cast<std::size_t>(t.local_size));
        std::vector<MPI_Aint> displacements(counts.size());
        for (int i = 0; i < t.local_size; ++i) {
          counts[static_cast<std::size_t>(i)] = count / t.local_size + (i < count % t.local_size);
          if (i > 0)
            displacements[static_cast<std::size_t>(i)] =
                displacements[static_cast<std::size_t>(i - 1)] +
                static_cast<MPI_Aint>(counts[static_cast<std::size_t>(i - 1)]);
        }
        const MPI_Count mine = counts[static_cast<std::size_t>(t.local_rank)];
        std::vector<char> slice(static_cast<std::size_t>(std::max<MPI_Count>(1, mine) * c.extent));
        MPI_Request request;
        COMMTAP_TRY(PMPI_Ireduce_scatter_c(buffer, slice.data(), counts.data(), c.type, c.op,
                                           t.node, &request));
        COMMTAP_TRY(wait_all(c, 1, &request));
        if (mine > 0)
          COMMTAP_TRY(
              flat(inter_algorithm(mine * c.extent), c, t.peers, slice.data(), mine, t.scratch));
        COMMTAP_TRY(PMPI_Iallgatherv_c(slice.data(), mine, c.type, buffer, counts.data(),
                                       displacements.data(), c.type, t.node, &request));
        return wait_all(c, 1, &request);
      }
      [[fallthrough]];
    case Algorithm::hier:
    case Algorithm::hier_star:
    case Algorithm::hier_direct:
    case Algorithm::hier_knomial:
    default: {
      // The node stages use the library's (shared-memory) collectives, nonblocking so that
      // yield mode can wait without spinning.
      MPI_Request request;
      if (t.local_size > 1) {
        COMMTAP_TRY(PMPI_Ireduce_c(t.local_rank == 0 ? MPI_IN_PLACE : buffer,
                                   t.local_rank == 0 ? buffer : nullptr, count, c.type, c.op, 0,
                                   t.node, &request));
        COMMTAP_TRY(wait_all(c, 1, &request));
      }
      if (t.leaders != MPI_COMM_NULL && t.nodes > 1) {
        const Algorithm leaders = algorithm == Algorithm::hier_star      ? Algorithm::star
                                  : algorithm == Algorithm::hier_direct  ? Algorithm::direct
                                  : algorithm == Algorithm::hier_knomial ? Algorithm::knomial
                                                                         : inter_algorithm(bytes);
        COMMTAP_TRY(flat(leaders, c, t.leaders, buffer, count, t.scratch, t.leaders_star_root,
                         t.leaders_ring_order, t.tuning.leaders_radix));
      }
      if (t.local_size > 1) {
        COMMTAP_TRY(PMPI_Ibcast_c(buffer, count, c.type, 0, t.node, &request));
        COMMTAP_TRY(wait_all(c, 1, &request));
      }
      return MPI_SUCCESS;
    }
  }
}

}  // namespace commtap::collectives
