// Hooks of the communicator calls: every communicator gets an id equal on all its members
// (world/communicators.hpp); freed ones are forgotten.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "interpose/hooks_recording.hpp"

namespace commtap::interpose {

// The communicator a creation call made: its last argument, but for MPI_Comm_idup the second.
template <Fn id, typename... A>
MPI_Comm created_communicator(A... a) {
  if constexpr (id == Fn::Comm_idup)
    return *arg<1>(a...);
  else
    return *arg<sizeof...(A) - 1>(a...);
}

template <Fn id>
struct CommunicatorHooks {
  static constexpr Family kFamily = family_of(id);
  MPI_Comm freed = MPI_COMM_NULL;  // MPI_Comm_free's handle before the call

  template <typename... A>
  [[gnu::always_inline]] void before(A... a) {
    if constexpr (id == Fn::Comm_free) freed = *arg<0>(a...);
  }
  template <typename... A>
  [[gnu::always_inline]] void after(int rc, const CallInfo& info, const CallScope& scope, A... a) {
    if (rc != MPI_SUCCESS) return;
    if constexpr (id == Fn::Comm_free) {
      runtime().communicators.freed(freed);
    } else if constexpr (kFamily == Family::communicator) {
      // Collective over the parent: every rank that made the call takes part, even if it got
      // MPI_COMM_NULL. Not timed: it is commtap's work, not the application's.
      using Creation = world::CommunicatorRegistry::Creation;
      constexpr Creation kHow = id == Fn::Comm_idup           ? Creation::pending
                                : id == Fn::Comm_create_group ? Creation::subgroup
                                                              : Creation::collective;
      runtime().communicators.created(kHow, kFunctionName[index_of(id)], arg<0>(a...),
                                      created_communicator<id>(a...));
      if (info.request != nullptr) runtime().requests.track(*info.request, id, scope.t0(), false);
    }
  }
};

}  // namespace commtap::interpose
