// What MPI_Allreduce does under commtap: whether a call is eligible for commtap's algorithms,
// which form runs it (the configured one, or the cost model's choice, cached per size on the
// communicator's topology), and when it goes back to the library.
#include "collectives/policy.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "collectives/algorithms.hpp"
#include "collectives/context.hpp"
#include "collectives/cost_model.hpp"
#include "collectives/online_choice.hpp"
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

Eligibility operation_eligibility(MPI_Count count, MPI_Datatype type, MPI_Op op) {
  // Null handles and negative counts are errors the library must report (the checks below
  // would raise them through the wrong error handler).
  if (count < 0 || op == MPI_OP_NULL || type == MPI_DATATYPE_NULL) return Eligibility::mpi_error;
  if (count == 0) return Eligibility::zero_count;
  // User-defined operations may be commutative but are opaque to commtap's local reductions'
  // fast paths and may depend on the order MPI documents; only builtin operations qualify.
  const bool builtin = op == MPI_MAX || op == MPI_MIN || op == MPI_SUM || op == MPI_PROD ||
                       op == MPI_LAND || op == MPI_BAND || op == MPI_LOR || op == MPI_BOR ||
                       op == MPI_LXOR || op == MPI_BXOR || op == MPI_MINLOC || op == MPI_MAXLOC;
  if (!builtin) return Eligibility::user_or_noncommutative_op;
  // A handle found named stays named (predefined types are never freed), so the last few are
  // remembered per thread: the envelope query is the dearest check of a call.
  constexpr int kRemembered = 8;
  thread_local MPI_Datatype named[kRemembered];
  thread_local int remembered = 0, next_slot = 0;
  for (int i = 0; i < remembered; ++i)
    if (named[i] == type) return Eligibility::eligible;
  // The large-count query: the int one is an error for types made by large-count constructors
  // in MPICH 4.0.2 (tests/mpich_defects/large_count_envelope.c).
  MPI_Count integers = 0, addresses = 0, large_counts = 0, datatypes = 0;
  int combiner = 0;
  if (PMPI_Type_get_envelope_c(type, &integers, &addresses, &large_counts, &datatypes, &combiner) !=
      MPI_SUCCESS)
    return Eligibility::mpi_error;
  if (combiner != MPI_COMBINER_NAMED) return Eligibility::derived_datatype;
  named[next_slot] = type;
  next_slot = (next_slot + 1) % kRemembered;
  remembered = std::min(remembered + 1, kRemembered);
  return Eligibility::eligible;
}

Eligibility allreduce_eligibility(MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || count < 0 || op == MPI_OP_NULL || type == MPI_DATATYPE_NULL)
    return Eligibility::mpi_error;
  if (count == 0) return Eligibility::zero_count;
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return Eligibility::mpi_error;
  if (inter) return Eligibility::intercommunicator;
  int size = 0;
  if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return Eligibility::mpi_error;
  if (size < 2) return Eligibility::single_rank;
  return operation_eligibility(count, type, op);
}

namespace {

// A communicator's first collective calls go to the library: one made for a call or two (or a
// loop of create, all-reduce, free) would pay more for commtap's private communicators (a
// duplicate and two splits, made by its first commtap all-reduce) than any form saves.
constexpr std::uint64_t kFirstTakenSeq = 9;  // sequence numbers start at 1

// What one call runs, for `auto` and the forms it tunes: the tuning for its size from the
// formulas (cached by size), and for `auto` a model file's measured choice, the formulas'
// choice (COMMTAP_ALLREDUCE_TRIALS=0), or the trial of its size class.
struct Pick {
  Algorithm algorithm = Algorithm::native;
  SizeTrial* trial = nullptr;  // the call is timed for this trial
};

Pick pick(const Context& context, const CostModel& model, Topology& topology, MPI_Count bytes) {
  auto cached = topology.chosen.find(bytes);
  if (cached == topology.chosen.end()) {
    if (topology.chosen.size() >= 4096) topology.chosen.clear();
    Tuning tuning;
    const Algorithm best = choose(model, topology, bytes, &tuning);
    cached = topology.chosen.emplace(bytes, std::make_pair(best, tuning)).first;
  }
  const auto [chosen, tuning] = cached->second;
  topology.tuning = tuning;
  if (context.knomial_radix > 0)
    topology.tuning.flat_radix = topology.tuning.leaders_radix = context.knomial_radix;
  if (context.allreduce != Algorithm::automatic) return {context.allreduce};
  // A flagged link between these hosts: the formulas charge what crossing it costs and route
  // around it; a trial would send the library's traffic over it.
  if (context.trial_rounds == 0 || topology.nodes <= 1 || topology.has_flagged_link() ||
      measured_choice(model, topology, bytes))
    return {chosen};
  auto trial = topology.trials.find(size_class(bytes));
  if (trial == topology.trials.end())
    trial = topology.trials
                .emplace(size_class(bytes),
                         SizeTrial(contenders(model, topology, bytes), context.trial_rounds))
                .first;
  return {trial->second.next(), &trial->second};
}

// COMMTAP_VERBOSE=2: a trial's figures and decision, from the communicator's first rank.
void report(const SizeTrial& trial, const Topology& topology, MPI_Count count, MPI_Datatype type) {
  MPI_Count size = 0;
  PMPI_Type_size_c(type, &size);
  std::string figures;
  for (std::size_t i = 0; i < trial.measured().size(); ++i) {
    char figure[64];
    std::snprintf(figure, sizeof figure, "%s%s %.1f us", i ? ", " : "",
                  algorithm_name(trial.measured()[i]), trial.times()[i].median_s * 1e6);
    figures += figure;
  }
  std::fprintf(stderr, "commtap: all-reduce trial %d on %d ranks (%d nodes), %lld bytes: %s; %s\n",
               trial.trials(), topology.size, topology.nodes, static_cast<long long>(count * size),
               figures.c_str(), algorithm_name(trial.chosen()));
}

}  // namespace

int allreduce_call(const Context& context, const void* sendbuf, void* recvbuf, MPI_Count count,
                   MPI_Datatype type, MPI_Op op, MPI_Comm comm, std::uint64_t seq,
                   const std::function<int()>& library, Algorithm& used, std::vector<Step>* steps) {
  used = Algorithm::native;
  const Agreement& agreed = agreement_of(context);
  // Routing around a flagged link starts at the first call (the library's may cross it).
  if (leaves_allreduce_to_library(context) || comm == MPI_COMM_NULL ||
      (context.allreduce == Algorithm::automatic && seq < kFirstTakenSeq &&
       agreed.avoid.hosts.empty() && agreed.avoid.links.empty()))
    return library();
  // A communicator with a topology passed the communicator's checks when it was made.
  Topology* topology = existing_topology(comm);
  if ((topology != nullptr ? operation_eligibility(count, type, op)
                           : allreduce_eligibility(count, type, op, comm)) != Eligibility::eligible)
    return library();
  using datatypes::MemoryKind;
  if (datatypes::memory_kind(recvbuf) != MemoryKind::host ||
      (sendbuf != MPI_IN_PLACE && datatypes::memory_kind(sendbuf) != MemoryKind::host))
    return library();
  if (topology == nullptr) topology = topology_of(comm, context.test_nodes, agreed.avoid);
  Pick picked{context.allreduce};
  if (asks_the_model(context.allreduce)) {
    MPI_Count size = 0;
    PMPI_Type_size_c(type, &size);
    picked = pick(context, agreed.cost_model, *topology, count * size);
  }
  const double start = picked.trial != nullptr ? PMPI_Wtime() : 0;
  const int rc = picked.algorithm == Algorithm::native
                     ? library()
                     : allreduce(picked.algorithm, sendbuf, recvbuf, count, type, op, *topology,
                                 context.yield, steps);
  used = picked.algorithm;
  // Every rank counts the same calls of the size class, so all agree at the same one (a
  // trial's last).
  if (picked.trial != nullptr && picked.trial->record(PMPI_Wtime() - start)) {
    picked.trial->agree(topology->flat, context.yield);
    if (context.report_trials && topology->rank == 0) report(*picked.trial, *topology, count, type);
  }
  return rc;
}

}  // namespace commtap::collectives
