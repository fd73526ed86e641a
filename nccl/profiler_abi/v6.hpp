#pragma once
// NCCL's profiler plugin interface, Version 6 (NCCL 2.29+): copy-engine collectives.

#include "nccl/profiler_abi/v5.hpp"  // and the versions before it

namespace commtap::nccl::profiler_abi {

// ---- Version 6 (NCCL 2.29+): copy-engine collectives --------------------------------------
namespace v6 {
inline constexpr int kVersion = 6;
inline constexpr char kSymbol[] = "ncclProfiler_v6";
using v5::CollApiDescr;
using v5::CollDescr;
using v5::GroupApiDescr;
using v5::KernelChDescr;
using v5::KernelLaunchDescr;
using v5::P2pApiDescr;
using v5::P2pDescr;
struct CeCollDescr {
  std::uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  std::uint32_t batchSize;
  std::uint32_t numBatches;
  std::uint32_t ceSeqNum;
  void* stream;
};
struct CeCollSyncDescr {
  bool isComplete;
  int nRanks;
};
struct CeCollBatchDescr {
  int numOps;
  std::size_t totalBytes;
  bool useIntraSync;
};
struct Descr {
  std::uint64_t type;
  void* parentObj;
  int rank;
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
    CeCollDescr ceColl;
    CeCollSyncDescr ceCollSync;
    CeCollBatchDescr ceCollBatch;
  };
};
using StateArgs = v4::StateArgs;
using InitFn = v5::InitFn;
struct Profiler {
  const char* name;
  InitFn init;
  Result (*startEvent)(void* context, void** eHandle, Descr* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};
static_assert(sizeof(CeCollDescr) == 88 && offsetof(CeCollDescr, intraBatchSync) == 64 &&
              offsetof(CeCollDescr, stream) == 80);
static_assert(sizeof(Descr) == 112 && offsetof(Descr, coll) == 24);
}  // namespace v6

// Every version's table is 6 pointers; the descriptors share the header (type, parent, rank).
static_assert(sizeof(v1::Profiler) == 48 && sizeof(v4::Profiler) == 48 &&
              sizeof(v6::Profiler) == 48);
static_assert(offsetof(v1::Descr, proxyOp) == 24 && offsetof(v5::Descr, proxyOp) == 24 &&
              offsetof(v5::Descr, kernelCh) == 24 && offsetof(v5::Descr, rank) == 16);

}  // namespace commtap::nccl::profiler_abi
