// What a wrapper tells the recorder about one call, filled from the call info column of
// mpi_functions.def with designated initializers (so fields stay in this order).
#pragma once

#include <mpi.h>

#include <limits>

namespace commtap::interpose {

// CallInfo::peer of a call that has no root or peer.
inline constexpr int kNoPeer = std::numeric_limits<int>::min();

struct CallInfo {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Count count = 0;                        // elements of the principal buffer
  MPI_Datatype datatype = MPI_DATATYPE_NULL;  // their type; bytes = count x type size
  // The principal buffer, where it may be MPI_IN_PLACE: count and type are then not
  // significant (and may be anything), so commtap must not look at them.
  const void* buffer = nullptr;
  // Count and type are not significant at the root of an intercommunicator (MPI_ROOT).
  bool root_ignores = false;
  int peer = kNoPeer;  // root of a rooted collective, or dest/source
  int tag = 0;
  MPI_Request* request = nullptr;  // out-parameter of a nonblocking or persistent call
};

}  // namespace commtap::interpose
