// What a wrapper tells the recorder about one call, filled from the call info column of
// mpi_functions.def with designated initializers (so fields stay in this order).
#pragma once

#include <mpi.h>

namespace commtap::interpose {

struct CallInfo {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Count count = 0;                        // elements of the principal buffer
  MPI_Datatype datatype = MPI_DATATYPE_NULL;  // their type; bytes = count x type size
  int peer = MPI_PROC_NULL;                   // root of a rooted collective, or dest/source
  int tag = 0;
  MPI_Request* request = nullptr;  // out-parameter of a nonblocking or persistent call
};

}  // namespace commtap::interpose
