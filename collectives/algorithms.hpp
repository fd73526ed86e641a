// commtap's all-reduce algorithms themselves: one call by a given form over PMPI point-to-point
// on a topology's private communicators. Internal to collectives/ (the policy, the calibration,
// tests and benchmarks run them).
#pragma once

#include <mpi.h>

#include <vector>

#include "collectives/collectives.hpp"
#include "collectives/topology.hpp"

namespace commtap::collectives {

// commtap's all-reduce with `algorithm` (not native or automatic: see choose()). The call must
// be eligible (allreduce_eligibility) and the buffers in host memory. Returns an MPI error code.
// `yield`: wait with test-and-sched_yield loops instead of blocking. `steps`, when given,
// receives every message the algorithm sends or receives itself, in the order they were posted
// (see Step). The tuned forms take their parameters from `topology.tuning`.
int allreduce(Algorithm algorithm, const void* sendbuf, void* recvbuf, MPI_Count count,
              MPI_Datatype type, MPI_Op op, Topology& topology, bool yield,
              std::vector<Step>* steps = nullptr);

// For commtap's own tests (COMMTAP_TEST_REVERSED_FOLD): this rank folds the direct and knomial
// exchanges' buffers in the other order, so that its floating-point results differ from the
// other ranks' in the last bits; the sweep test must catch that.
void reverse_folds_for_tests(bool on);

// The two families of forms that allreduce() dispatches to, over one call's point-to-point
// layer (point_to_point.hpp).
struct Call;
// In place on `buffer` among all ranks of `comm`: `root` is the star's, `order` the ring's
// (empty: rank order), `radix` knomial's k; every other algorithm is recursive doubling.
int flat(Algorithm algorithm, const Call& c, MPI_Comm comm, void* buffer, MPI_Count count,
         std::vector<char>& scratch, int root = 0, const std::vector<int>& order = {},
         int radix = 2);
// The hierarchical forms on `t`, in place on `buffer`: node stages by the library's
// collectives around a flat form among the leaders (or the peers); a form whose shape is
// missing here falls back to a simpler one (hier-pipe to hier-rs to hier).
int hierarchical(Algorithm algorithm, const Call& c, Topology& t, void* buffer, MPI_Count count);

}  // namespace commtap::collectives
