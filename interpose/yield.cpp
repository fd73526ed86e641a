#include "interpose/yield.hpp"

#include <sched.h>

#include <type_traits>
#include <vector>

namespace commtap::interpose {

// Every loop below calls only PMPI_ functions, so nothing here is intercepted again. They poll
// without consuming anything (MPI_Request_get_status) and then let the library's own blocking
// call complete what is ready, so that statuses, indices and request handles come out exactly
// as without commtap. The Test family would not do: MPICH 4.0.2's MPI_Testall returns
// MPI_ERR_IN_STATUS for completed persistent collectives, and its MPI_Testany leaves the status
// of an all-inactive set untouched where MPI_Waitany empties it.

namespace {

enum class Until { all, any };

// Polls until every (Until::all) or some (Until::any) request would complete at once: done,
// inactive or null; an all-null set counts as ready.
void poll_yielding(int count, MPI_Request requests[], Until until) {
  for (;;) {
    bool all = true, any = false, active = false;
    for (int i = 0; i < count; ++i) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      active = true;
      int done = 0;
      // An error (a truncated receive, say) means the operation is over: the blocking call
      // reports it as the library would.
      if (PMPI_Request_get_status(requests[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
      all = all && done;
      any = any || done;
      if (until == Until::any && any) return;
      if (until == Until::all && !all) break;
    }
    if (!active || (until == Until::all ? all : any)) return;
    sched_yield();
  }
}

}  // namespace

int wait_yielding(MPI_Request* request, MPI_Status* status) {
  poll_yielding(1, request, Until::all);
  return PMPI_Wait(request, status);
}

int yield_wait(MPI_Request* request, MPI_Status* status) {
  return wait_yielding(request, status);
}

int yield_waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  poll_yielding(count, requests, Until::all);
  return PMPI_Waitall(count, requests, statuses);
}

int yield_waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  poll_yielding(count, requests, Until::any);
  return PMPI_Waitany(count, requests, index, status);
}

int yield_waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                   MPI_Status statuses[]) {
  poll_yielding(incount, requests, Until::any);
  return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}

namespace {

template <typename Count>
int recv_yielding(void* buf, Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Status* status) {
  // From MPI_PROC_NULL: the blocking call returns at once, and with the right status (see
  // yield.hpp).
  if (source == MPI_PROC_NULL) {
    if constexpr (std::is_same_v<Count, int>)
      return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
    else
      return PMPI_Recv_c(buf, count, datatype, source, tag, comm, status);
  }
  MPI_Request request = MPI_REQUEST_NULL;
  int rc;
  if constexpr (std::is_same_v<Count, int>)
    rc = PMPI_Irecv(buf, count, datatype, source, tag, comm, &request);
  else
    rc = PMPI_Irecv_c(buf, count, datatype, source, tag, comm, &request);
  return rc != MPI_SUCCESS ? rc : wait_yielding(&request, status);
}

// The receive's status is the call's; the send is completed too, whatever the receive returned,
// so that no request is left behind. The receive's error comes first, as the blocking call
// reports the receive's truncation.
int wait_both_yielding(MPI_Request* receive, MPI_Request* send, MPI_Status* status) {
  const int received = wait_yielding(receive, status);
  const int sent = wait_yielding(send, MPI_STATUS_IGNORE);
  return received != MPI_SUCCESS ? received : sent;
}

template <typename Count>
int sendrecv_yielding(const void* sendbuf, Count sendcount, MPI_Datatype sendtype, int dest,
                      int sendtag, void* recvbuf, Count recvcount, MPI_Datatype recvtype,
                      int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  MPI_Request receive = MPI_REQUEST_NULL, send = MPI_REQUEST_NULL;
  int rc;
  if (source == MPI_PROC_NULL) {
    // The blocking receive returns at once, with the status MPI defines: MPICH 4.0.2's
    // MPI_Irecv from MPI_PROC_NULL completes with source 0 and tag 0
    // (tests/mpich_defects/irecv_proc_null_status.c).
    if constexpr (std::is_same_v<Count, int>)
      rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &send);
    else
      rc = PMPI_Isend_c(sendbuf, sendcount, sendtype, dest, sendtag, comm, &send);
    if (rc != MPI_SUCCESS) return rc;
    const int received =
        recv_yielding<Count>(recvbuf, recvcount, recvtype, source, recvtag, comm, status);
    const int sent = wait_yielding(&send, MPI_STATUS_IGNORE);
    return received != MPI_SUCCESS ? received : sent;
  }
  if constexpr (std::is_same_v<Count, int>)
    rc = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &receive);
  else
    rc = PMPI_Irecv_c(recvbuf, recvcount, recvtype, source, recvtag, comm, &receive);
  if (rc != MPI_SUCCESS) return rc;
  if constexpr (std::is_same_v<Count, int>)
    rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &send);
  else
    rc = PMPI_Isend_c(sendbuf, sendcount, sendtype, dest, sendtag, comm, &send);
  if (rc != MPI_SUCCESS) {
    PMPI_Cancel(&receive);
    PMPI_Wait(&receive, MPI_STATUS_IGNORE);
    return rc;
  }
  return wait_both_yielding(&receive, &send, status);
}

// The message sent is a packed copy of `buf` (MPI_PACKED matches any type signature), so the
// receive can land in `buf` while the send is in flight: what the library does itself.
template <typename Count>
int sendrecv_replace_yielding(void* buf, Count count, MPI_Datatype datatype, int dest, int sendtag,
                              int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  MPI_Count bytes = 0;
  int rc = PMPI_Pack_size_c(count, datatype, comm, &bytes);
  if (rc != MPI_SUCCESS) return rc;
  std::vector<char> packed(static_cast<std::size_t>(bytes) + 1);
  MPI_Count position = 0;
  rc = PMPI_Pack_c(buf, count, datatype, packed.data(), bytes, &position, comm);
  if (rc != MPI_SUCCESS) return rc;
  rc = sendrecv_yielding<MPI_Count>(packed.data(), position, MPI_PACKED, dest, sendtag, buf, count,
                                    datatype, source, recvtag, comm, status);
  // The library's blocking form also sets the status's error field (MPI_Sendrecv does not).
  if (status != MPI_STATUS_IGNORE) status->MPI_ERROR = rc;
  return rc;
}

}  // namespace

int yield_recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
               MPI_Status* status) {
  return recv_yielding<int>(buf, count, datatype, source, tag, comm, status);
}

int yield_recv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                 MPI_Comm comm, MPI_Status* status) {
  return recv_yielding<MPI_Count>(buf, count, datatype, source, tag, comm, status);
}

int yield_sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                   void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                   MPI_Comm comm, MPI_Status* status) {
  return sendrecv_yielding<int>(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                                recvtype, source, recvtag, comm, status);
}

int yield_sendrecv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                     int sendtag, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                     int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  return sendrecv_yielding<MPI_Count>(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf,
                                      recvcount, recvtype, source, recvtag, comm, status);
}

int yield_sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                           int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  return sendrecv_replace_yielding<int>(buf, count, datatype, dest, sendtag, source, recvtag, comm,
                                        status);
}

int yield_sendrecv_replace_c(void* buf, MPI_Count count, MPI_Datatype datatype, int dest,
                             int sendtag, int source, int recvtag, MPI_Comm comm,
                             MPI_Status* status) {
  return sendrecv_replace_yielding<MPI_Count>(buf, count, datatype, dest, sendtag, source, recvtag,
                                              comm, status);
}

}  // namespace commtap::interpose
