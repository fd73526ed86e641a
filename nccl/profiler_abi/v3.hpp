#pragma once
// NCCL's profiler plugin interface, Version 3 (NCCL 2.26): KernelCh and NetPlugin events.

#include "nccl/profiler_abi/v2.hpp"  // and the versions before it

namespace commtap::nccl::profiler_abi {

// ---- Version 3 (NCCL 2.26): KernelCh and NetPlugin events ---------------------------------
namespace v3 {
inline constexpr int kVersion = 3;
inline constexpr char kSymbol[] = "ncclProfiler_v3";
struct CollDescr {
  const char* name;
  std::uint64_t commHash;
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  std::uint8_t nMaxChannels;
  std::uint8_t nWarps;
  const char* algo;
  const char* proto;
};
using P2pDescr = v2::P2pDescr;
struct KernelChDescr {
  std::uint8_t channelId;
};
struct Descr {
  std::uint8_t type;
  void* parentObj;
  int rank;
  union {
    CollDescr coll;
    P2pDescr p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};
using StateArgs = v1::StateArgs;
using InitFn = Result (*)(void** context, int* eActivationMask);
struct Profiler {
  const char* name;
  InitFn init;
  Result (*startEvent)(void* context, void** eHandle, Descr* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};
static_assert(sizeof(Descr) == 120 && offsetof(Descr, coll) == 24);
static_assert(offsetof(CollDescr, seqNumber) == 16 && offsetof(CollDescr, func) == 24 &&
              offsetof(CollDescr, count) == 48 && offsetof(CollDescr, root) == 56 &&
              offsetof(CollDescr, datatype) == 64 && offsetof(CollDescr, nMaxChannels) == 72 &&
              offsetof(CollDescr, algo) == 80 && offsetof(CollDescr, proto) == 88);
}  // namespace v3

}  // namespace commtap::nccl::profiler_abi
