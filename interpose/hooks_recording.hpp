// What the hooks record, shared by all of them: collective instances, aggregates, numbered
// point-to-point messages and their sampling, payload sizes.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "interpose/call_info.hpp"
#include "interpose/call_scope.hpp"
#include "interpose/function_table.hpp"
#include "interpose/runtime.hpp"
#include "monitor/call_counters.hpp"
#include "monitor/sampling.hpp"
#include "monitor/thread_state.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::interpose {

template <std::size_t I, typename... A>
decltype(auto) arg(A&&... a) {
  return std::get<I>(std::forward_as_tuple(std::forward<A>(a)...));
}

constexpr bool is_collective(Family family) {
  return family == Family::collective || family == Family::collective_start ||
         family == Family::collective_init;
}

// `self`: the calling thread's state (CallScope::thread()), whose cached counters the record or
// aggregate goes to: these helpers touch no thread-local themselves.
inline void record_instance(monitor::ThreadState& self, Fn fn, std::int64_t comm_id,
                            std::uint64_t seq, std::uint64_t bytes, std::int32_t root,
                            std::uint32_t site, std::uint64_t enter_ns, std::uint64_t exit_ns,
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
  runtime().counters->record(record, self.counters);
}

inline void aggregate(monitor::ThreadState& self, Fn fn, const world::CommState* comm,
                      std::uint32_t site, std::uint64_t bytes, std::uint64_t ns) {
  runtime().counters->aggregate(
      {comm != nullptr ? comm->id : 0, static_cast<std::uint32_t>(index_of(fn)), site,
       monitor::size_bucket(bytes)},
      ns, self.counters);
}

// ---- Point-to-point transfers -----------------------------------------------------------------

using Direction = MessageCounters::Direction;

// The pair's number for this message (0: not numbered: no peer, or no room to count the pair).
inline std::uint64_t number_message(const world::CommState* comm, int peer_world, int tag,
                                    Direction direction) {
  if (peer_world < 0) return 0;
  return runtime().messages->next(comm->id, peer_world, tag, direction, runtime().thread_multiple);
}

inline void record_transfer(monitor::ThreadState& self, Fn fn, Direction direction,
                            const world::CommState* comm, int peer_world, int tag,
                            std::uint64_t msg, std::uint64_t bytes, std::uint32_t site,
                            std::uint64_t start_ns, std::uint64_t end_ns,
                            std::uint64_t seen_pending_ns = 0) {
  if (msg == 0) return;
  const int own_rank = runtime().world_rank;
  if (!monitor::is_message_sampled(comm->id, direction == Direction::send ? own_rank : peer_world,
                                   direction == Direction::send ? peer_world : own_rank, tag, msg,
                                   runtime().sample))
    return;
  monitor::InstanceRecord record{
      comm->id,
      msg,
      bytes,
      start_ns,
      end_ns,
      static_cast<std::uint32_t>(index_of(fn)),
      peer_world,
      site,
      tag,
      direction == Direction::send ? monitor::RecordKind::send : monitor::RecordKind::recv};
  record.seen_pending_ns = seen_pending_ns;
  runtime().counters->record(record, self.counters);
}

using monitor::kAlgorithmStepTag;

// A message of commtap's all-reduce (`step`) inside a recorded instance of `fn`: every rank
// records the same instances and, in them, all their messages, numbered per pair in posting
// order as the application's are, so both sides' rows join.
inline void record_step(monitor::ThreadState& self, Fn fn, const world::CommState* comm,
                        const collectives::Step& step, std::uint32_t site) {
  const Direction direction = step.send ? Direction::send : Direction::recv;
  const std::uint64_t msg = number_message(comm, step.peer, kAlgorithmStepTag, direction);
  if (msg == 0) return;
  runtime().counters->record(
      {comm->id, msg, step.bytes, step.start_ns, step.end_ns,
       static_cast<std::uint32_t>(index_of(fn)), step.peer, site, kAlgorithmStepTag,
       step.send ? monitor::RecordKind::send : monitor::RecordKind::recv},
      self.counters);
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
// `seen_pending_ns`: the last moment it was seen not yet done (0: not known; monitor/schema.sql).
inline void finish_receive(monitor::ThreadState& self, Fn fn, const world::CommState* comm,
                           std::uint64_t msg, int posted_peer, int posted_tag,
                           const MPI_Status* status, std::uint64_t posted_bytes, std::uint32_t site,
                           std::uint64_t start_ns, std::uint64_t end_ns,
                           std::uint64_t seen_pending_ns = 0) {
  int peer_world = posted_peer, tag = posted_tag;
  if (status != nullptr) {
    if (status->MPI_SOURCE == MPI_PROC_NULL) return;
    peer_world = comm->world_rank_of(status->MPI_SOURCE);
    tag = status->MPI_TAG;
    if (msg == 0) msg = number_message(comm, peer_world, tag, Direction::recv);
  }
  // msg == 0: a wildcard receive in a completion call with too many requests to take statuses.
  if (msg == 0 || !monitor::is_message_sampled(comm->id, peer_world, runtime().world_rank, tag, msg,
                                               runtime().sample))
    return;
  const std::uint64_t bytes = status != nullptr ? received_bytes(*status) : posted_bytes;
  record_transfer(self, fn, Direction::recv, comm, peer_world, tag, msg, bytes, site, start_ns,
                  end_ns, seen_pending_ns);
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

}  // namespace commtap::interpose
