#pragma once
// NCCL's profiler plugin interface, Version 2 (NCCL 2.24, 2.25): strings instead of codes.

#include "nccl/profiler_abi/v1.hpp"  // and the versions before it

namespace commtap::nccl::profiler_abi {

// ---- Version 2 (NCCL 2.24, 2.25): strings instead of codes --------------------------------
namespace v2 {
inline constexpr int kVersion = 2;
inline constexpr char kSymbol[] = "ncclProfiler_v2";
struct CollDescr {
  const char* name;
  std::uint64_t commHash;
  std::uint64_t seqNumber;
  const char* func;  // "AllReduce", ... (static strings)
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;      // "ncclFloat32", ...
  std::size_t trafficBytes;  // 0 when adapted by a newer NCCL
  std::uint8_t nMaxChannels;
  std::uint8_t nWarps;
  const char* algo;   // "RING", ...
  const char* proto;  // "SIMPLE", ...
};
struct P2pDescr {
  const char* name;
  std::uint64_t commHash;
  const char* func;
  void* buff;
  const char* datatype;
  std::size_t count;
  int peer;
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
static_assert(sizeof(Descr) == 128 && offsetof(Descr, coll) == 24);
static_assert(offsetof(CollDescr, seqNumber) == 16 && offsetof(CollDescr, func) == 24 &&
              offsetof(CollDescr, count) == 48 && offsetof(CollDescr, root) == 56 &&
              offsetof(CollDescr, datatype) == 64 && offsetof(CollDescr, trafficBytes) == 72 &&
              offsetof(CollDescr, nMaxChannels) == 80 && offsetof(CollDescr, algo) == 88 &&
              offsetof(CollDescr, proto) == 96);
static_assert(offsetof(P2pDescr, func) == 16 && offsetof(P2pDescr, count) == 40 &&
              offsetof(P2pDescr, peer) == 48);
}  // namespace v2

}  // namespace commtap::nccl::profiler_abi
