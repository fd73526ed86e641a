// Hooks of the point-to-point calls: blocking sends and receives are aggregated per call site
// and their messages numbered per pair (both sides join in the trace); nonblocking and
// persistent ones leave their requests to be completed by the Wait and Test families.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "interpose/hooks_recording.hpp"
#include "interpose/yield.hpp"

namespace commtap::interpose {

template <Fn id>
struct PointToPointHooks {
  static constexpr Family kFamily = family_of(id);
  static constexpr bool kBlocking =
      kFamily == Family::send || kFamily == Family::recv || kFamily == Family::sendrecv;
  struct Nothing {};
  // A blocking receive's status names the source and tag a wildcard receive matched: if the
  // application ignores it, commtap passes its own.
  [[no_unique_address]] std::conditional_t<is_blocking_receive<id>(), MPI_Status, Nothing>
      own_status;
  MPI_Status* status = nullptr;

  template <typename... A>
  [[gnu::always_inline]] void before(A&... a) {
    if constexpr (is_blocking_receive<id>()) {
      MPI_Status*& last = std::get<sizeof...(A) - 1>(std::tie(a...));
      if (last == MPI_STATUS_IGNORE) last = &own_status;
      status = last;
      forget_receive_looks();
    }
  }
  [[gnu::always_inline]] void after(int rc, const CallInfo& info, const CallScope& scope,
                                    std::uint64_t bytes, void* caller) {
    if (rc != MPI_SUCCESS) return;
    monitor::ThreadState& self = scope.thread();
    if constexpr (kBlocking) {
      if (info.comm == MPI_COMM_NULL) return;  // MPI_Mrecv names none
      const std::uint32_t site = runtime().call_sites.site_of(caller, self.sites);
      world::CommState* comm = runtime().communicators.state_of(info.comm, self.communicators);
      aggregate(self, id, comm, site, bytes, scope.elapsed_ns());
      if constexpr (kFamily == Family::send || kFamily == Family::sendrecv) {
        const int peer = comm->world_rank_of(info.peer);
        record_transfer(self, id, Direction::send, comm, peer, info.tag,
                        number_message(comm, peer, info.tag, Direction::send), bytes, site,
                        scope.t0(), scope.t1());
      }
      if constexpr (is_blocking_receive<id>()) {
        // Specific or wildcard, the status says what matched. Where the call polled for its
        // message and found it a gap after its last miss, it came somewhere in between.
        const ReceiveLooks looks = take_receive_looks();
        const bool gap = looks.found_ns != 0 && looks.last_miss_ns != 0 &&
                         monitor::elapsed_ns(looks.last_miss_ns, looks.found_ns) >= kLookGapNs;
        finish_receive(self, id, comm, 0, -1, 0, status, bytes, site, scope.t0(), scope.t1(),
                       gap ? looks.last_miss_ns : 0);
      }
    } else if constexpr (is_send_start<id>() || is_recv_start<id>()) {
      if (info.request == nullptr) return;
      // Sends are numbered when posted (MPI orders a pair's messages by their sends), and so are
      // receives for a specific source and tag (matched in the order they are posted).
      world::CommState* comm = runtime().communicators.state_of(info.comm, self.communicators);
      const int peer = info.peer >= 0 ? comm->world_rank_of(info.peer) : -1;
      const bool wildcard = info.peer == MPI_ANY_SOURCE || info.tag == MPI_ANY_TAG;
      const Direction direction = is_send_start<id>() ? Direction::send : Direction::recv;
      const std::uint64_t msg = wildcard || info.peer == MPI_PROC_NULL
                                    ? 0
                                    : number_message(comm, peer, info.tag, direction);
      const Instance instance{
          comm,     msg,
          bytes,    peer,
          false,    runtime().call_sites.site_of(caller, self.sites),
          info.tag, is_send_start<id>() ? monitor::RecordKind::send : monitor::RecordKind::recv};
      runtime().requests.track(*info.request, id, scope.t0(), false, instance);
      if (direction == Direction::recv && !runtime().thread_multiple &&
          RequestTable::is_recorded_receive(instance, runtime().world_rank, runtime().sample))
        runtime().requests.watch(*info.request);
    } else if constexpr (kFamily == Family::p2p_start || kFamily == Family::p2p_init) {
      // Matched receives, send-receives, persistent point-to-point: completions are counted.
      if (info.request != nullptr)
        runtime().requests.track(*info.request, id, scope.t0(), is_persistent(kFamily));
    }
  }
};

}  // namespace commtap::interpose
