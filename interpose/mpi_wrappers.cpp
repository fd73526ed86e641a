// Every MPI wrapper, generated from mpi_functions.def. Each one hands its real function
// (PMPI_*), its yield twin, its call info and its arguments to intercept(). The library's
// functions are reached by direct calls inside lambdas, never by their addresses: libcommtap.so
// links no MPI, and a direct call binds lazily at its first use, where an address would have to
// be resolved when the library loads (and fail in a process without MPI).
//
// On x86-64 the wrappers are hidden (commtap_mpi_wrapper_<name>) and the exported MPI_<name>
// jumps to them once the process's MPI is known to have MPICH's ABI (mpi_entry.cpp); elsewhere
// they are the exported symbols.
#include <type_traits>

#include "interpose/call_info.hpp"
#include "interpose/export.hpp"
#include "interpose/intercept.hpp"

#define COMMTAP_UNPAREN(...) __VA_ARGS__
#define COMMTAP_LEADING_COMMA(...) __VA_OPT__(, ) __VA_ARGS__

// The library's function, or the yield twin (nullptr in the table where there is none).
#define COMMTAP_CALL_OF(function)                                           \
  [](auto... x) -> int {                                                    \
    if constexpr (std::is_null_pointer_v<decltype(function)>)               \
      return MPI_ERR_INTERN; /* never called: the call has no yield form */ \
    else                                                                    \
      return function(x...);                                                \
  }

#if COMMTAP_MPI_ENTRY_STUBS
#define COMMTAP_WRAPPER_NAME(name) commtap_mpi_wrapper_##name
#define COMMTAP_WRAPPER_VISIBILITY [[gnu::visibility("hidden")]]
#else
#define COMMTAP_WRAPPER_NAME(name) MPI_##name
#define COMMTAP_WRAPPER_VISIBILITY COMMTAP_EXPORT
#endif

#define COMMTAP_MPI(name, family, yield, twin, params, args, info)              \
  extern "C" COMMTAP_WRAPPER_VISIBILITY int COMMTAP_WRAPPER_NAME(name) params { \
    using namespace ::commtap::interpose;                                       \
    return intercept<Fn::name, Yield::yield>(                                   \
        COMMTAP_CALL_OF(PMPI_##name), COMMTAP_CALL_OF(twin),                    \
        CallInfo{COMMTAP_UNPAREN info} COMMTAP_LEADING_COMMA args);             \
  }
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
