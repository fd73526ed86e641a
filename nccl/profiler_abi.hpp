#pragma once
// commtap's own declarations of NCCL's profiler plugin interface, versions 1 to 6, written from
// the layouts NCCL's releases use (2.23: v1, 2.24/2.25: v2, 2.26: v3, 2.27: v4, 2.28: v5,
// 2.29+: v6). They are ABI-compatible with NCCL's: a plugin exports a `Profiler` table of one
// version under that version's symbol name, and NCCL (or a fake of it) dlsym's the data object
// and calls through it. No nccl.h needed: the result enum and the logger are declared here, in
// this namespace, so this header can sit beside nccl.h in the same translation unit.
//
// Both sides use it:
//   plugin:  extern "C" v5::Profiler ncclProfiler_v5 = {"name", init, start, stop, record, fin};
//   caller:  auto* p = static_cast<v5::Profiler*>(dlsym(lib, v5::kSymbol));
//            v5::Descr d{}; d.type = kColl; d.coll.seqNumber = 0; ... p->startEvent(ctx, &h, &d);
// `Version<N>` gives the same types by number, for code templated over the version.
//
// The static_asserts pin sizes and offsets to x86-64 / aarch64 LP64 (the only ABIs NCCL ships).

#include "nccl/profiler_abi/v1.hpp"
#include "nccl/profiler_abi/v2.hpp"
#include "nccl/profiler_abi/v3.hpp"
#include "nccl/profiler_abi/v4.hpp"
#include "nccl/profiler_abi/v5.hpp"
#include "nccl/profiler_abi/v6.hpp"

namespace commtap::nccl::profiler_abi {

// ---- By number ----------------------------------------------------------------------------
template <int N>
struct Version;
#define COMMTAP_NCCL_PROFILER_VERSION(N)                  \
  template <>                                             \
  struct Version<N> {                                     \
    static constexpr int kVersion = N;                    \
    static constexpr const char* kSymbol = v##N::kSymbol; \
    using Descr = v##N::Descr;                            \
    using StateArgs = v##N::StateArgs;                    \
    using InitFn = v##N::InitFn;                          \
    using Profiler = v##N::Profiler;                      \
  };
COMMTAP_NCCL_PROFILER_VERSION(1)
COMMTAP_NCCL_PROFILER_VERSION(2)
COMMTAP_NCCL_PROFILER_VERSION(3)
COMMTAP_NCCL_PROFILER_VERSION(4)
COMMTAP_NCCL_PROFILER_VERSION(5)
COMMTAP_NCCL_PROFILER_VERSION(6)
#undef COMMTAP_NCCL_PROFILER_VERSION

// The symbols NCCL 2.29+ tries, in its order (older releases start further down the list).
inline constexpr const char* kSymbolsNewestFirst[] = {v6::kSymbol, v5::kSymbol, v4::kSymbol,
                                                      v3::kSymbol, v2::kSymbol, v1::kSymbol};

}  // namespace commtap::nccl::profiler_abi
