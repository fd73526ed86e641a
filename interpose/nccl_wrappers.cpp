// Every exported nccl* wrapper, generated from nccl_functions.def. libcommtap.so does not link
// libnccl: the real entry point is found at first use, preferring NCCL's strong pnccl* alias
// (2.16.2 and later) and falling back to the next nccl* definition after this library.
#include <dlfcn.h>
#include <nccl.h>

#include <atomic>

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

template <Fn id, typename Real, typename... A>
ncclResult_t intercept_nccl(Real real, std::uint64_t count, ncclDataType_t type, A... a) {
  if (real == nullptr) return ncclSystemError;
  if (!runtime().active.load(std::memory_order_acquire) || t_depth != 0) return real(a...);
  ++t_depth;
  // An NCCL call returns once the work is enqueued: this is the enqueue time. Completion on the
  // stream is the monitor's business (CUDA events), not the wrapper's.
  const std::uint64_t t0 = monitor::now_ns();
  const ncclResult_t result = real(a...);
  const std::uint64_t t1 = monitor::now_ns();
  monitor::CallStats& stats = runtime().counters->local()[index_of(id)];
  monitor::bump(stats.calls, 1);
  monitor::bump(stats.time_ns, t1 - t0);
  if (type != ncclNumTypes) monitor::bump(stats.bytes, count * nccl_type_size(type));
  --t_depth;
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
