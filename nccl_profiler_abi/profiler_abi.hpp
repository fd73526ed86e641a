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

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace commtap::nccl_profiler_abi {

// ---- Common types ------------------------------------------------------------------------

// ncclResult_t: a C enum, so int-sized. Only init's result matters to NCCL; every other entry
// point should return kSuccess (NCCL ignores it).
enum Result : int {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

// ncclDebugLogLevel (a C enum) and the subsystem flags of NCCL's logger.
enum DebugLogLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};
namespace log_subsys {
inline constexpr unsigned long kInit = 1, kColl = 2, kP2p = 4, kShm = 8, kNet = 16, kGraph = 32,
                               kTuning = 64, kEnv = 128, kAlloc = 256, kCall = 512, kProxy = 1024,
                               kNvls = 2048, kBootstrap = 4096, kReg = 8192, kAll = ~0ul;
}  // namespace log_subsys
using DebugLogger = void (*)(DebugLogLevel level, unsigned long flags, const char* file, int line,
                             const char* fmt, ...);

static_assert(sizeof(pid_t) == 4, "NCCL's proxyOp.pid is a 4-byte pid_t");
static_assert(sizeof(bool) == 1, "NCCL's bool fields are one byte (C _Bool)");

// ---- Event types: the bits of the activation mask and of Descr::type ----------------------
inline constexpr std::uint64_t kGroup = 1u << 0;          // v1+
inline constexpr std::uint64_t kColl = 1u << 1;           // v1+
inline constexpr std::uint64_t kP2p = 1u << 2;            // v1+
inline constexpr std::uint64_t kProxyOp = 1u << 3;        // v1+
inline constexpr std::uint64_t kProxyStep = 1u << 4;      // v1+
inline constexpr std::uint64_t kProxyCtrl = 1u << 5;      // v1+
inline constexpr std::uint64_t kKernelCh = 1u << 6;       // v3+
inline constexpr std::uint64_t kNetPlugin = 1u << 7;      // v3+
inline constexpr std::uint64_t kGroupApi = 1u << 8;       // v5+
inline constexpr std::uint64_t kCollApi = 1u << 9;        // v5+
inline constexpr std::uint64_t kP2pApi = 1u << 10;        // v5+
inline constexpr std::uint64_t kKernelLaunch = 1u << 11;  // v5+
inline constexpr std::uint64_t kCeColl = 1u << 12;        // v6+
inline constexpr std::uint64_t kCeSync = 1u << 13;        // v6+
inline constexpr std::uint64_t kCeBatch = 1u << 14;       // v6+
// Every event a version knows (the mask value NCCL's example uses to "enable all").
inline constexpr int kAllEventsV1V2 = 0x3f;
inline constexpr int kAllEventsV3V4 = 0xff;
inline constexpr int kAllEventsV5 = 0xfff;
inline constexpr int kAllEventsV6 = 0x7fff;

// Whether NCCL (2.28's rules) starts an event of `type` under the activation mask: its own bit,
// or the bit of an event below it, which implies its parents. KernelCh, NetPlugin, KernelLaunch
// and ProxyCtrl need their own bit. For a caller emulating NCCL.
constexpr bool nccl_starts(std::uint64_t type, std::uint64_t mask) {
  constexpr std::uint64_t kNet = kProxyOp | kProxyStep | kKernelCh | kNetPlugin;
  std::uint64_t implied_by = type;
  if (type == kGroupApi)
    implied_by = kGroupApi | kCollApi | kP2pApi | kKernelLaunch | kGroup | kColl | kP2p | kNet;
  else if (type == kCollApi)
    implied_by = kCollApi | kColl | kNet;
  else if (type == kP2pApi)
    implied_by = kP2pApi | kP2p | kNet;
  else if (type == kGroup)
    implied_by = kGroup | kColl | kP2p | kNet;
  else if (type == kColl)
    implied_by = kColl | kNet;
  else if (type == kP2p)
    implied_by = kP2p | kNet;
  else if (type == kProxyOp)
    implied_by = kProxyOp | kProxyStep | kNetPlugin;
  else if (type == kProxyStep)
    implied_by = kProxyStep | kNetPlugin;
  return (mask & implied_by) != 0;
}
static_assert(nccl_starts(kGroupApi, kProxyStep) && nccl_starts(kColl, kKernelCh) &&
              !nccl_starts(kKernelCh, kColl) && !nccl_starts(kKernelLaunch, kColl) &&
              !nccl_starts(kProxyCtrl, kAllEventsV5 & ~kProxyCtrl));

// ---- Event states (ncclProfilerEventState_t; int-sized, the same values in every version) --
enum EventState : int {
  // ProxyOp states of 2.23-2.26 (never emitted since 2.27).
  kProxyOpSendPosted = 0,
  kProxyOpSendRemFifoWait = 1,
  kProxyOpSendTransmitted = 2,
  kProxyOpSendDone = 3,
  kProxyOpRecvPosted = 4,
  kProxyOpRecvReceived = 5,
  kProxyOpRecvTransmitted = 6,
  kProxyOpRecvDone = 7,
  // ProxyStep states; each marks the start of a wait phase that ends at the next state or stop.
  kProxyStepSendGpuWait = 8,
  kProxyStepSendWait = 9,  // isend posted; args->proxyStep.transSize = this step's bytes (v4+)
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,  // test() done; args->proxyStep.transSize = bytes received (v4+)
  kProxyStepRecvGpuWait = 12,
  // ProxyCtrl states.
  kProxyCtrlIdle = 13,
  kProxyCtrlActive = 14,
  kProxyCtrlSleep = 15,
  kProxyCtrlWakeup = 16,
  kProxyCtrlAppend = 17,
  kProxyCtrlAppendEnd = 18,
  // v4+.
  kProxyOpInProgress = 19,
  kProxyStepSendPeerWait = 20,
  kNetPluginUpdate = 21,
  kKernelChStop = 22,  // args->kernelCh.pTimer = the GPU stop time
  // v5+ (args may be NULL): the ncclGroupStart part of a GroupApi event ended / ncclGroupEnd began.
  kGroupStartApiStop = 23,
  kGroupEndApiStart = 24,
  // v6+.
  kCeCollStart = 25,
  kCeCollComplete = 26,
  kCeSyncStart = 27,
  kCeSyncComplete = 28,
  kCeBatchStart = 29,
  kCeBatchComplete = 30,
};
static_assert(sizeof(EventState) == 4);

// ---- Payloads shared by several versions --------------------------------------------------
// One ProxyOp: a proxy sub-operation of one channel with one peer (every version).
struct ProxyOpDescr {
  pid_t pid;  // the enqueuing process: != getpid() under PXN, then parentObj is foreign
  std::uint8_t channelId;
  int peer;
  int nSteps;     // network transfers in the op
  int chunkSize;  // most bytes per transfer
  int isSend;     // 1 only for the NET transport's send side
};
static_assert(sizeof(ProxyOpDescr) == 24);
static_assert(offsetof(ProxyOpDescr, channelId) == 4 && offsetof(ProxyOpDescr, peer) == 8 &&
              offsetof(ProxyOpDescr, nSteps) == 12 && offsetof(ProxyOpDescr, chunkSize) == 16 &&
              offsetof(ProxyOpDescr, isSend) == 20);

struct ProxyStepDescr {
  int step;  // the transfer's index within its op, 0..nSteps-1
};

struct NetPluginDescr {
  std::int64_t id;  // bits 0-15 version, 16-31 type (IB 1<<16, socket 2<<16)
  void* data;
};
static_assert(sizeof(NetPluginDescr) == 16);

// State args of v1-v3 (16 bytes).
struct StateArgsProxyOpV1 {
  std::size_t transSize;
  int steps;
};
struct StateArgsProxyCtrl {
  int appendedProxyOps;
};
// State args of v4+ (8 bytes).
struct StateArgsProxyStep {
  std::size_t transSize;  // accurate at kProxyStepSendWait and kProxyStepRecvFlushWait only
};
struct StateArgsNetPlugin {
  void* data;
};
struct StateArgsKernelCh {
  std::uint64_t pTimer;  // GPU %globaltimer, ns
};

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

}  // namespace commtap::nccl_profiler_abi
