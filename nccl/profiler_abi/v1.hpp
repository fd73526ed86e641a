#pragma once
// NCCL's profiler plugin interface, Version 1 (NCCL 2.23).

#include "nccl/profiler_abi/common.hpp"

namespace commtap::nccl::profiler_abi {

// ---- Version 1 (NCCL 2.23) ---------------------------------------------------------------
namespace v1 {
inline constexpr int kVersion = 1;
inline constexpr char kSymbol[] = "ncclProfiler_v1";
// Numeric codes v1 carries instead of strings.
enum Func : std::uint8_t {
  kFuncBroadcast = 0,
  kFuncReduce = 1,
  kFuncAllGather = 2,
  kFuncReduceScatter = 3,
  kFuncAllReduce = 4,
  kFuncSendRecv = 5,
  kFuncSend = 6,
  kFuncRecv = 7,
};
enum Algo : std::uint8_t {
  kAlgoTree = 0,
  kAlgoRing = 1,
  kAlgoCollnetDirect = 2,
  kAlgoCollnetChain = 3,
  kAlgoNvls = 4,
  kAlgoNvlsTree = 5,
  kAlgoPat = 6,
};
enum Proto : std::uint8_t { kProtoLl = 0, kProtoLl128 = 1, kProtoSimple = 2 };

struct CollDescr {
  const char* name;  // the communicator's name
  std::uint64_t commHash;
  std::uint64_t seqNumber;
  std::uint8_t func;  // Func
  const void* sendBuff;
  void* recvBuff;
  std::size_t count;
  int root;
  std::uint8_t datatype;  // ncclDataType_t
  std::uint32_t op;
  std::size_t trafficBytes;
  std::uint8_t nMaxChannels;
  std::uint8_t nWarps;
  std::uint8_t algo;   // Algo
  std::uint8_t proto;  // Proto
  int isCollnet;
  int isNvls;
};
struct P2pDescr {
  const char* name;
  std::uint64_t commHash;
  std::uint8_t func;
  void* buff;
  std::uint8_t datatype;
  std::size_t count;
  int peer;
};
struct Descr {
  std::uint8_t type;  // one of the event bits; bytes 1-7 are padding
  void* parentObj;
  int rank;
  union {
    CollDescr coll;
    P2pDescr p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
  };
};
union StateArgs {
  StateArgsProxyOpV1 proxyOp;
  StateArgsProxyCtrl proxyCtrl;
};
using InitFn = Result (*)(void** context, int* eActivationMask);
struct Profiler {
  const char* name;
  InitFn init;
  Result (*startEvent)(void* context, void** eHandle, Descr* eDescr);
  Result (*stopEvent)(void* eHandle);
  Result (*recordEventState)(void* eHandle, EventState eState, StateArgs* eStateArgs);
  Result (*finalize)(void* context);
};
static_assert(sizeof(Descr) == 120);
static_assert(offsetof(Descr, parentObj) == 8 && offsetof(Descr, rank) == 16 &&
              offsetof(Descr, coll) == 24);
static_assert(offsetof(CollDescr, seqNumber) == 16 && offsetof(CollDescr, func) == 24 &&
              offsetof(CollDescr, count) == 48 && offsetof(CollDescr, root) == 56 &&
              offsetof(CollDescr, datatype) == 60 && offsetof(CollDescr, op) == 64 &&
              offsetof(CollDescr, trafficBytes) == 72 && offsetof(CollDescr, nMaxChannels) == 80 &&
              offsetof(CollDescr, algo) == 82 && offsetof(CollDescr, proto) == 83 &&
              offsetof(CollDescr, isCollnet) == 84 && offsetof(CollDescr, isNvls) == 88);
static_assert(offsetof(P2pDescr, func) == 16 && offsetof(P2pDescr, buff) == 24 &&
              offsetof(P2pDescr, datatype) == 32 && offsetof(P2pDescr, count) == 40 &&
              offsetof(P2pDescr, peer) == 48);
static_assert(sizeof(StateArgs) == 16);
}  // namespace v1

}  // namespace commtap::nccl::profiler_abi
