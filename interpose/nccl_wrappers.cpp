// Every exported nccl* wrapper, generated from nccl_functions.def. libcommtap.so does not link
// libnccl: the real entry point is found at first use, preferring NCCL's strong pnccl* alias
// (2.16.2 and later) and falling back to the next nccl* definition after this library.
#include <dlfcn.h>
#include <nccl.h>

#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "interpose/call_scope.hpp"
#include "interpose/export.hpp"
#include "interpose/runtime.hpp"

namespace commtap::interpose {
namespace {

std::uint64_t nccl_type_size(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 2;  // bfloat16 and the 8-bit float types of newer NCCLs are 1-2 bytes
  }
}

template <typename Function>
Function resolve(std::atomic<void*>& cache, const char* strong, const char* weak) {
  void* found = cache.load(std::memory_order_acquire);
  if (found == nullptr) {
    found = dlsym(RTLD_DEFAULT, strong);
    if (found == nullptr) found = dlsym(RTLD_NEXT, weak);
    cache.store(found, std::memory_order_release);
  }
  return reinterpret_cast<Function>(found);
}

// NCCL communicators: ids equal on all ranks (made from the ncclUniqueId every rank passes) and
// per-communicator sequence numbers for the collectives, as for MPI communicators.
class NcclCommunicators {
 public:
  void add(ncclComm_t comm, std::int64_t id, Fn fn, int size, int rank) {
    const int device = device_of(comm);
    std::lock_guard lock(mutex_);
    states_.push_back(std::make_unique<world::CommState>());
    states_.back()->id = id;
    live_[comm] = {states_.back().get(), device};
    monitor::CommunicatorRow row;
    row.id = id;
    row.created_by = kFunctionName[index_of(fn)];
    row.size = size;
    row.comm_rank = rank;
    runtime().communicators.add_row(row);
  }
  void remove(ncclComm_t comm) {
    std::lock_guard lock(mutex_);
    live_.erase(comm);
  }
  struct Live {
    world::CommState* state = nullptr;
    int device = 0;  // the CUDA device the communicator runs on
  };
  Live find(ncclComm_t comm) {
    std::lock_guard lock(mutex_);
    auto found = live_.find(comm);
    return found == live_.end() ? Live{} : found->second;
  }
  std::uint64_t next_clique() { return ++cliques_; }

 private:
  std::mutex mutex_;
  static int device_of(ncclComm_t comm) {
    using CuDevice = ncclResult_t (*)(const ncclComm_t, int*);
    static std::atomic<void*> cache{nullptr};
    int device = 0;
    if (const auto cu_device = resolve<CuDevice>(cache, "pncclCommCuDevice", "ncclCommCuDevice"))
      if (cu_device(comm, &device) != ncclSuccess) device = 0;
    return device;
  }
  std::unordered_map<ncclComm_t, Live> live_;
  std::vector<std::unique_ptr<world::CommState>> states_;
  std::uint64_t cliques_ = 0;
};
Immortal<NcclCommunicators> nccl_communicators;

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

// After a successful communicator call: register or forget the communicator.
template <Fn id, typename... A>
void on_communicator(A... a) {
  auto& registry = nccl_communicators.value;
  if constexpr (id == Fn::ncclCommInitRank || id == Fn::ncclCommInitRankConfig) {
    const auto args = std::make_tuple(a...);
    registry.add(*std::get<0>(args),
                 world::id_from_bytes(std::get<2>(args).internal, sizeof(ncclUniqueId::internal)),
                 id, std::get<1>(args), std::get<3>(args));
  } else if constexpr (id == Fn::ncclCommInitAll) {
    // One process drives every device: its communicators form one clique.
    const auto [comms, devices, list] = std::make_tuple(a...);
    const std::int64_t clique =
        world::mix_id(0xa11, registry.next_clique() +
                                 (std::uint64_t{1} << 40) * static_cast<std::uint64_t>(::getpid()));
    for (int i = 0; i < devices; ++i) registry.add(comms[i], clique, id, devices, i);
  } else if constexpr (id == Fn::ncclCommDestroy || id == Fn::ncclCommAbort) {
    registry.remove(argument_of_type<ncclComm_t>(a...));
  }
}

// Made at the first NCCL call after MPI_Init: CUDA events where a GPU is usable, else none
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
  if (real == nullptr) return ncclSystemError;
  if (!CallScope::recording()) return real(a...);
  CallScope scope(id);
  constexpr Family family = family_of(id);
  // Collectives take their communicator's next sequence number at the call.
  world::CommState* state = nullptr;
  int device = 0;
  std::uint64_t seq = 0;
  if constexpr (family == Family::nccl_collective) {
    const auto live = nccl_communicators.value.find(argument_of_type<ncclComm_t>(a...));
    state = live.state;
    device = live.device;
    if (state != nullptr) seq = state->next_seq();
  }
  monitor::StreamCompletions& completions = stream_completions();
  // An NCCL call returns once the work is enqueued: this is the enqueue time. The completion
  // comes from a CUDA event recorded on the stream after it (at the group's end inside a group).
  // The heartbeat names the call (its communicator is an NCCL one: no MPI id for it).
  scope.enter(0, seq);
  const ncclResult_t result = real(a...);
  scope.leave();
  const std::uint64_t t0 = scope.t0();
  const std::uint64_t bytes = type != ncclNumTypes ? count * nccl_type_size(type) : 0;
  scope.count(bytes);
  if constexpr (id == Fn::ncclGroupStart) {
    if (result == ncclSuccess) completions.group_start();
  } else if constexpr (id == Fn::ncclGroupEnd) {
    // ncclInProgress (nonblocking communicators): the launch is not done yet, so a marker now
    // could complete before the work; those completions stay unknown.
    completions.group_end(result == ncclSuccess);
  }
  if (result == ncclSuccess) {
    if constexpr (family == Family::nccl_communicator) on_communicator<id>(a...);
    if constexpr (family == Family::nccl_collective) {
      if (state != nullptr) {
        // Aggregated per call site like the MPI collectives (the enqueue time: the GPU's time
        // comes with the sampled instances, from the stream).
        const std::uint32_t site = runtime().call_sites.site_of(__builtin_return_address(0));
        runtime().counters->aggregate({state->id, static_cast<std::uint32_t>(index_of(id)), site,
                                       monitor::size_bucket(bytes)},
                                      scope.elapsed_ns());
        if (is_sampled(seq, runtime().sample))
          completions.enqueued({state->id, seq, bytes, t0, /*exit: from the stream*/ 0,
                                static_cast<std::uint32_t>(index_of(id)), -1, site},
                               argument_of_type<cudaStream_t>(a...), device);
      }
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
    const Real real = resolve<Real>(cache, "pnccl" #name, "nccl" #name);                     \
    return intercept_nccl<Fn::nccl##name>(real, count, datatype COMMTAP_LEADING_COMMA args); \
  }
#include "interpose/nccl_functions.def"
#undef COMMTAP_NCCL
