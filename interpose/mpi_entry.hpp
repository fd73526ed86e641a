// Which MPI library the process runs on, decided at its first MPI call (mpi_entry.cpp).
#pragma once

namespace commtap::interpose {

enum class MpiAbi {
  undecided,  // no MPI call yet, or none found loaded at the first
  mpich,      // MPICH's ABI (MPICH, Intel MPI, MVAPICH, Cray MPICH): commtap's wrappers run
  other,      // another ABI (Open MPI): every MPI call goes to the library untouched
};

MpiAbi mpi_abi() noexcept;

}  // namespace commtap::interpose
