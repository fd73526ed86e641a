#include "interpose/yield.hpp"

#include "interpose/runtime.hpp"
#include "monitor/clock.hpp"

#include <sched.h>

#include <algorithm>
#include <array>
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

thread_local ReceiveLooks receive_looks;

// One MPI_Iprobe look of a blocking receive's poll, noted.
void note_look(bool arrived) {
  (arrived ? receive_looks.found_ns : receive_looks.last_miss_ns) = monitor::now_ns();
}

enum class Until { all, any };

// One look at the asynchronous link probes from a polling loop (a leader's; throttled).
void answer_probes() {
  if (probes::AsyncProber* const async = runtime().async_probes) async->while_blocked();
}

}  // namespace

ErrorsReturned::ErrorsReturned(MPI_Comm comm) {
  if (runtime().thread_multiple) return;
  if (PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world_) != MPI_SUCCESS) {
    world_ = MPI_ERRHANDLER_NULL;
    return;
  }
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (comm == MPI_COMM_WORLD || comm == MPI_COMM_NULL) return;
  if (PMPI_Comm_get_errhandler(comm, &comms_) != MPI_SUCCESS) {  // not a communicator
    comms_ = MPI_ERRHANDLER_NULL;
    return;
  }
  PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  comm_ = comm;
}

ErrorsReturned::~ErrorsReturned() {
  if (comms_ != MPI_ERRHANDLER_NULL) {
    PMPI_Comm_set_errhandler(comm_, comms_);
    PMPI_Errhandler_free(&comms_);
  }
  if (world_ != MPI_ERRHANDLER_NULL) {
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world_);
    PMPI_Errhandler_free(&world_);
  }
}

namespace {

// Polls until every (Until::all) or some (Until::any) request would complete at once: done,
// inactive or null; an all-null set counts as ready.
//
// MPI_Request_get_status raises the error of a request that completed in error (a truncated
// receive) on MPI_COMM_WORLD's handler, and the blocking call that follows raises it again. So
// while polling, MPI_COMM_WORLD returns errors (ErrorsReturned); the blocking call then calls the
// application's handler once, as without commtap. Where other threads may call MPI at the same
// time the handler is left alone (they would see the change): a request that completes in error
// then calls a user-defined handler twice.
void poll_yielding(int count, MPI_Request requests[], Until until) {
  const ErrorsReturned quiet(MPI_COMM_WORLD);
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
    answer_probes();
    sched_yield();
  }
}

}  // namespace

namespace {

// The watched receives (RequestTable::watch) a blocking call polls while it waits, in the order
// they were posted: two receives seen done in one round are stamped in that order, MPI's order
// for messages from one sender. The call's own requests are left out (`own`): the call stamps
// those itself, in its own order. A receive seen pending keeps the moment its round began (it
// was not done then either): stamped with it when seen done later in the call, or left in the
// table when the call ends first.
class WatchedReceives {
 public:
  WatchedReceives(const MPI_Request* own, int own_count) {
    std::array<RequestTable::Watched, RequestTable::kMaxWatched> all;
    const int watched = runtime().requests.watched(all.data());
    for (int i = 0; i < watched; ++i)
      if (std::find(own, own + own_count, all[i].request) == own + own_count)
        receives_[count_++] = all[i];
      else
        own_watched_ = true;
  }
  ~WatchedReceives() {
    for (int i = 0; i < count_; ++i)
      if (!seen_[i] && pending_ns_[i] != 0)
        runtime().requests.seen_pending(receives_[i], pending_ns_[i]);
  }
  WatchedReceives(const WatchedReceives&) = delete;
  WatchedReceives& operator=(const WatchedReceives&) = delete;
  bool empty() const { return count_ == 0; }
  // Whether one of the call's own requests is a watched receive.
  bool own_watched() const { return own_watched_; }
  // One round: each receive not yet seen done is tested, and stamped if it is.
  void poll() {
    std::uint64_t round_ns = 0;
    for (int i = 0; i < count_; ++i) {
      if (seen_[i]) continue;
      if (round_ns == 0) round_ns = monitor::now_ns();
      int done = 0;
      if (PMPI_Request_get_status(receives_[i].request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        done = 1;
      if (!done) {
        pending_ns_[i] = round_ns;
        continue;
      }
      seen_[i] = true;
      runtime().requests.stamp(receives_[i], monitor::now_ns(), pending_ns_[i]);
    }
  }

 private:
  std::array<RequestTable::Watched, RequestTable::kMaxWatched> receives_;
  std::array<bool, RequestTable::kMaxWatched> seen_{};
  std::array<std::uint64_t, RequestTable::kMaxWatched> pending_ns_{};
  int count_ = 0;
  bool own_watched_ = false;
};

}  // namespace

void poll_arrivals(int count, MPI_Request requests[], std::uint64_t arrived_ns[],
                   FirstLook first_look[], bool yield_between) {
  const ErrorsReturned quiet(MPI_COMM_WORLD);
  WatchedReceives others(requests, count);
  int pending = 0;
  for (int i = 0; i < count; ++i) {
    arrived_ns[i] = 0;
    pending += requests[i] != MPI_REQUEST_NULL ? 1 : 0;
    first_look[i] = FirstLook::unknown;
  }
  bool first_round = true;
  const auto seen_done = [&](int i) {
    if (requests[i] == MPI_REQUEST_NULL || arrived_ns[i] != 0) return false;
    int done = 0;
    if (PMPI_Request_get_status(requests[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
    return done != 0;
  };
  while (pending > 0) {
    for (int i = 0; i < count; ++i) {
      if (!seen_done(i)) continue;
      arrived_ns[i] = monitor::now_ns();
      --pending;
      // The progress that completed request i may have completed earlier ones already tested
      // this round: those were done by the same moment, not a round later.
      for (int earlier = 0; earlier < i; ++earlier)
        if (seen_done(earlier)) {
          arrived_ns[earlier] = arrived_ns[i];
          --pending;
        }
    }
    others.poll();
    answer_probes();
    if (first_round) {
      for (int i = 0; i < count; ++i)
        first_look[i] = arrived_ns[i] != 0 ? FirstLook::done : FirstLook::pending;
      first_round = false;
    }
    if (pending == 0) break;
    if (yield_between) sched_yield();
  }
}

void forget_receive_looks() {
  receive_looks = {};
}

ReceiveLooks take_receive_looks() {
  const ReceiveLooks looks = receive_looks;
  receive_looks = {};
  return looks;
}

bool watching_arrivals() {
  return !runtime().thread_multiple && runtime().requests.watching();
}

int wait_watching(MPI_Request* request, MPI_Status* status, bool yield_between,
                  FirstLook& own_look) {
  WatchedReceives others(request, 1);
  if (others.own_watched() && *request != MPI_REQUEST_NULL) {
    // The first look at a watched receive: done already, MPI_Test has completed it, as MPI_Wait
    // would have (a nonpersistent receive for a specific source and tag: the same status, error
    // and handler), at no cost over MPI_Wait; pending, MPI_Wait follows.
    int done = 0;
    const int rc = PMPI_Test(request, &done, status);
    if (rc != MPI_SUCCESS || done) {
      own_look = FirstLook::done;
      if (!others.empty()) {
        const ErrorsReturned quiet(MPI_COMM_WORLD);
        others.poll();
      }
      return rc;
    }
    own_look = FirstLook::pending;
  }
  if ((!others.empty() || answering_probes() || yield_between) && *request != MPI_REQUEST_NULL) {
    const ErrorsReturned quiet(MPI_COMM_WORLD);
    for (;;) {
      int done = 0;
      // An error means the operation is over: the blocking call reports it.
      if (PMPI_Request_get_status(*request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
      // Once more after it is done: receives that completed in the same progress step as it
      // are stamped no later than it.
      others.poll();
      if (done) break;
      answer_probes();
      if (yield_between) sched_yield();
    }
  }
  return PMPI_Wait(request, status);
}

int recv_watching(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Status* status, bool yield_between) {
  WatchedReceives others(nullptr, 0);
  if (!others.empty() || answering_probes() || yield_between) {
    const ErrorsReturned quiet(MPI_COMM_WORLD);
    for (;;) {
      int arrived = 0;
      // An erroneous call (a bad rank or tag) fails here as the blocking call would, once, on
      // the communicator's handler (as in recv_yielding).
      const int rc = PMPI_Iprobe(source, tag, comm, &arrived, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) return rc;
      note_look(arrived != 0);
      others.poll();
      if (arrived) break;
      answer_probes();
      if (yield_between) sched_yield();
    }
  }
  return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}

int send_watching(const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                  MPI_Comm comm, bool yield_between) {
  MPI_Request request = MPI_REQUEST_NULL;
  const int rc = PMPI_Isend(buf, count, datatype, dest, tag, comm, &request);
  FirstLook unused = FirstLook::unknown;
  return rc != MPI_SUCCESS ? rc : wait_watching(&request, MPI_STATUS_IGNORE, yield_between, unused);
}

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

// Polls MPI_Iprobe until the message is there, then receives it with the library's blocking
// call: its status, its error and the error handler it calls are exactly the blocking call's
// (the request of an MPI_Irecv would raise a truncation on MPI_COMM_WORLD's handler instead of
// the communicator's, and from MPI_PROC_NULL complete with a wrong status).
template <typename Count>
int recv_yielding(void* buf, Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Status* status) {
  for (;;) {
    int arrived = 0;
    // An erroneous call (a bad rank or tag) fails here as the blocking call would, once.
    const int rc = PMPI_Iprobe(source, tag, comm, &arrived, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return rc;
    note_look(arrived != 0);
    if (arrived) break;
    answer_probes();
    sched_yield();
  }
  if constexpr (std::is_same_v<Count, int>)
    return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
  else
    return PMPI_Recv_c(buf, count, datatype, source, tag, comm, status);
}

// The send goes first, nonblocking, so that two ranks that send-receive with each other both
// have their messages under way while they poll for the other's.
template <typename Count>
int sendrecv_yielding(const void* sendbuf, Count sendcount, MPI_Datatype sendtype, int dest,
                      int sendtag, void* recvbuf, Count recvcount, MPI_Datatype recvtype,
                      int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  MPI_Request send = MPI_REQUEST_NULL;
  int rc;
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

namespace {

// Polls MPI_Iprobe until a message matching (source, tag) is there, yielding the CPU between
// looks under COMMTAP_YIELD (a leader answering the link probes polls without). An erroneous call
// (a bad rank or tag) fails here as the blocking call would, once, on the communicator's handler.
int poll_for_message(int source, int tag, MPI_Comm comm) {
  for (;;) {
    int arrived = 0;
    const int rc = PMPI_Iprobe(source, tag, comm, &arrived, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || arrived) return rc;
    answer_probes();
    if (runtime().yield) sched_yield();
  }
}

}  // namespace

int yield_probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  const int rc = poll_for_message(source, tag, comm);
  return rc != MPI_SUCCESS ? rc : PMPI_Probe(source, tag, comm, status);
}

int yield_mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  const int rc = poll_for_message(source, tag, comm);
  return rc != MPI_SUCCESS ? rc : PMPI_Mprobe(source, tag, comm, message, status);
}

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
