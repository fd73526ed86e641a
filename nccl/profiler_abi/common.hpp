#pragma once
// NCCL's profiler plugin interface, the parts every version shares: the result codes, the
// logger, the event type bits, the event states and the payloads several versions carry. The
// versions' own layouts are in v1.hpp .. v6.hpp, as NCCL keeps one header per version
// (ext-profiler/profiler_v1.h ..); nccl/profiler_abi.hpp includes them all.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace commtap::nccl::profiler_abi {

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

}  // namespace commtap::nccl::profiler_abi
