// Every exported nccl* wrapper, generated from nccl/functions.def. libcommtap.so does not link
// libnccl: the real entry point is found at first use, preferring NCCL's strong pnccl* alias
// (2.16.2 and later) and falling back to the next nccl* definition after this library. In a
// process that never called MPI_Init, the first communicator constructor starts recording.
#include <dlfcn.h>
#include <nccl.h>

#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "interpose/call_scope.hpp"
#include "interpose/export.hpp"
#include "interpose/loaded_symbols.hpp"
#include "interpose/nccl_communicators.hpp"
#include "interpose/runtime.hpp"
#include "nccl/datatypes.hpp"

namespace commtap::interpose {
namespace {

// The real function, found wherever NCCL was loaded (loaded_symbols.hpp): PyTorch's libnccl is
// visible only from the extension module that needs it. `caller` is the wrapper's return address.
// Only a definition found is kept: NCCL may be loaded after a first call from elsewhere.
template <typename Function>
Function resolve(std::atomic<void*>& cache, const char* strong, const char* weak,
                 const void* caller) {
  void* found = cache.load(std::memory_order_acquire);
  if (found == nullptr) {
    found = find_loaded_function({strong, weak}, caller);
    if (found != nullptr) cache.store(found, std::memory_order_release);
  }
  return reinterpret_cast<Function>(found);
}

// The first argument of type T (an NCCL call's communicator, a collective's stream), or T{}.
template <typename T, typename... A>
T argument_of_type(A... a) {
  T found{};
  bool seen = false;
  auto take = [&](auto value) {
    if constexpr (std::is_same_v<decltype(value), T>) {
      if (!seen) found = value;
      seen = true;
    }
  };
  (take(a), ...);
  return found;
}

int device_of(ncclComm_t comm) {
  using CuDevice = ncclResult_t (*)(const ncclComm_t, int*);
  static std::atomic<void*> cache{nullptr};
  int device = 0;
  if (const auto cu_device =
          resolve<CuDevice>(cache, "pncclCommCuDevice", "ncclCommCuDevice", nullptr))
    if (cu_device(comm, &device) != ncclSuccess) device = 0;
  return device;
}

// A communicator's size and this rank in it, from the library (split and shrink decide both).
void size_and_rank_of(ncclComm_t comm, int& size, int& rank) {
  using Query = ncclResult_t (*)(const ncclComm_t, int*);
  static std::atomic<void*> count_cache{nullptr}, rank_cache{nullptr};
  const auto count = resolve<Query>(count_cache, "pncclCommCount", "ncclCommCount", nullptr);
  const auto user_rank =
      resolve<Query>(rank_cache, "pncclCommUserRank", "ncclCommUserRank", nullptr);
  if (count == nullptr || count(comm, &size) != ncclSuccess) size = 0;
  if (user_rank == nullptr || user_rank(comm, &rank) != ncclSuccess) rank = 0;
}

constexpr bool is_constructor(Fn id) {
  return id == Fn::ncclCommInitRank || id == Fn::ncclCommInitRankConfig ||
         id == Fn::ncclCommInitRankScalable || id == Fn::ncclCommSplit ||
         id == Fn::ncclCommShrink || id == Fn::ncclCommInitAll;
}

// Before a constructor's call: the new communicator's id (see nccl_communicators.hpp) and what
// the arguments say of its size and this rank.
template <Fn id, typename... A>
NcclConstruction describe_construction(A... a) {
  NcclConstruction made;
  made.created_by = kFunctionName[index_of(id)];
  auto& registry = nccl_communicators();
  const auto args = std::make_tuple(a...);
  if constexpr (id == Fn::ncclCommInitRank || id == Fn::ncclCommInitRankConfig) {
    made.id = world::id_from_bytes(std::get<2>(args).internal, sizeof(ncclUniqueId::internal));
    made.size = std::get<1>(args);
    made.rank = std::get<3>(args);
  } else if constexpr (id == Fn::ncclCommInitRankScalable) {
    const auto [newcomm, nranks, myrank, ids, unique_ids, config] = args;
    made.id = ids > 0 && unique_ids != nullptr
                  ? world::id_from_bytes(
                        unique_ids, static_cast<std::size_t>(ids) * sizeof(ncclUniqueId::internal))
                  : 0;
    made.size = nranks;
    made.rank = myrank;
  } else if constexpr (id == Fn::ncclCommSplit) {
    made.id = registry.child_id(std::get<0>(args), static_cast<std::uint32_t>(std::get<1>(args)),
                                made.parent_id);
  } else if constexpr (id == Fn::ncclCommShrink) {
    // Every survivor passes the same ranks, in whatever order.
    const auto [parent, excluded, excluded_count, newcomm, config, flags] = args;
    std::vector<int> sorted;
    if (excluded != nullptr && excluded_count > 0)
      sorted.assign(excluded, excluded + excluded_count);
    std::sort(sorted.begin(), sorted.end());
    const std::uint64_t salt = static_cast<std::uint64_t>(
        world::id_from_bytes(sorted.data(), sorted.size() * sizeof(int)));
    made.id = registry.child_id(parent, salt, made.parent_id);
  } else if constexpr (id == Fn::ncclCommInitAll) {
    made.id = registry.next_clique_id();
    made.size = std::get<1>(args);
  }
  return made;
}

// After a constructor succeeded (or, nonblocking, is in progress): registers the communicators
// it made.
template <Fn id, typename... A>
void register_construction(NcclConstruction made, A... a) {
  auto& registry = nccl_communicators();
  const auto args = std::make_tuple(a...);
  if constexpr (id == Fn::ncclCommInitAll) {
    const auto [comms, devices, list] = args;
    for (int i = 0; i < devices; ++i) {
      made.rank = i;
      registry.add(comms[i], made, device_of(comms[i]));
    }
  } else {
    ncclComm_t made_comm = nullptr;
    if constexpr (id == Fn::ncclCommSplit || id == Fn::ncclCommShrink)
      made_comm = *std::get<3>(args);
    else
      made_comm = *std::get<0>(args);
    if (made_comm == nullptr) return;  // NCCL_SPLIT_NOCOLOR: this rank is in none
    if constexpr (id == Fn::ncclCommSplit || id == Fn::ncclCommShrink)
      size_and_rank_of(made_comm, made.size, made.rank);
    registry.add(made_comm, made, device_of(made_comm));
  }
}

// A constructor: in a process that has not called MPI_Init, the first one starts recording.
template <Fn id, typename Real, typename... A>
ncclResult_t construct(Real real, A... a) {
  // Not nested in another recorded call of this thread (commtap's own or the library's).
  if (!runtime().active.load() && monitor::this_thread().depth == 0) {
    const NcclConstruction first = describe_construction<id>(a...);
    if constexpr (id != Fn::ncclCommSplit && id != Fn::ncclCommShrink)
      start_without_mpi({first.id, first.rank, first.size});
  }
  if (!CallScope::recording()) return real(a...);
  CallScope scope(id);
  NcclConstruction made = describe_construction<id>(a...);
  scope.enter(0, 0);
  t_nccl_construction = &made;  // for the profiler plugin's init, called inside
  const ncclResult_t result = real(a...);
  t_nccl_construction = nullptr;
  scope.leave();
  scope.count(0);
  if (result == ncclSuccess || result == ncclInProgress) register_construction<id>(made, a...);
  return result;
}

// Made at the first recorded NCCL call: CUDA events where a GPU is usable, else none
// (completions unknown). Group calls must be seen from the first one on.
monitor::StreamCompletions& stream_completions() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never deleted, like the runtime: NCCL calls may come from global destructors.
    auto* completions = new monitor::StreamCompletions(monitor::make_cuda_markers());
    runtime().stream_completions.store(completions, std::memory_order_release);
  });
  return *runtime().stream_completions.load(std::memory_order_acquire);
}

template <Fn id, typename Real, typename... A>
ncclResult_t intercept_nccl(Real real, std::uint64_t count, ncclDataType_t type, A... a) {
  if (real == nullptr) [[unlikely]] {
    // No loaded object defines the function: there is no NCCL to call (the caller found this
    // wrapper by name in a process without NCCL). Said once; the error is the only answer.
    static std::once_flag said;
    std::call_once(said, [] {
      std::fprintf(stderr, "commtap: %s called, but no NCCL is loaded in this process\n",
                   kFunctionName[index_of(id)]);
    });
    return ncclSystemError;
  }
  if constexpr (is_constructor(id)) return construct<id>(real, a...);
  if (!CallScope::recording()) return real(a...);
  CallScope scope(id);
  constexpr Family family = family_of(id);
  // Collectives take their communicator's next sequence number at the call, unless the
  // profiler plugin records the communicator's collectives (it numbers them as NCCL does).
  NcclCommunicators::Live live;
  std::uint64_t seq = 0;
  if constexpr (family == Family::nccl_collective) {
    live = nccl_communicators().find(argument_of_type<ncclComm_t>(a...));
    if (live.state != nullptr)
      seq = live.profiled ? live.state->started.load(std::memory_order_relaxed) + 1
                          : live.state->next_seq();
  }
  monitor::StreamCompletions& completions = stream_completions();
  // An NCCL call returns once the work is enqueued: this is the enqueue time. The completion
  // comes from a CUDA event recorded on the stream after it (at the group's end inside a group).
  // The heartbeat names the call (its communicator is an NCCL one: no MPI id for it).
  scope.enter(0, seq);
  const ncclResult_t result = real(a...);
  scope.leave();
  const std::uint64_t t0 = scope.t0();
  const std::uint64_t bytes = count * nccl::datatype_bytes(static_cast<int>(type));
  scope.count(bytes);
  if constexpr (id == Fn::ncclGroupStart) {
    if (result == ncclSuccess) completions.group_start();
  } else if constexpr (id == Fn::ncclGroupEnd) {
    // ncclInProgress (nonblocking communicators): the launch is not done yet, so a marker now
    // could complete before the work; those completions stay unknown.
    completions.group_end(result == ncclSuccess);
  }
  if constexpr (id == Fn::ncclCommDestroy || id == Fn::ncclCommAbort) {
    // An aborted communicator is gone whatever the call returns.
    if (result == ncclSuccess || id == Fn::ncclCommAbort)
      nccl_communicators().forget(argument_of_type<ncclComm_t>(a...));
  }
  if constexpr (family == Family::nccl_collective) {
    if (result == ncclSuccess && live.state != nullptr) {
      // Aggregated per call site like the MPI collectives (the enqueue time: the GPU's time
      // comes with the sampled instances, from the stream or the profiler plugin).
      const std::uint32_t site = runtime().call_sites.site_of(__builtin_return_address(0));
      runtime().counters->aggregate({live.state->id, static_cast<std::uint32_t>(index_of(id)), site,
                                     monitor::size_bucket(bytes)},
                                    scope.elapsed_ns());
      if (!live.profiled && is_sampled(live.state->id, seq, runtime().sample))
        completions.enqueued({live.state->id, seq, bytes, t0, /*exit: from the stream*/ 0,
                              static_cast<std::uint32_t>(index_of(id)), -1, site},
                             argument_of_type<cudaStream_t>(a...), live.device);
    }
  }
  return result;
}

}  // namespace
}  // namespace commtap::interpose

#define COMMTAP_UNPAREN(...) __VA_ARGS__
#define COMMTAP_LEADING_COMMA(...) __VA_OPT__(, ) __VA_ARGS__

#define COMMTAP_NCCL(name, family, params, args, count, datatype)                            \
  extern "C" COMMTAP_EXPORT ncclResult_t nccl##name params {                                 \
    using namespace ::commtap::interpose;                                                    \
    using Real = ncclResult_t(*) params;                                                     \
    static std::atomic<void*> cache{nullptr};                                                \
    const Real real =                                                                        \
        resolve<Real>(cache, "pnccl" #name, "nccl" #name, __builtin_return_address(0));      \
    return intercept_nccl<Fn::nccl##name>(real, count, datatype COMMTAP_LEADING_COMMA args); \
  }
#include "nccl/functions.def"
#undef COMMTAP_NCCL
