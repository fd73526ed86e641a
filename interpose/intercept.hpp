// The body every generated MPI wrapper shares. Pass-through costs one acquire load (a plain load
// on x86) and one TLS read; recording adds two clock reads and a few thread-local adds (and, for
// calls that make or complete requests, one request-table operation).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "interpose/call_info.hpp"
#include "interpose/call_scope.hpp"
#include "interpose/function_table.hpp"
#include "interpose/runtime.hpp"
#include "interpose/yield.hpp"
#include "monitor/monitor.hpp"

namespace commtap::interpose {

template <std::size_t I, typename... A>
decltype(auto) arg(A&&... a) {
  return std::get<I>(std::forward_as_tuple(std::forward<A>(a)...));
}

// ---- COMMTAP_YIELD --------------------------------------------------------------------------

template <Yield yield, typename Twin, typename... A>
int call_yielding(Twin twin, A... a) {
  if constexpr (yield == Yield::append_request) {
    MPI_Request request = MPI_REQUEST_NULL;
    const int rc = twin(a..., &request);
    return rc != MPI_SUCCESS ? rc : wait_yielding(&request, MPI_STATUS_IGNORE);
  } else {
    static_assert(yield == Yield::poll);
    return twin(a...);
  }
}

// ---- Requests made, started, completed and freed --------------------------------------------

inline void record_instance(Fn fn, std::int64_t comm_id, std::uint64_t seq, std::uint64_t bytes,
                            std::int32_t root, std::uint32_t site, std::uint64_t enter_ns,
                            std::uint64_t exit_ns,
                            collectives::Algorithm algorithm = collectives::Algorithm::native) {
  // The clock may step back a few nanoseconds once, when it switches to the counter.
  monitor::InstanceRecord record{comm_id,
                                 seq,
                                 bytes,
                                 enter_ns,
                                 std::max(enter_ns, exit_ns),
                                 static_cast<std::uint32_t>(index_of(fn)),
                                 root,
                                 site};
  record.algorithm = static_cast<std::uint8_t>(algorithm);
  runtime().counters->record(record);
}

inline void aggregate(Fn fn, const CommState* comm, std::uint32_t site, std::uint64_t bytes,
                      std::uint64_t ns) {
  runtime().counters->aggregate(
      {comm != nullptr ? comm->id : 0, static_cast<std::uint32_t>(index_of(fn)), site,
       monitor::size_bucket(bytes)},
      ns);
}

// ---- Point-to-point transfers -----------------------------------------------------------------

using Direction = MessageCounters::Direction;

// The pair's number for this message (0: not numbered: no peer, or no room to count the pair).
inline std::uint64_t number_message(const CommState* comm, int peer_world, int tag,
                                    Direction direction) {
  if (peer_world < 0) return 0;
  return runtime().messages->next(comm->id, peer_world, tag, direction, runtime().thread_multiple);
}

// Whether both sides record this message: a hash of its whole name rather than the number
// alone, so that programs that give every message a tag of its own (the step number, say) are
// sampled too.
inline bool is_message_sampled(std::int64_t comm_id, int sender, int receiver, int tag,
                               std::uint64_t msg, std::uint64_t sample) {
  if (sample <= 1) return true;
  std::uint64_t x = static_cast<std::uint64_t>(comm_id) ^ msg * 0x9E3779B97F4A7C15ull;
  x ^= (static_cast<std::uint64_t>(static_cast<std::uint32_t>(sender)) << 32 |
        static_cast<std::uint32_t>(receiver)) *
       0xBF58476D1CE4E5B9ull;
  x ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(tag)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return is_multiple_of(x, sample);
}

inline void record_transfer(Fn fn, Direction direction, const CommState* comm, int peer_world,
                            int tag, std::uint64_t msg, std::uint64_t bytes, std::uint32_t site,
                            std::uint64_t start_ns, std::uint64_t end_ns) {
  if (msg == 0) return;
  const int self = runtime().world_rank;
  if (!is_message_sampled(comm->id, direction == Direction::send ? self : peer_world,
                          direction == Direction::send ? peer_world : self, tag, msg,
                          runtime().sample))
    return;
  runtime().counters->record(
      {comm->id, msg, bytes, start_ns, end_ns, static_cast<std::uint32_t>(index_of(fn)), peer_world,
       site, tag,
       direction == Direction::send ? monitor::RecordKind::send : monitor::RecordKind::recv});
}

// The tag of commtap's own all-reduce messages in the transfers table: negative, so that it never
// collides with an application's (MPI tags are >= 0).
constexpr int kAlgorithmStepTag = -1;

// A message of commtap's all-reduce (`step`) inside a recorded instance of `fn`: every rank
// records the same instances and, in them, all their messages, numbered per pair in posting
// order as the application's are, so both sides' rows join.
inline void record_step(Fn fn, const CommState* comm, const collectives::Step& step,
                        std::uint32_t site) {
  const Direction direction = step.send ? Direction::send : Direction::recv;
  const std::uint64_t msg = number_message(comm, step.peer, kAlgorithmStepTag, direction);
  if (msg == 0) return;
  runtime().counters->record({comm->id, msg, step.bytes, step.start_ns, step.end_ns,
                              static_cast<std::uint32_t>(index_of(fn)), step.peer, site,
                              kAlgorithmStepTag,
                              step.send ? monitor::RecordKind::send : monitor::RecordKind::recv});
}

// Bytes a completed receive delivered (its status knows; the posted count is an upper bound).
inline std::uint64_t received_bytes(const MPI_Status& status) {
  MPI_Count bytes = 0;
  if (PMPI_Get_count_c(&status, MPI_BYTE, &bytes) != MPI_SUCCESS || bytes < 0) return 0;
  return static_cast<std::uint64_t>(bytes);
}

// A receive's side of a transfer, once its status is known. A receive posted for a specific
// source and tag was numbered when posted (`msg`), since MPI matches such receives in the order
// they are posted; a wildcard one is numbered now, from the source and tag that matched.
inline void finish_receive(Fn fn, const CommState* comm, std::uint64_t msg, int posted_peer,
                           int posted_tag, const MPI_Status* status, std::uint64_t posted_bytes,
                           std::uint32_t site, std::uint64_t start_ns, std::uint64_t end_ns) {
  int peer_world = posted_peer, tag = posted_tag;
  if (status != nullptr) {
    if (status->MPI_SOURCE == MPI_PROC_NULL) return;
    peer_world = comm->world_rank_of(status->MPI_SOURCE);
    tag = status->MPI_TAG;
    if (msg == 0) msg = number_message(comm, peer_world, tag, Direction::recv);
  }
  // msg == 0: a wildcard receive in a completion call with too many requests to take statuses.
  if (msg == 0 ||
      !is_message_sampled(comm->id, peer_world, runtime().world_rank, tag, msg, runtime().sample))
    return;
  const std::uint64_t bytes = status != nullptr ? received_bytes(*status) : posted_bytes;
  record_transfer(fn, Direction::recv, comm, peer_world, tag, msg, bytes, site, start_ns, end_ns);
}

template <Fn id>
constexpr bool is_send_start() {
  return family_of(id) == Family::p2p_start &&
         (id == Fn::Isend || id == Fn::Isend_c || id == Fn::Issend || id == Fn::Issend_c ||
          id == Fn::Ibsend || id == Fn::Ibsend_c || id == Fn::Irsend || id == Fn::Irsend_c);
}
template <Fn id>
constexpr bool is_recv_start() {
  return id == Fn::Irecv || id == Fn::Irecv_c;
}
// Blocking receives that name a communicator and end with a status (MPI_Mrecv names none).
template <Fn id>
constexpr bool is_blocking_receive() {
  return id == Fn::Recv || id == Fn::Recv_c || family_of(id) == Family::sendrecv;
}

constexpr bool is_collective(Family family) {
  return family == Family::collective || family == Family::collective_start ||
         family == Family::collective_init;
}

// Before a completion, Start or Request_free call: copy the handles it will consume.
template <Fn id, typename... A>
void snapshot_requests(RequestSnapshot& snapshot, A... a) {
  const std::uint64_t epoch = runtime().requests.epoch();
  if constexpr (id == Fn::Wait || id == Fn::Test || id == Fn::Request_free) {
    snapshot.take(arg<0>(a...), 1, epoch);
  } else if constexpr (family_of(id) == Family::completion) {
    snapshot.take(arg<1>(a...), arg<0>(a...), epoch);  // (count, requests[], ...)
  }
}

// After it: attribute each operation the call completed to the function that started it.
template <Fn id, typename... A>
void settle_requests(int rc, const RequestSnapshot& snapshot, std::uint64_t now,
                     monitor::CallStats* stats, A... a) {
  if (rc != MPI_SUCCESS) return;
  // `status`: the completed operation's status, or nullptr if the application ignored it.
  auto complete = [&](MPI_Request request, const MPI_Status* status) {
    if (auto done = runtime().requests.complete(request, snapshot.epoch())) {
      monitor::CallStats& origin = stats[index_of(done->fn)];
      monitor::bump(origin.completions, 1);
      monitor::bump(origin.completion_ns, monitor::elapsed_ns(done->started_ns, now));
      const Instance& instance = done->instance;
      if (instance.comm == nullptr) return;
      aggregate(done->fn, instance.comm, instance.site, instance.bytes,
                monitor::elapsed_ns(done->started_ns, now));
      switch (instance.kind) {
        case monitor::RecordKind::collective:
          instance.comm->completed_seq(instance.seq, false);
          if (instance.sampled)
            record_instance(done->fn, instance.comm->id, instance.seq, instance.bytes,
                            instance.root, instance.site, done->started_ns, now);
          break;
        case monitor::RecordKind::send:
          record_transfer(done->fn, Direction::send, instance.comm, instance.root, instance.tag,
                          instance.seq, instance.bytes, instance.site, done->started_ns, now);
          break;
        case monitor::RecordKind::recv:
          finish_receive(done->fn, instance.comm, instance.seq, instance.root, instance.tag, status,
                         instance.bytes, instance.site, done->started_ns, now);
          break;
      }
    }
  };
  auto status_at = [](MPI_Status* statuses, int i) -> const MPI_Status* {
    return statuses == MPI_STATUSES_IGNORE || statuses == MPI_STATUS_IGNORE ? nullptr
                                                                            : &statuses[i];
  };
  if constexpr (id == Fn::Wait) {
    complete(snapshot[0], status_at(arg<1>(a...), 0));
  } else if constexpr (id == Fn::Test) {
    if (*arg<1>(a...)) complete(snapshot[0], status_at(arg<2>(a...), 0));
  } else if constexpr (id == Fn::Waitall) {
    for (int i = 0; i < snapshot.size(); ++i) complete(snapshot[i], status_at(arg<2>(a...), i));
  } else if constexpr (id == Fn::Testall) {
    if (*arg<2>(a...))
      for (int i = 0; i < snapshot.size(); ++i) complete(snapshot[i], status_at(arg<3>(a...), i));
  } else if constexpr (id == Fn::Waitany) {
    if (*arg<2>(a...) != MPI_UNDEFINED)
      complete(snapshot[*arg<2>(a...)], status_at(arg<3>(a...), 0));
  } else if constexpr (id == Fn::Testany) {
    if (*arg<3>(a...) && *arg<2>(a...) != MPI_UNDEFINED)
      complete(snapshot[*arg<2>(a...)], status_at(arg<4>(a...), 0));
  } else if constexpr (id == Fn::Waitsome || id == Fn::Testsome) {
    const int completed = *arg<2>(a...);
    const int* indices = arg<3>(a...);
    for (int i = 0; completed != MPI_UNDEFINED && i < completed; ++i)
      complete(snapshot[indices[i]], status_at(arg<4>(a...), i));
  } else if constexpr (id == Fn::Request_free) {
    runtime().requests.forget(snapshot[0], snapshot.epoch());
  }
}

// Where a completion call takes its status or statuses.
template <Fn id>
constexpr std::size_t status_argument() {
  if constexpr (id == Fn::Wait) return 1;
  if constexpr (id == Fn::Test || id == Fn::Waitall) return 2;
  if constexpr (id == Fn::Testall || id == Fn::Waitany) return 3;
  return 4;  // Testany, Waitsome, Testsome
}
// Completion calls with more requests than this keep ignoring statuses (their wildcard receives
// cannot be numbered).
inline constexpr std::size_t kOwnStatuses = 64;

template <Fn id, typename... A>
void start_requests(std::uint64_t now, A... a) {
  if constexpr (id == Fn::Start) {
    runtime().requests.started(*arg<0>(a...), now, runtime().sample);
  } else if constexpr (id == Fn::Startall) {
    const int count = arg<0>(a...);
    const MPI_Request* requests = arg<1>(a...);
    for (int i = 0; i < count; ++i) runtime().requests.started(requests[i], now, runtime().sample);
  }
}

// Bytes of the principal buffer of a call that succeeded. commtap asks the library about the
// datatype only where the call's arguments make it significant: an ignored argument may hold
// anything, and a query on it could raise an error the application never would have.
inline std::uint64_t payload_bytes(const CallInfo& info, Family family) {
  if (info.count <= 0 || info.datatype == MPI_DATATYPE_NULL) return 0;
  if (is_collective(family)) {
    if (info.buffer == MPI_IN_PLACE) return 0;
    // A rooted collective on an intercommunicator: nothing is significant at MPI_PROC_NULL.
    if (info.peer == MPI_PROC_NULL || (info.peer == MPI_ROOT && info.root_ignores)) return 0;
  }
  MPI_Count size = 0;
  if (PMPI_Type_size_c(info.datatype, &size) != MPI_SUCCESS || size <= 0) return 0;
  return static_cast<std::uint64_t>(info.count) * static_cast<std::uint64_t>(size);
}

// ---- Packing --------------------------------------------------------------------------------

// MPI_Pack/Unpack (and _c): the datatypes module packs what it has a plan for (see
// datatypes::try_pack), the library everything else.
template <Fn id, typename Real, typename... A>
int pack_call(Real real, A... a) {
  if (!runtime().settings.datatypes) return real(a...);
  constexpr bool packing = id == Fn::Pack || id == Fn::Pack_c;
  static_assert(packing || id == Fn::Unpack || id == Fn::Unpack_c);
  // Pack (in, count, type, out, size, position, comm); Unpack (in, size, position, out, count,
  // type, comm): the same roles in another order.
  const auto [in, count, datatype, out, size, position, comm] = [&] {
    const auto [a0, a1, a2, a3, a4, a5, a6] = std::tuple(a...);
    if constexpr (packing)
      return std::tuple(a0, a1, a2, a3, a4, a5, a6);
    else
      return std::tuple(a0, a4, a5, a3, a1, a2, a6);
  }();
  const auto taken =
      datatypes::try_pack(runtime().plans, packing, in, count, datatype, out, size, position, comm);
  return taken ? *taken : real(a...);
}

// ---- Communicators -----------------------------------------------------------------------------

// The communicator a creation call made: its last argument, but for MPI_Comm_idup the second.
template <Fn id, typename... A>
MPI_Comm created_communicator(A... a) {
  if constexpr (id == Fn::Comm_idup)
    return *arg<1>(a...);
  else
    return *arg<sizeof...(A) - 1>(a...);
}

// ---- Lifecycle --------------------------------------------------------------------------------

template <Fn id, typename Real, typename... A>
int lifecycle_call(Real real, A... a) {
  if constexpr (id == Fn::Init || id == Fn::Init_thread) {
    const std::uint64_t began = monitor::now_ns();
    const int rc = real(a...);
    if (rc == MPI_SUCCESS) start_after_mpi_init(began, id);
    return rc;
  } else if constexpr (id == Fn::Finalize) {
    stop_before_mpi_finalize(id, "finalize");
    return real(a...);
  } else {
    static_assert(id == Fn::Abort);
    stop_before_mpi_finalize(id, "abort");
    return real(a...);
  }
}

// ---- The wrapper body -------------------------------------------------------------------------

template <Fn id, Yield yield, typename Real, typename Twin, typename... A>
[[gnu::always_inline]] inline int intercept(Real real, Twin twin, const CallInfo& info, A... a) {
  constexpr Family family = family_of(id);
  if constexpr (family == Family::lifecycle) {
    return lifecycle_call<id>(real, a...);
  } else {
    if (!CallScope::recording()) [[unlikely]]
      return real(a...);
    CallScope scope(id);

    constexpr bool consumes_requests = family == Family::completion || id == Fn::Request_free;
    struct NoSnapshot {};
    [[maybe_unused]] std::conditional_t<consumes_requests, RequestSnapshot, NoSnapshot> snapshot;
    [[maybe_unused]] MPI_Comm freed_communicator = MPI_COMM_NULL;
    if constexpr (id == Fn::Comm_free) freed_communicator = *arg<0>(a...);
    if constexpr (consumes_requests) {
      if (!runtime().requests.empty()) snapshot_requests<id>(snapshot, a...);
    }
    // Completions of tracked requests need their statuses (a receive's source, tag and size): if
    // the application ignores them, commtap passes its own array.
    [[maybe_unused]] std::array<MPI_Status, kOwnStatuses> own_statuses;
    if constexpr (consumes_requests && id != Fn::Request_free) {
      MPI_Status*& statuses = std::get<status_argument<id>()>(std::tie(a...));
      if (snapshot.size() > 0 && snapshot.size() <= static_cast<int>(kOwnStatuses) &&
          (statuses == MPI_STATUSES_IGNORE || statuses == MPI_STATUS_IGNORE))
        statuses = own_statuses.data();
    }

    // Collectives get the next sequence number of their communicator at the call (persistent
    // ones at each MPI_Start instead). A communicator commtap has not met yet is identified
    // after the call succeeded, never on a handle the library may reject.
    [[maybe_unused]] CommState* comm_state = nullptr;
    [[maybe_unused]] std::uint64_t seq = 0;
    if constexpr (is_collective(family)) {
      comm_state = runtime().communicators.known(info.comm);
      if constexpr (family != Family::collective_init)
        if (comm_state != nullptr) seq = comm_state->next_seq();
    }

    scope.enter(static_cast<std::int64_t>(info.comm), seq);
    const std::uint64_t t0 = scope.t0();
    int rc;
    // A blocking receive's status names the source and tag a wildcard receive matched: if the
    // application ignores it, commtap passes its own.
    [[maybe_unused]] MPI_Status own_status;
    [[maybe_unused]] MPI_Status* status = nullptr;
    if constexpr (is_blocking_receive<id>()) {
      MPI_Status*& last = std::get<sizeof...(A) - 1>(std::tie(a...));
      if (last == MPI_STATUS_IGNORE) last = &own_status;
      status = last;
    }
    [[maybe_unused]] MPI_Datatype freed_datatype = MPI_DATATYPE_NULL;
    if constexpr (id == Fn::Type_free) freed_datatype = *arg<0>(a...);
    [[maybe_unused]] collectives::Algorithm algorithm = collectives::Algorithm::native;
    [[maybe_unused]] std::vector<collectives::Step> steps;  // of a recorded commtap all-reduce
    if constexpr (id == Fn::Allreduce || id == Fn::Allreduce_c) {
      auto library = [&] {
        return runtime().yield ? call_yielding<yield>(twin, a...) : real(a...);
      };
      const auto [sendbuf, recvbuf, count, type, op, comm] = std::tuple(a...);
      const std::optional<int> taken =
          runtime().collectives.allreduce == collectives::Algorithm::native
              ? std::nullopt
              : collectives::try_allreduce(runtime().collectives, sendbuf, recvbuf, count, type, op,
                                           comm, algorithm,
                                           is_sampled(seq, runtime().sample) ? &steps : nullptr);
      rc = taken ? *taken : library();
    } else if constexpr (yield != Yield::none) {
      rc = runtime().yield ? call_yielding<yield>(twin, a...) : real(a...);
    } else if constexpr (id == Fn::Pack || id == Fn::Pack_c || id == Fn::Unpack ||
                         id == Fn::Unpack_c) {
      rc = pack_call<id>(real, a...);
    } else {
      rc = real(a...);
    }
    if constexpr (id == Fn::Type_commit) {
      if (rc == MPI_SUCCESS && runtime().settings.datatypes)
        runtime().plans.committed(*arg<0>(a...));
    } else if constexpr (id == Fn::Type_free) {
      if (rc == MPI_SUCCESS) runtime().plans.freed(freed_datatype);
    }
    scope.leave();
    const std::uint64_t t1 = scope.t1();
    if constexpr (is_collective(family)) {
      if (comm_state == nullptr && rc == MPI_SUCCESS) {
        comm_state = runtime().communicators.state_of(info.comm);
        if constexpr (family != Family::collective_init) seq = comm_state->next_seq();
      }
    }

    const std::uint64_t bytes =
        rc == MPI_SUCCESS && info.count > 0 ? payload_bytes(info, family) : 0;
    scope.count(bytes);
    [[maybe_unused]] const std::int32_t root = info.peer >= 0 ? info.peer : -1;
    // Blocking calls: aggregated by call site (the wrapper is always inlined into the exported
    // MPI_ function, so this is the application's return address); sampled collectives and
    // messages are recorded one by one.
    constexpr bool blocking_p2p =
        family == Family::send || family == Family::recv || family == Family::sendrecv;
    if constexpr (family == Family::collective || blocking_p2p) {
      if (rc == MPI_SUCCESS && (family == Family::collective || info.comm != MPI_COMM_NULL)) {
        const std::uint32_t site = runtime().call_sites.site_of(__builtin_return_address(0));
        if constexpr (blocking_p2p) comm_state = runtime().communicators.state_of(info.comm);
        aggregate(id, comm_state, site, bytes, monitor::elapsed_ns(t0, t1));
        if constexpr (family == Family::collective) {
          comm_state->completed_seq(seq, !runtime().thread_multiple);
          if (is_sampled(seq, runtime().sample))
            record_instance(id, comm_state->id, seq, bytes, root, site, t0, t1, algorithm);
          if constexpr (id == Fn::Allreduce || id == Fn::Allreduce_c)
            for (const collectives::Step& step : steps) record_step(id, comm_state, step, site);
          if (comm_state->id == 1) after_world_collective(seq);
        }
        if constexpr (family == Family::send || family == Family::sendrecv) {
          const int peer = comm_state->world_rank_of(info.peer);
          record_transfer(id, Direction::send, comm_state, peer, info.tag,
                          number_message(comm_state, peer, info.tag, Direction::send), bytes, site,
                          t0, t1);
        }
        if constexpr (is_blocking_receive<id>()) {
          std::uint64_t msg = 0;  // specific or wildcard, the status says what matched
          finish_receive(id, comm_state, msg, -1, 0, status, bytes, site, t0, t1);
        }
      }
    }
    if constexpr (consumes_requests) {
      if (snapshot.size() > 0) settle_requests<id>(rc, snapshot, t1, scope.stats(), a...);
    } else if constexpr (family == Family::start) {
      if (rc == MPI_SUCCESS) start_requests<id>(t0, a...);
    } else if constexpr (id == Fn::Comm_free) {
      if (rc == MPI_SUCCESS) runtime().communicators.freed(freed_communicator);
    } else if constexpr (family == Family::communicator) {
      // Collective over the parent: every rank that made the call takes part, even if it got
      // MPI_COMM_NULL. Not timed: it is commtap's work, not the application's.
      if (rc == MPI_SUCCESS)
        runtime().communicators.created(id, arg<0>(a...), created_communicator<id>(a...));
      if (info.request != nullptr && rc == MPI_SUCCESS)
        runtime().requests.track(*info.request, id, t0, false);
    } else if constexpr (is_collective(family)) {
      if (info.request != nullptr && rc == MPI_SUCCESS) {
        // Persistent operations take their sequence numbers (and sampling) at each MPI_Start.
        const bool sampled = seq != 0 && is_sampled(seq, runtime().sample);
        const std::uint32_t site = runtime().call_sites.site_of(__builtin_return_address(0));
        runtime().requests.track(*info.request, id, t0, is_persistent(family),
                                 Instance{comm_state, seq, bytes, root, sampled, site});
      }
    } else if constexpr (is_send_start<id>() || is_recv_start<id>()) {
      if (info.request != nullptr && rc == MPI_SUCCESS) {
        // Sends are numbered when posted (MPI orders a pair's messages by their sends), and so
        // are receives for a specific source and tag (matched in the order they are posted).
        CommState* comm = runtime().communicators.state_of(info.comm);
        const int peer = info.peer >= 0 ? comm->world_rank_of(info.peer) : -1;
        const bool wildcard = info.peer == MPI_ANY_SOURCE || info.tag == MPI_ANY_TAG;
        const Direction direction = is_send_start<id>() ? Direction::send : Direction::recv;
        const std::uint64_t msg = wildcard || info.peer == MPI_PROC_NULL
                                      ? 0
                                      : number_message(comm, peer, info.tag, direction);
        Instance instance{
            comm,     msg,
            bytes,    peer,
            false,    runtime().call_sites.site_of(__builtin_return_address(0)),
            info.tag, is_send_start<id>() ? monitor::RecordKind::send : monitor::RecordKind::recv};
        runtime().requests.track(*info.request, id, t0, false, instance);
      }
    } else {
      if (info.request != nullptr && rc == MPI_SUCCESS)
        runtime().requests.track(*info.request, id, t0, is_persistent(family));
    }
    return rc;
  }
}

}  // namespace commtap::interpose
