// Hooks of the one-sided window calls: every window gets an id its members agree on
// (world/communicators.hpp, Window), and its fences, collective over its group, are numbered and
// serve the link probes as a communicator's blocking collectives do. A program that synchronizes
// only with fences (no collective on any communicator, and blocked in MPI_Win_fence, where the
// asynchronous probes cannot answer) gets its hosts' links measured there.
#pragma once

#include <mpi.h>

#include "interpose/hooks_recording.hpp"

namespace commtap::interpose {

template <Fn id>
struct WindowHooks {
  static constexpr bool kCreates = id == Fn::Win_create || id == Fn::Win_create_c ||
                                   id == Fn::Win_allocate || id == Fn::Win_allocate_c ||
                                   id == Fn::Win_allocate_shared ||
                                   id == Fn::Win_allocate_shared_c || id == Fn::Win_create_dynamic;
  MPI_Win freed = MPI_WIN_NULL;  // MPI_Win_free's handle before the call

  template <typename... A>
  [[gnu::always_inline]] void before(A... a) {
    if constexpr (id == Fn::Win_free) freed = *arg<0>(a...);
  }
  template <typename... A>
  [[gnu::always_inline]] void after(int rc, const CallInfo& info, const CallScope& scope, A... a) {
    if (rc != MPI_SUCCESS) return;
    if constexpr (kCreates) {
      // Collective over the communicator: its ranks count the windows made on it alike.
      runtime().communicators.window_created(info.comm, *arg<sizeof...(A) - 1>(a...));
    } else if constexpr (id == Fn::Win_free) {
      runtime().communicators.window_freed(freed);
    } else if constexpr (id == Fn::Win_fence) {
      world::Window* const window = runtime().communicators.window(arg<1>(a...));
      if (window == nullptr) return;
      const std::uint64_t seq = window->sync.next_seq();
      window->sync.completed_seq(seq, !runtime().thread_multiple);
      if (seq >= window->sync.probe_at.load(std::memory_order_relaxed))
        at_window_probe_point(*window, seq);
      // As a collective on a probed communicator: the rounds are coming here, so the leader's
      // asynchronous probes stay off.
      if (probes::AsyncProber* const async = runtime().async_probes;
          async != nullptr && window->sync.probe_at.load(std::memory_order_relaxed) != UINT64_MAX)
        async->note_collective(scope.t1(), window->sync.id);
    }
  }
};

}  // namespace commtap::interpose
