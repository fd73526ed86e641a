#pragma once
// NCCL's profiler plugin interface, Version 4 (NCCL 2.27): init gets the communicator; no name/hash
// per event.

#include "nccl/profiler_abi/v3.hpp"  // and the versions before it

namespace commtap::nccl::profiler_abi {

// ---- Version 4 (NCCL 2.27): init gets the communicator; no name/hash per event -------------
namespace v4 {
inline constexpr int kVersion = 4;
inline constexpr char kSymbol[] = "ncclProfiler_v4";
struct CollDescr {
  std::uint64_t seqNumber;  // per communicator and function, equal on all ranks, from 0
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;  // bytes for AllGather and Broadcast (datatype "ncclInt8")
  int root;
  const char* datatype;
  std::uint8_t nChannels;
  std::uint8_t nWarps;
  const char* algo;
  const char* proto;
};
struct P2pDescr {
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
  std::uint8_t nChannels;  // garbage when adapted by 2.28
};
struct KernelChDescr {
  std::uint8_t channelId;
  std::uint64_t pTimer;  // GPU %globaltimer at the start of the channel's work, ns
};
struct Descr {
  std::uint8_t type;
  void* parentObj;  // Coll/P2p: the Group handle
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
union StateArgs {
  StateArgsProxyStep proxyStep;
  StateArgsProxyCtrl proxyCtrl;
  StateArgsNetPlugin netPlugin;
  StateArgsKernelCh kernelCh;
};
using InitFn = Result (*)(void** context, int* eActivationMask, const char* commName,
                          std::uint64_t commHash, int nNodes, int nranks, int rank,
                          DebugLogger logfn);
struct Profiler {
  const char* name;
  InitFn init;
  Result (*startEvent)(void* context, void** eHandle, Descr* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};
static_assert(sizeof(Descr) == 104 && offsetof(Descr, coll) == 24);
static_assert(offsetof(CollDescr, func) == 8 && offsetof(CollDescr, count) == 32 &&
              offsetof(CollDescr, root) == 40 && offsetof(CollDescr, datatype) == 48 &&
              offsetof(CollDescr, nChannels) == 56 && offsetof(CollDescr, nWarps) == 57 &&
              offsetof(CollDescr, algo) == 64 && offsetof(CollDescr, proto) == 72);
static_assert(offsetof(P2pDescr, count) == 24 && offsetof(P2pDescr, peer) == 32 &&
              offsetof(P2pDescr, nChannels) == 36);
static_assert(offsetof(KernelChDescr, pTimer) == 8);
static_assert(sizeof(StateArgs) == 8);
}  // namespace v4

}  // namespace commtap::nccl::profiler_abi
