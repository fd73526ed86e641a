// COMMTAP_YIELD: completing blocking calls by polling with sched_yield between tests.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "interpose/requests.hpp"
#include "interpose/runtime.hpp"

namespace commtap::interpose {

int wait_yielding(MPI_Request* request, MPI_Status* status);

// While it lives, `comm` and MPI_COMM_WORLD (where an invalid communicator's error goes) return
// errors, and their handlers are back after. Yield mode uses it twice: while polling requests
// (MPI_Request_get_status would raise a failed request's error, and the blocking call that
// follows raises it again), and while it calls a blocking call's nonblocking twin, so that an
// argument error the twin finds is not raised in the twin's name (MPICH's error stack would read
// MPI_Isend where the program called MPI_Send): the caller then makes the blocking call, which
// raises it through the program's handler as natively. Not under MPI_THREAD_MULTIPLE, where
// other threads would see the handlers change.
class ErrorsReturned {
 public:
  explicit ErrorsReturned(MPI_Comm comm);
  ~ErrorsReturned();
  ErrorsReturned(const ErrorsReturned&) = delete;
  ErrorsReturned& operator=(const ErrorsReturned&) = delete;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Errhandler world_ = MPI_ERRHANDLER_NULL, comms_ = MPI_ERRHANDLER_NULL;
};

// Before an MPI_Waitall: polls the requests without consuming them (MPI_Request_get_status)
// until every one is done, inactive or null, and stamps arrived_ns[i] with the clock
// (monitor::now_ns) when request i was first seen done (0 for a null one; an earlier request
// found done right after a later one's test, which may have completed both, gets its stamp), and
// first_look[i] with what the first round saw of it; sched_yield between rounds where
// `yield_between`. The blocking call that follows completes them all at once, with the library's
// own statuses and errors.
void poll_arrivals(int count, MPI_Request requests[], std::uint64_t arrived_ns[],
                   FirstLook first_look[], bool yield_between);

// Arrivals stamped while the rank blocks elsewhere: where recorded receives are outstanding
// (RequestTable::watch) and the program does not call MPI from several threads at once, MPI_Wait,
// MPI_Recv and MPI_Send poll them (MPI_Request_get_status, which neither completes nor frees a
// request) while they wait, stamping each when seen done; poll_arrivals does the same for
// MPI_Waitall. The blocking call itself is the library's: MPI_Wait after its request is seen
// done, MPI_Recv after MPI_Iprobe sees its message, MPI_Send as MPI_Isend and the MPI_Wait
// above (what the standard defines it as). sched_yield between rounds where `yield_between`
// (COMMTAP_YIELD), which polls whether or not other receives are watched.
// Each poll that finds a watched receive not yet done keeps that moment, the lower end of the
// window its message arrived in (RequestTable::seen_pending). MPI_Wait on a watched receive
// itself first looks with MPI_Test (which completes it as MPI_Wait would, where it is done) and
// says in `own_look` what that look saw.
bool watching_arrivals();
// Whether this rank answers the asynchronous link probes (probes/async_probes.hpp), a host's
// leader: its blocking point-to-point calls then poll (as above, or as COMMTAP_YIELD's loops do),
// answering every kBlockedNs while they wait.
inline bool answering_probes() {
  return runtime().async_probes != nullptr;
}
int wait_watching(MPI_Request* request, MPI_Status* status, bool yield_between,
                  FirstLook& own_look);
// The looks of this thread's blocking receive where it polled for its message with MPI_Iprobe
// (recv_watching, and the yield loops of MPI_Recv and MPI_Sendrecv): the last that found it not
// there and the one that found it (0: none). A gap of kLookGapNs or more between them (the rank
// was off the CPU between its looks) leaves the message's arrival anywhere in it: the receive's
// hook records the last miss as its seen_pending_ns, as the watched receives do, and the
// analyzer bounds its transit from there (transfers.seen_pending_ns; docs/analyzer.md).
struct ReceiveLooks {
  std::uint64_t last_miss_ns = 0, found_ns = 0;
};
inline constexpr std::uint64_t kLookGapNs = 50'000;  // the analyzer's bar for censoring
// The hooks of blocking receives: cleared before the call, taken (and cleared) after it.
void forget_receive_looks();
ReceiveLooks take_receive_looks();
int recv_watching(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Status* status, bool yield_between);
int send_watching(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, bool yield_between);

// Same parameters as the Wait family; used as their "poll" twins in mpi_functions.def.
int yield_wait(MPI_Request* request, MPI_Status* status);
int yield_waitall(int count, MPI_Request requests[], MPI_Status statuses[]);
int yield_waitany(int count, MPI_Request requests[], int* index, MPI_Status* status);
int yield_waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                   MPI_Status statuses[]);

// Same parameters as MPI_Recv(_c): MPI_Iprobe polled, then the blocking call (yield.cpp says
// why not MPI_Irecv).
int yield_recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
               MPI_Status* status);
int yield_recv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                 MPI_Comm comm, MPI_Status* status);

// Same parameters as MPI_Probe and MPI_Mprobe: MPI_Iprobe polled until the message is there, then
// the blocking call, which returns at once with its status (and, for MPI_Mprobe, the matched
// message: an MPI_Improbe loop would match it before the blocking call could).
int yield_probe(int source, int tag, MPI_Comm comm, MPI_Status* status);
int yield_mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status);

// Same parameters as MPI_Sendrecv(_replace)(_c): the send posted as MPI_Isend (the replace
// forms send a packed copy), the receive as in yield_recv. Not MPI_Isendrecv: MPICH 4.0.2 returns
// broken statuses from it and crashes on derived datatypes (tests/mpich_defects/).
int yield_sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                   void* recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                   MPI_Comm comm, MPI_Status* status);
int yield_sendrecv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                     int sendtag, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                     int source, int recvtag, MPI_Comm comm, MPI_Status* status);
int yield_sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag,
                           int source, int recvtag, MPI_Comm comm, MPI_Status* status);
int yield_sendrecv_replace_c(void* buf, MPI_Count count, MPI_Datatype datatype, int dest,
                             int sendtag, int source, int recvtag, MPI_Comm comm,
                             MPI_Status* status);

}  // namespace commtap::interpose
