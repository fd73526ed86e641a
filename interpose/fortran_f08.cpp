// The mpi_f08 module's MPI_Init, MPI_Init_thread and MPI_Finalize call PMPI_Init,
// PMPI_Init_thread and PMPI_Finalize directly, bypassing the C wrappers (mpif.h and `use mpi`
// reach the C MPI_* symbols and need nothing here). These wrappers catch those three by their
// Fortran symbol names and forward to the next definition, MPICH's libmpifort.
#include <dlfcn.h>

#include "interpose/export.hpp"
#include "interpose/runtime.hpp"

namespace {

template <typename Function>
Function next_definition(const char* symbol) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, symbol));
}

// Only a Fortran program linked with libmpifort calls these, so the next definition exists;
// if it somehow does not, report an error through ierror rather than crash.
void missing(int* ierror) {
  if (ierror != nullptr) *ierror = MPI_ERR_OTHER;
}

using InitF08 = void (*)(int* ierror);
using InitThreadF08 = void (*)(int* required, int* provided, int* ierror);
using FinalizeF08 = void (*)(int* ierror);

}  // namespace

using commtap::interpose::Fn;

// ierror is OPTIONAL in mpi_f08, so it may be a null pointer; it is only passed along.
extern "C" COMMTAP_EXPORT void mpi_init_f08_(int* ierror) {
  static const auto real = next_definition<InitF08>("mpi_init_f08_");
  const std::uint64_t began = commtap::monitor::now_ns();
  if (real == nullptr) return missing(ierror);
  real(ierror);
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (initialized) commtap::interpose::start_after_mpi_init(began, Fn::Init);
}

extern "C" COMMTAP_EXPORT void mpi_init_thread_f08_(int* required, int* provided, int* ierror) {
  static const auto real = next_definition<InitThreadF08>("mpi_init_thread_f08_");
  const std::uint64_t began = commtap::monitor::now_ns();
  if (real == nullptr) return missing(ierror);
  real(required, provided, ierror);
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (initialized) commtap::interpose::start_after_mpi_init(began, Fn::Init_thread);
}

extern "C" COMMTAP_EXPORT void mpi_finalize_f08_(int* ierror) {
  static const auto real = next_definition<FinalizeF08>("mpi_finalize_f08_");
  if (real == nullptr) return missing(ierror);
  commtap::interpose::stop_before_mpi_finalize(Fn::Finalize, "finalize");
  real(ierror);
}
