// Hooks of the datatype calls: commtap's plans follow MPI_Type_commit and MPI_Type_free, and
// MPI_Pack/MPI_Unpack are asked of the datatypes module first.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "interpose/hooks_recording.hpp"

namespace commtap::interpose {

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

template <Fn id>
struct DatatypeHooks {
  MPI_Datatype freed = MPI_DATATYPE_NULL;  // MPI_Type_free's handle before the call

  template <typename... A>
  [[gnu::always_inline]] void before(A... a) {
    if constexpr (id == Fn::Type_free) freed = *arg<0>(a...);
  }
  // Right after the library's call (still inside the call's time).
  template <typename... A>
  [[gnu::always_inline]] void after_library(int rc, A... a) {
    if constexpr (id == Fn::Type_commit) {
      if (rc == MPI_SUCCESS && runtime().settings.datatypes)
        runtime().plans.committed(*arg<0>(a...));
    } else if constexpr (id == Fn::Type_free) {
      if (rc == MPI_SUCCESS) runtime().plans.freed(freed);
    }
  }
};

}  // namespace commtap::interpose
