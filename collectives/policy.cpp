// What MPI_Allreduce does under commtap: whether a call is eligible for commtap's algorithms,
// which form runs it (the configured one, or the cost model's choice, cached per size on the
// communicator's topology), and when it goes back to the library.
#include "collectives/policy.hpp"

#include <utility>

#include "collectives/algorithms.hpp"
#include "collectives/context.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/topology.hpp"
#include "datatypes/datatypes.hpp"

namespace commtap::collectives {

const char* to_string(Eligibility reason) noexcept {
  switch (reason) {
    case Eligibility::eligible:
      return "eligible";
    case Eligibility::zero_count:
      return "zero count";
    case Eligibility::single_rank:
      return "single-rank communicator";
    case Eligibility::intercommunicator:
      return "intercommunicator";
    case Eligibility::derived_datatype:
      return "derived datatype";
    case Eligibility::user_or_noncommutative_op:
      return "user-defined or non-commutative operation";
    case Eligibility::mpi_error:
      return "MPI error while checking";
  }
  return "unknown";
}

Eligibility allreduce_eligibility(MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  // Null handles and negative counts are errors the library must report (the checks below
  // would raise them through the wrong error handler).
  if (count < 0 || op == MPI_OP_NULL || type == MPI_DATATYPE_NULL || comm == MPI_COMM_NULL)
    return Eligibility::mpi_error;
  if (count == 0) return Eligibility::zero_count;
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return Eligibility::mpi_error;
  if (inter) return Eligibility::intercommunicator;
  int size = 0;
  if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return Eligibility::mpi_error;
  if (size < 2) return Eligibility::single_rank;
  // User-defined operations may be commutative but are opaque to commtap's local reductions'
  // fast paths and may depend on the order MPI documents; only builtin operations qualify.
  const bool builtin = op == MPI_MAX || op == MPI_MIN || op == MPI_SUM || op == MPI_PROD ||
                       op == MPI_LAND || op == MPI_BAND || op == MPI_LOR || op == MPI_BOR ||
                       op == MPI_LXOR || op == MPI_BXOR || op == MPI_MINLOC || op == MPI_MAXLOC;
  if (!builtin) return Eligibility::user_or_noncommutative_op;
  // The large-count query: the int one is an error for types made by large-count constructors
  // in MPICH 4.0.2 (tests/mpich_defects/large_count_envelope.c).
  MPI_Count integers = 0, addresses = 0, large_counts = 0, datatypes = 0;
  int combiner = 0;
  if (PMPI_Type_get_envelope_c(type, &integers, &addresses, &large_counts, &datatypes, &combiner) !=
      MPI_SUCCESS)
    return Eligibility::mpi_error;
  if (combiner != MPI_COMBINER_NAMED) return Eligibility::derived_datatype;
  return Eligibility::eligible;
}

std::optional<int> try_allreduce(const Context& context, const void* sendbuf, void* recvbuf,
                                 MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                 Algorithm& used, std::vector<Step>* steps) {
  used = Algorithm::native;
  if (context.allreduce == Algorithm::native ||
      allreduce_eligibility(count, type, op, comm) != Eligibility::eligible)
    return std::nullopt;
  using datatypes::MemoryKind;
  if (datatypes::memory_kind(recvbuf) != MemoryKind::host ||
      (sendbuf != MPI_IN_PLACE && datatypes::memory_kind(sendbuf) != MemoryKind::host))
    return std::nullopt;
  const Agreement& agreed = agreement_of(context);
  Topology* topology = topology_of(comm, context.test_nodes, agreed.avoid);
  Algorithm algorithm = context.allreduce;
  if (asks_the_model(algorithm)) {
    MPI_Count size = 0;
    PMPI_Type_size_c(type, &size);
    auto cached = topology->chosen.find(count * size);
    if (cached == topology->chosen.end()) {
      if (topology->chosen.size() >= 4096) topology->chosen.clear();
      Tuning tuning;
      const Algorithm best = choose(agreed.cost_model, *topology, count * size, &tuning);
      cached = topology->chosen.emplace(count * size, std::make_pair(best, tuning)).first;
    }
    const auto [chosen, tuning] = cached->second;
    topology->tuning = tuning;
    if (context.knomial_radix > 0)
      topology->tuning.flat_radix = topology->tuning.leaders_radix = context.knomial_radix;
    if (algorithm == Algorithm::automatic) algorithm = chosen;
    if (algorithm == Algorithm::native) return std::nullopt;
  }
  used = algorithm;
  return allreduce(algorithm, sendbuf, recvbuf, count, type, op, *topology, context.yield, steps);
}

}  // namespace commtap::collectives
