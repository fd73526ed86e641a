// COMMTAP_YIELD: completing blocking calls by polling with sched_yield between tests.
#pragma once

#include <mpi.h>

namespace commtap::interpose {

int wait_yielding(MPI_Request* request, MPI_Status* status);

// Same parameters as the Wait family; used as their "poll" twins in mpi_functions.def.
int yield_wait(MPI_Request* request, MPI_Status* status);
int yield_waitall(int count, MPI_Request requests[], MPI_Status statuses[]);
int yield_waitany(int count, MPI_Request requests[], int* index, MPI_Status* status);
int yield_waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                   MPI_Status statuses[]);

}  // namespace commtap::interpose
