#pragma once
// NCCL's profiler plugin interface, Version 5 (NCCL 2.28): API events, a 64-bit type, commId second
// in init.

#include "nccl/profiler_abi/v4.hpp"  // and the versions before it

namespace commtap::nccl::profiler_abi {

// ---- Version 5 (NCCL 2.28): API events, a 64-bit type, commId second in init ---------------
namespace v5 {
inline constexpr int kVersion = 5;
inline constexpr char kSymbol[] = "ncclProfiler_v5";
struct GroupApiDescr {
  bool graphCaptured;
  int groupDepth;  // 1 for a bare call, >= 2 inside a user's ncclGroupStart
};
struct CollApiDescr {
  const char* func;
  std::size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
};
struct P2pApiDescr {
  const char* func;
  std::size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
};
struct KernelLaunchDescr {
  void* stream;
};
struct CollDescr {
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  std::uint8_t nChannels;
  std::uint8_t nWarps;
  const char* algo;
  const char* proto;
  void* parentGroup;  // the Group handle (parentObj is the CollApi handle)
};
struct P2pDescr {
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
  std::uint8_t nChannels;
  void* parentGroup;
};
using KernelChDescr = v4::KernelChDescr;
struct Descr {
  std::uint64_t type;
  void* parentObj;
  int rank;  // set for Coll, P2p, ProxyOp, ProxyStep, NetPlugin only
  union {
    GroupApiDescr groupApi;
    CollApiDescr collApi;
    P2pApiDescr p2pApi;
    KernelLaunchDescr kernelLaunch;
    CollDescr coll;
    P2pDescr p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
  };
};
using StateArgs = v4::StateArgs;
using InitFn = Result (*)(void** context, std::uint64_t commId, int* eActivationMask,
                          const char* commName, int nNodes, int nranks, int rank,
                          DebugLogger logfn);
struct Profiler {
  const char* name;
  InitFn init;
  Result (*startEvent)(void* context, void** eHandle, Descr* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};
static_assert(sizeof(Descr) == 112 && offsetof(Descr, coll) == 24);
static_assert(offsetof(GroupApiDescr, groupDepth) == 4);
static_assert(offsetof(CollApiDescr, root) == 24 && offsetof(CollApiDescr, stream) == 32 &&
              offsetof(CollApiDescr, graphCaptured) == 40);
static_assert(offsetof(P2pApiDescr, stream) == 24 && offsetof(P2pApiDescr, graphCaptured) == 32);
static_assert(offsetof(CollDescr, func) == 8 && offsetof(CollDescr, count) == 32 &&
              offsetof(CollDescr, root) == 40 && offsetof(CollDescr, datatype) == 48 &&
              offsetof(CollDescr, nChannels) == 56 && offsetof(CollDescr, nWarps) == 57 &&
              offsetof(CollDescr, algo) == 64 && offsetof(CollDescr, proto) == 72 &&
              offsetof(CollDescr, parentGroup) == 80);
static_assert(offsetof(P2pDescr, peer) == 32 && offsetof(P2pDescr, nChannels) == 36 &&
              offsetof(P2pDescr, parentGroup) == 40);
}  // namespace v5

}  // namespace commtap::nccl::profiler_abi
