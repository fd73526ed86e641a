#include "interpose/yield.hpp"

#include <sched.h>

namespace commtap::interpose {

// Every loop below calls only PMPI_ functions, so nothing here is intercepted again.

int wait_yielding(MPI_Request* request, MPI_Status* status) {
  for (;;) {
    int done = 0;
    const int rc = PMPI_Test(request, &done, status);
    if (rc != MPI_SUCCESS || done) return rc;
    sched_yield();
  }
}

int yield_wait(MPI_Request* request, MPI_Status* status) {
  return wait_yielding(request, status);
}

int yield_waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  // Poll without consuming anything, then let the library's own MPI_Waitall complete the set, so
  // statuses and request handles come out exactly as without commtap. (MPI_Testall is avoided:
  // MPICH 4.0.2 returns MPI_ERR_IN_STATUS from it for completed persistent collectives.)
  for (int i = 0; i < count; ++i) {
    for (;;) {
      if (requests[i] == MPI_REQUEST_NULL) break;
      int done = 0;
      const int rc = PMPI_Request_get_status(requests[i], &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return rc;
      if (done) break;
      sched_yield();
    }
  }
  return PMPI_Waitall(count, requests, statuses);
}

int yield_waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  for (;;) {
    int done = 0;
    // With no active request MPI_Testany sets done and index = MPI_UNDEFINED, as Waitany would.
    const int rc = PMPI_Testany(count, requests, index, &done, status);
    if (rc != MPI_SUCCESS || done) return rc;
    sched_yield();
  }
}

int yield_waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                   MPI_Status statuses[]) {
  for (;;) {
    // outcount is MPI_UNDEFINED when no request is active, which also ends the wait.
    const int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (rc != MPI_SUCCESS || *outcount != 0) return rc;
    sched_yield();
  }
}

}  // namespace commtap::interpose
