// Hooks of the collective calls: sequence numbers per communicator, aggregates and sampled
// instances of the blocking ones (with the messages of commtap's own all-reduce), requests of
// the nonblocking and persistent ones.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

#include "interpose/hooks_recording.hpp"

namespace commtap::interpose {

template <Fn id>
struct CollectiveHooks {
  static constexpr Family kFamily = family_of(id);
  static constexpr bool kApplies = is_collective(kFamily);
  static constexpr bool kAllreduce = id == Fn::Allreduce || id == Fn::Allreduce_c;
  struct Nothing {};
  world::CommState* comm = nullptr;
  std::uint64_t seq = 0;
  collectives::Algorithm algorithm = collectives::Algorithm::native;  // who ran an all-reduce
  // The messages of a recorded commtap all-reduce.
  [[no_unique_address]] std::conditional_t<kAllreduce, std::vector<collectives::Step>, Nothing>
      steps;

  // Collectives get the next sequence number of their communicator at the call (persistent ones
  // at each MPI_Start instead). A communicator commtap has not met yet is identified after the
  // call succeeded, never on a handle the library may reject.
  [[gnu::always_inline]] void before(const CallInfo& info, const CallScope& scope) {
    if constexpr (kApplies) {
      comm = runtime().communicators.known(info.comm, scope.thread().communicators);
      if constexpr (kFamily != Family::collective_init)
        if (comm != nullptr) seq = comm->next_seq();
    }
  }
  [[gnu::always_inline]] void identify(int rc, const CallInfo& info, const CallScope& scope) {
    if constexpr (kApplies) {
      if (comm == nullptr && rc == MPI_SUCCESS) {
        comm = runtime().communicators.state_of(info.comm, scope.thread().communicators);
        if constexpr (kFamily != Family::collective_init) seq = comm->next_seq();
      }
    }
  }
  // The library's all-reduce, or commtap's where the collectives module takes it.
  template <typename Library, typename... A>
  [[gnu::always_inline]] int allreduce(Library library, A... a) {
    static_assert(kAllreduce);
    const auto [sendbuf, recvbuf, count, type, op, communicator] = std::tuple(a...);
    const collectives::Context& context = runtime().collectives;
    if (collectives::leaves_allreduce_to_library(context)) return library();
    return collectives::allreduce_call(
        context, sendbuf, recvbuf, count, type, op, communicator, seq, library, algorithm,
        comm != nullptr && is_sampled(comm->id, seq, runtime().sample) ? &steps : nullptr);
  }
  // `caller`: the application's return address (the wrappers are inlined into the exported
  // MPI_ functions).
  [[gnu::always_inline]] void after(int rc, const CallInfo& info, const CallScope& scope,
                                    std::uint64_t bytes, void* caller) {
    const std::int32_t root = info.peer >= 0 ? info.peer : -1;
    monitor::ThreadState& self = scope.thread();
    if constexpr (kFamily == Family::collective) {
      if (rc != MPI_SUCCESS) return;
      const std::uint32_t site = runtime().call_sites.site_of(caller, self.sites);
      aggregate(self, id, comm, site, bytes, scope.elapsed_ns());
      comm->completed_seq(seq, !runtime().thread_multiple);
      if (is_sampled(comm->id, seq, runtime().sample))
        record_instance(self, id, comm->id, seq, bytes, root, site, scope.t0(), scope.t1(),
                        algorithm);
      if constexpr (kAllreduce)
        for (const collectives::Step& step : steps) record_step(self, id, comm, step, site);
      if (comm->id == 1) after_world_collective(seq);
      if (seq >= comm->probe_at.load(std::memory_order_relaxed))
        at_probe_point(*comm, info.comm, seq);
      // A collective the link-probe rounds may use keeps a leader's asynchronous probes off:
      // its rounds are coming, however late a loaded machine or the cost bound makes them.
      if (probes::AsyncProber* const async = runtime().async_probes;
          async != nullptr && comm->probe_at.load(std::memory_order_relaxed) != UINT64_MAX)
        async->note_collective(scope.t1(), comm->id);
    } else if constexpr (kApplies) {
      if (info.request != nullptr && rc == MPI_SUCCESS) {
        // Persistent operations take their sequence numbers (and sampling) at each MPI_Start.
        const bool sampled = seq != 0 && is_sampled(comm->id, seq, runtime().sample);
        const std::uint32_t site = runtime().call_sites.site_of(caller, self.sites);
        runtime().requests.track(*info.request, id, scope.t0(), is_persistent(kFamily),
                                 Instance{comm, seq, bytes, root, sampled, site});
      }
    }
  }
};

}  // namespace commtap::interpose
