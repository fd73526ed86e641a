// The error handler that stands in for MPI_ERRORS_ARE_FATAL, so that a rank that MPI is about to
// abort writes why first.
//
// A crashed rank (SIGKILL, a segfault) leaves no end in its trace. Where the job then hangs, the
// analyzer names it from the heartbeats; but MPICH over UCX finds the dead peer's endpoint within
// milliseconds, the first rank whose call fails aborts, and the launcher kills every rank before
// any writes another window: all traces stop together and nothing says who went first. So after
// MPI_Init, MPI_COMM_WORLD and MPI_COMM_SELF get this handler where theirs is MPI_ERRORS_ARE_FATAL
// (communicators made from them inherit it). On an error it records the call in progress (its
// function, communicator and peer, from the thread's activity record) and MPI's text in a last
// window (ranks.ended_by 'mpi_error'), then gives the communicator MPI_ERRORS_ARE_FATAL back and
// calls it: MPI prints the same error stack and aborts the job, its first line naming
// MPI_Comm_call_errhandler where natively it names the failed call. Writing the window takes
// milliseconds, so which rank the launcher reports first (and with it the job's exit status:
// the error's code, or 9 for a rank it killed) may differ from a native run, where it is a
// race too.
//
// The application never sees it: MPI_Comm_get_errhandler (and the older MPI_Errhandler_get)
// answer MPI_ERRORS_ARE_FATAL where it is set, and a handler the application sets replaces it.
#pragma once

#include <mpi.h>

namespace commtap::interpose {

// After MPI_Init, where recording runs.
void install_fatal_error_recorder();

// After MPI_Comm_get_errhandler: the stand-in is shown as the handler it stands in for.
void show_as_fatal(MPI_Errhandler* handler);

}  // namespace commtap::interpose
