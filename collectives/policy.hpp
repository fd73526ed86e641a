// What commtap's all-reduce takes from MPI_Allreduce: the eligibility rules (a call it cannot
// answer exactly as the library would goes to the library untouched). The rest of the policy,
// which form and the fallback, is allreduce_call (collectives.hpp). Internal to collectives/ (its
// tests use it too).
#pragma once

#include <mpi.h>

namespace commtap::collectives {

// Why a call must go to the MPI library untouched, or `eligible`.
enum class Eligibility {
  eligible,
  zero_count,
  single_rank,
  intercommunicator,
  derived_datatype,
  user_or_noncommutative_op,
  mpi_error,
};

const char* to_string(Eligibility reason) noexcept;

// Whether commtap's all-reduce algorithms may replace the library's for this call. They run
// only where they are known to give the library's answer: builtin datatypes, commutative
// builtin operations, intracommunicators of two or more ranks, non-zero counts.
Eligibility allreduce_eligibility(MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
// The same without the communicator's checks (for one that passed them before).
Eligibility operation_eligibility(MPI_Count count, MPI_Datatype type, MPI_Op op);

}  // namespace commtap::collectives
