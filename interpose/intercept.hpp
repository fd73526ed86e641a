// The body every generated MPI wrapper shares: one call scope (guard, clocks, heartbeat,
// counters; interpose/call_scope.hpp) and the hooks of the call's topics, each a no-op for the
// calls it does not concern (hooks_*.hpp). Pass-through costs one acquire load (a plain load on
// x86) and, once commtap is active, one TLS read (the thread's block: one TLS descriptor call,
// the only one of the wrapper: the scope hands the block to the hooks); recording adds two clock
// reads and a few adds to the thread's counters (and, for calls that make or complete requests,
// one request-table operation).
#pragma once

#include <mpi.h>

#include <cstdint>

#include "interpose/call_info.hpp"
#include "interpose/call_scope.hpp"
#include "interpose/fatal_errors.hpp"
#include "interpose/hooks_collectives.hpp"
#include "interpose/hooks_communicators.hpp"
#include "interpose/hooks_datatypes.hpp"
#include "interpose/hooks_device.hpp"
#include "interpose/hooks_point_to_point.hpp"
#include "interpose/hooks_recording.hpp"
#include "interpose/hooks_requests.hpp"
#include "interpose/hooks_windows.hpp"
#include "interpose/yield.hpp"

namespace commtap::interpose {

// ---- COMMTAP_YIELD --------------------------------------------------------------------------

// `comm`: the call's communicator, `real`: its blocking form. An error the nonblocking twin
// finds in the arguments is raised by the blocking call (ErrorsReturned).
template <Yield yield, typename Real, typename Twin, typename... A>
int call_yielding(MPI_Comm comm, Real real, Twin twin, A... a) {
  if constexpr (yield == Yield::append_request) {
    MPI_Request request = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    {
      const ErrorsReturned quiet(comm);
      rc = twin(a..., &request);
    }
    return rc != MPI_SUCCESS ? real(a...) : wait_yielding(&request, MPI_STATUS_IGNORE);
  } else {
    static_assert(yield == Yield::poll);
    return twin(a...);
  }
}

// Blocking point-to-point calls (those with a nonblocking twin, not the collectives, whose
// nonblocking forms may run other algorithms) take their polling path on a leader that answers
// the asynchronous link probes, so that it answers while it waits.
template <Fn id, Yield yield>
inline constexpr bool kAnswersWhileBlocked = (yield != Yield::none) &&
                                             (family_of(id) != Family::collective);

// ---- Device buffers through host staging ------------------------------------------------------

// The call where device staging is on (hooks_device.hpp): the hooks around the library's call
// (yield mode included) on this function's own copies of the arguments, which the hooks may
// point at staging buffers and statuses. Out of line and given the arguments by value, so that
// a wrapper pays one load and one branch for it when there is no stager.
template <Fn id, Yield yield, typename Real, typename Twin, typename... A>
[[gnu::noinline]] int staged_call(datatypes::Stager& stager, MPI_Comm comm, Real real, Twin twin,
                                  A... a) {
  DeviceHooks<id> device;
  device.before(stager, a...);
  auto library = [&] {
    if constexpr (yield != Yield::none)
      if (runtime().yield) return call_yielding<yield>(comm, real, twin, a...);
    return real(a...);
  };
  const int rc = device.result ? *device.result : library();
  device.after_library(rc, a...);
  return rc;
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

// ---- One-sided synchronization ----------------------------------------------------------------

// A fence, post-start-complete-wait, unlock or flush is where a rank of a one-sided program
// waits for the others (their epochs, its transfers): its time goes into the window's aggregates
// as any communication call's does (communicator 0: a window has none), so the analyzer's time
// inside MPI and pace of operations see programs that synchronize this way.
template <Fn id>
void wait_on_window(const CallScope& scope, void* caller) {
  monitor::ThreadState& self = scope.thread();
  aggregate(self, id, nullptr, runtime().call_sites.site_of(caller, self.sites), 0,
            scope.elapsed_ns());
}

// ---- The wrapper body -------------------------------------------------------------------------

template <Fn id, Yield yield, typename Real, typename Twin, typename... A>
[[gnu::always_inline]] inline int intercept(Real real, Twin twin, const CallInfo& info, A... a) {
  constexpr Family family = family_of(id);
  if constexpr (family == Family::lifecycle) {
    return lifecycle_call<id>(real, a...);
  } else if constexpr (family == Family::error_handling) {
    // Counted like any call; the handler commtap stands in with is given back as the one it
    // stands in for.
    int rc;
    if (monitor::ThreadState* const self = CallScope::recording_thread()) {
      CallScope scope(id, *self);
      scope.enter(static_cast<std::int64_t>(info.comm), 0);
      rc = real(a...);
      scope.leave();
      scope.count(0);
    } else {
      rc = real(a...);
    }
    if (rc == MPI_SUCCESS) show_as_fatal(arg<1>(a...));
    return rc;
  } else {
    monitor::ThreadState* const self = CallScope::recording_thread();
    if (self == nullptr) [[unlikely]]
      return real(a...);
    // A host's leader answers the asynchronous link probes wherever it calls MPI (throttled: a
    // clock read otherwise); everyone else pays a load and a branch.
    if (probes::AsyncProber* const async = runtime().async_probes) [[unlikely]]
      async->at_call_entry();
    CallScope scope(id, *self);
    RequestHooks<id> requests;
    CollectiveHooks<id> collective;
    PointToPointHooks<id> point_to_point;
    CommunicatorHooks<id> communicators;
    DatatypeHooks<id> datatypes;
    WindowHooks<id> windows;
    requests.before(a...);
    collective.before(info, scope);
    point_to_point.before(a...);
    communicators.before(a...);
    datatypes.before(a...);
    windows.before(a...);

    scope.enter(static_cast<std::int64_t>(info.comm), collective.seq, info.peer);
    requests.stamp_arrivals(a...);
    auto library = [&] {
      if constexpr (yield != Yield::none)
        if (runtime().yield || (kAnswersWhileBlocked<id, yield> && answering_probes()))
          return call_yielding<yield>(info.comm, real, twin, a...);
      return real(a...);
    };
    int rc;
    // Device buffers through host staging (last: it may swap buffers and statuses that the
    // hooks above have seen).
    if (datatypes::Stager* const stager = device_stager<id>()) [[unlikely]]
      rc = staged_call<id, yield>(*stager, info.comm, real, twin, a...);
    else if constexpr (id == Fn::Allreduce || id == Fn::Allreduce_c)
      rc = collective.allreduce(library, a...);
    else if constexpr (family == Family::pack && id != Fn::Pack_size && id != Fn::Pack_size_c)
      rc = pack_call<id>(real, a...);
    else if constexpr (kWatchesArrivals<id>)
      rc = watching_arrivals() || answering_probes() ? call_watching<id>(requests.own_look, a...)
                                                     : library();
    else
      rc = library();
    datatypes.after_library(rc, a...);
    scope.leave();

    collective.identify(rc, info, scope);
    const std::uint64_t bytes =
        rc == MPI_SUCCESS && info.count > 0 ? payload_bytes(info, family) : 0;
    scope.count(bytes);
    void* const caller = __builtin_return_address(0);
    collective.after(rc, info, scope, bytes, caller);
    if constexpr (family == Family::one_sided_sync)
      if (rc == MPI_SUCCESS) wait_on_window<id>(scope, caller);
    point_to_point.after(rc, info, scope, bytes, caller);
    requests.after(rc, scope, a...);
    communicators.after(rc, info, scope, a...);
    windows.after(rc, info, scope, a...);
    return rc;
  }
}

}  // namespace commtap::interpose
