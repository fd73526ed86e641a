// Every exported MPI_* wrapper, generated from mpi_functions.def. Each one hands its real
// function (PMPI_*), its yield twin, its call info and its arguments to intercept().
#include "interpose/call_info.hpp"
#include "interpose/export.hpp"
#include "interpose/intercept.hpp"

#define COMMTAP_UNPAREN(...) __VA_ARGS__
#define COMMTAP_LEADING_COMMA(...) __VA_OPT__(, ) __VA_ARGS__

#define COMMTAP_MPI(name, family, yield, twin, params, args, info)                     \
  extern "C" COMMTAP_EXPORT int MPI_##name params {                                    \
    using namespace ::commtap::interpose;                                              \
    return intercept<Fn::name, Yield::yield>(                                          \
        PMPI_##name, twin, CallInfo{COMMTAP_UNPAREN info} COMMTAP_LEADING_COMMA args); \
  }
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
