// The intercepted functions as data: an enumeration, names and families, all expanded from
// mpi_functions.def and nccl/functions.def (NCCL's after MPI's, in that table's order).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "nccl/functions.hpp"

namespace commtap::interpose {

enum class Family : std::uint8_t {
  collective,        // blocking collective
  collective_start,  // nonblocking collective (MPI_I*)
  collective_init,   // persistent collective (MPI_*_init)
  send,              // blocking send
  recv,              // blocking receive
  sendrecv,          // blocking send-receive
  probe,             // blocking probe (MPI_Probe, MPI_Mprobe): waits for a message, moves none
  p2p_start,         // nonblocking point-to-point
  p2p_init,          // persistent point-to-point
  completion,        // Wait and Test families
  start,             // Start, Startall
  request,           // Request_free, Cancel
  one_sided_sync,    // Win_fence, _post/_start/_complete/_wait, _lock/_unlock(_all), flushes
  window,            // Win_create, _allocate(_shared), _create_dynamic, Win_free
  pack,              // Pack, Unpack, Pack_size
  datatype,          // Type_commit, Type_free
  communicator,      // communicator creation and destruction
  lifecycle,         // Init, Init_thread, Finalize, Abort
  error_handling,    // Comm_get_errhandler, Errhandler_get (interpose/fatal_errors.hpp)
  nccl_collective,
  nccl_p2p,
  nccl_group,
  nccl_communicator,
};

// How COMMTAP_YIELD=1 completes a blocking call (see mpi_functions.def).
enum class Yield : std::uint8_t { none, append_request, poll };

enum class Fn : std::uint16_t {
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) name,
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
#define COMMTAP_NCCL(name, family, params, args, count, datatype) nccl##name,
#include "nccl/functions.def"
#undef COMMTAP_NCCL
};

inline constexpr Family kFamily[] = {
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) Family::family,
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
#define COMMTAP_NCCL(name, family, params, args, count, datatype) Family::family,
#include "nccl/functions.def"
#undef COMMTAP_NCCL
};

inline constexpr const char* kFunctionName[] = {
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) "MPI_" #name,
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
#define COMMTAP_NCCL(name, family, params, args, count, datatype) "nccl" #name,
#include "nccl/functions.def"
#undef COMMTAP_NCCL
};

inline constexpr std::size_t kFunctionCount = std::size(kFunctionName);

// The index of NCCL's first function: nccl::Function f is Fn at kNcclFunctionBase + f (the NCCL
// profiler's records carry that: nccl/profiler_events.hpp, Sink::function_base).
inline constexpr std::uint32_t kNcclFunctionBase =
    static_cast<std::uint32_t>(kFunctionCount - nccl::kFunctionCount);

constexpr std::size_t index_of(Fn fn) {
  return static_cast<std::size_t>(fn);
}
constexpr Family family_of(Fn fn) {
  return kFamily[index_of(fn)];
}

// Families whose operations live on after the call and are completed by Wait/Test.
constexpr bool is_persistent(Family family) {
  return family == Family::collective_init || family == Family::p2p_init;
}

const char* family_name(Family family) noexcept;

}  // namespace commtap::interpose
