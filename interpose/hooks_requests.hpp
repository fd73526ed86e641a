// Hooks of the calls that complete, start or free requests: each completed operation is
// attributed to the call that started it (interpose/requests.hpp).
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
#include "interpose/hooks_recording.hpp"
#include "interpose/runtime.hpp"
#include "interpose/yield.hpp"
#include "monitor/call_counters.hpp"
#include "monitor/clock.hpp"
#include "monitor/thread_state.hpp"

namespace commtap::interpose {

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

// The last moment a completed receive was seen not yet done (transfers.seen_pending_ns, whose
// comment in monitor/schema.sql says what it bounds), given what the completing call's first
// look saw; 0 where that is not known. Stamped earlier, while the rank waited in another call:
// that call's polls kept it. Found pending by its own call: that call looked until it was done,
// so `arrival` itself. Found done: the last earlier look that found it pending, else its post.
inline std::uint64_t seen_pending_ns(const RequestTable::Completed& done, FirstLook look,
                                     std::uint64_t arrival) {
  const std::uint64_t earlier = done.pending_ns != 0 ? done.pending_ns : done.started_ns;
  if (done.arrived_ns != 0 || look == FirstLook::done) return std::min(earlier, arrival);
  return look == FirstLook::pending ? arrival : 0;
}

// After it: attribute each operation the call completed to the function that started it.
// `arrived_ns`: where not null, when each request of an MPI_Waitall was seen done (0: at `now`),
// and `first_look` what its first round saw of each. `own_look`: what MPI_Wait's first look saw
// of its request (wait_watching).
template <Fn id, typename... A>
void settle_requests(int rc, const RequestSnapshot& snapshot, std::uint64_t call_start,
                     std::uint64_t call_end, const std::uint64_t* arrived_ns,
                     const FirstLook* first_look, FirstLook own_look, monitor::ThreadState& self,
                     monitor::CallStats* stats, A... a) {
  if (rc != MPI_SUCCESS) return;
  // `status`: the completed operation's status, or nullptr if the application ignored it.
  auto complete = [&](MPI_Request request, const MPI_Status* status, std::uint64_t now,
                      FirstLook look = FirstLook::unknown) {
    if (auto done = runtime().requests.complete(request, snapshot.epoch())) {
      // Seen done earlier, while the rank waited in another call (RequestTable::watch).
      if (done->arrived_ns != 0 && done->arrived_ns < now) now = done->arrived_ns;
      monitor::CallStats& origin = stats[index_of(done->fn)];
      monitor::bump(origin.completions, 1);
      monitor::bump(origin.completion_ns, monitor::elapsed_ns(done->started_ns, now));
      const Instance& instance = done->instance;
      if (instance.comm == nullptr) return;
      aggregate(self, done->fn, instance.comm, instance.site, instance.bytes,
                monitor::elapsed_ns(done->started_ns, now));
      switch (instance.kind) {
        case monitor::RecordKind::collective:
          instance.comm->completed_seq(instance.seq, false);
          if (instance.sampled)
            record_instance(self, done->fn, instance.comm->id, instance.seq, instance.bytes,
                            instance.root, instance.site, done->started_ns, now);
          break;
        case monitor::RecordKind::send:
          record_transfer(self, done->fn, Direction::send, instance.comm, instance.root,
                          instance.tag, instance.seq, instance.bytes, instance.site,
                          done->started_ns, now);
          break;
        case monitor::RecordKind::recv:
          // Under MPI_THREAD_MULTIPLE nothing is watched: not known.
          finish_receive(self, done->fn, instance.comm, instance.seq, instance.root, instance.tag,
                         status, instance.bytes, instance.site, done->started_ns, now,
                         runtime().thread_multiple ? 0 : seen_pending_ns(*done, look, now));
          break;
      }
    }
  };
  auto status_at = [](MPI_Status* statuses, int i) -> const MPI_Status* {
    return statuses == MPI_STATUSES_IGNORE || statuses == MPI_STATUS_IGNORE ? nullptr
                                                                            : &statuses[i];
  };
  if constexpr (id == Fn::Wait) {
    complete(snapshot[0], status_at(arg<1>(a...), 0), call_end, own_look);
  } else if constexpr (id == Fn::Test) {
    // A test is one look: done, at its first; not done, a moment the receive was pending.
    if (*arg<1>(a...))
      complete(snapshot[0], status_at(arg<2>(a...), 0), call_end, FirstLook::done);
    else if (!runtime().thread_multiple && runtime().requests.watching())
      runtime().requests.seen_pending(snapshot[0], snapshot.epoch(), call_start);
  } else if constexpr (id == Fn::Waitall) {
    for (int i = 0; i < snapshot.size(); ++i)
      complete(snapshot[i], status_at(arg<2>(a...), i),
               arrived_ns != nullptr && arrived_ns[i] != 0 ? arrived_ns[i] : call_end,
               first_look != nullptr ? first_look[i] : FirstLook::unknown);
  } else if constexpr (id == Fn::Testall) {
    if (*arg<2>(a...))
      for (int i = 0; i < snapshot.size(); ++i)
        complete(snapshot[i], status_at(arg<3>(a...), i), call_end, FirstLook::done);
  } else if constexpr (id == Fn::Waitany) {
    if (*arg<2>(a...) != MPI_UNDEFINED)
      complete(snapshot[*arg<2>(a...)], status_at(arg<3>(a...), 0), call_end);
  } else if constexpr (id == Fn::Testany) {
    if (*arg<3>(a...) && *arg<2>(a...) != MPI_UNDEFINED)
      complete(snapshot[*arg<2>(a...)], status_at(arg<4>(a...), 0), call_end);
  } else if constexpr (id == Fn::Waitsome || id == Fn::Testsome) {
    const int completed = *arg<2>(a...);
    const int* indices = arg<3>(a...);
    for (int i = 0; completed != MPI_UNDEFINED && i < completed; ++i)
      complete(snapshot[indices[i]], status_at(arg<4>(a...), i), call_end);
  } else if constexpr (id == Fn::Request_free) {
    runtime().requests.forget(snapshot[0], snapshot.epoch());
  }
}

// The blocking calls that poll the watched receives while they wait (yield.hpp); MPI_Waitall
// does it in RequestHooks::stamp_arrivals. Not the blocking collectives: as nonblocking ones
// they may run other algorithms, and a reduction's result could change.
template <Fn id>
inline constexpr bool kWatchesArrivals = id == Fn::Wait || id == Fn::Recv || id == Fn::Send;

template <Fn id, typename... A>
int call_watching(FirstLook& own_look, A... a) {
  const bool yield = runtime().yield;
  if constexpr (id == Fn::Wait)
    return wait_watching(a..., yield, own_look);
  else if constexpr (id == Fn::Recv)
    return recv_watching(a..., yield);
  else
    return send_watching(a..., yield);
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

// Per call: the handles a completion, MPI_Start or MPI_Request_free call consumes, copied
// before it (MPI overwrites them), and commtap's own statuses where the application ignores
// them (a completed receive's status names its source, tag and size).
template <Fn id>
struct RequestHooks {
  static constexpr bool kConsumes = family_of(id) == Family::completion || id == Fn::Request_free;
  struct Nothing {};
  [[no_unique_address]] std::conditional_t<kConsumes, RequestSnapshot, Nothing> snapshot;
  [[no_unique_address]] std::conditional_t<kConsumes && id != Fn::Request_free,
                                           std::array<MPI_Status, kOwnStatuses>, Nothing>
      own_statuses;
  // MPI_Waitall completes its requests at once, so a receive that arrived early would read as
  // late as the set's latest (a stencil's halo from a healthy neighbour completing with the one
  // from a slow link). Where the set holds a recorded receive, commtap polls it first and
  // stamps each request when it is seen done; the blocking call then completes them all.
  static constexpr bool kStampsArrivals = id == Fn::Waitall;
  static constexpr int kMaxStamped = 16;
  [[no_unique_address]] std::conditional_t<kStampsArrivals, std::array<std::uint64_t, kMaxStamped>,
                                           Nothing>
      arrived_ns;
  [[no_unique_address]] std::conditional_t<kStampsArrivals, std::array<FirstLook, kMaxStamped>,
                                           Nothing>
      first_look;
  bool stamped = false;
  // MPI_Wait on a watched receive: what its first look saw (wait_watching).
  FirstLook own_look = FirstLook::unknown;

  template <typename... A>
  [[gnu::always_inline]] void before(A&... a) {
    if constexpr (kConsumes) {
      if (!runtime().requests.empty()) snapshot_requests<id>(snapshot, a...);
    }
    if constexpr (kConsumes && id != Fn::Request_free) {
      MPI_Status*& statuses = std::get<status_argument<id>()>(std::tie(a...));
      if (snapshot.size() > 0 && snapshot.size() <= static_cast<int>(kOwnStatuses) &&
          (statuses == MPI_STATUSES_IGNORE || statuses == MPI_STATUS_IGNORE))
        statuses = own_statuses.data();
    }
  }
  // After the call's clock started, before the library's call (MPI_Waitall only).
  template <typename... A>
  [[gnu::always_inline]] void stamp_arrivals(A... a) {
    if constexpr (kStampsArrivals) {
      const int count = arg<0>(a...);
      MPI_Request* requests = arg<1>(a...);
      // Under MPI_THREAD_MULTIPLE the error handler cannot be set aside while polling (yield.cpp):
      // the call is left as it is.
      if (count < 1 || count > kMaxStamped || snapshot.size() != count || runtime().thread_multiple)
        return;
      // Its own receives (of 2 or more), or others outstanding (RequestTable::watch).
      if (!(count >= 2 &&
            runtime().requests.holds_recorded_receive(requests, count, snapshot.epoch(),
                                                      runtime().world_rank, runtime().sample)) &&
          !runtime().requests.watching())
        return;
      poll_arrivals(count, requests, arrived_ns.data(), first_look.data(), runtime().yield);
      stamped = true;
    }
  }
  template <typename... A>
  [[gnu::always_inline]] void after(int rc, const CallScope& scope, A... a) {
    if constexpr (kConsumes) {
      const std::uint64_t* arrivals = nullptr;
      const FirstLook* looks = nullptr;
      if constexpr (kStampsArrivals)
        if (stamped) {
          arrivals = arrived_ns.data();
          looks = first_look.data();
        }
      if (snapshot.size() > 0)
        settle_requests<id>(rc, snapshot, scope.t0(), scope.t1(), arrivals, looks, own_look,
                            scope.thread(), scope.stats(), a...);
    } else if constexpr (family_of(id) == Family::start) {
      if (rc == MPI_SUCCESS) start_requests<id>(scope.t0(), a...);
    }
  }
};

}  // namespace commtap::interpose
