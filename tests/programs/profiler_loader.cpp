// Loads a profiler plugin the way NCCL does and drives it through NCCL's event order
// (tests/mpi/nccl_profiler.sh): dlopen(RTLD_NOW | RTLD_LOCAL), dlsym of the ncclProfiler_vN data
// objects, then init, a few ring all-reduces with their proxy operations, steps and kernel
// channels, one point-to-point message, finalize and dlclose. No NCCL, no GPU, no MPI.
//
// profiler_loader LIBRARY VERSION RANK NRANKS COMM_HASH COLLECTIVES
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nccl/profiler_abi.hpp"

namespace {

namespace abi = commtap::nccl::profiler_abi;

std::uint64_t realtime_ns() {  // stands in for the GPU's %globaltimer
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000 +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void logger(abi::DebugLogLevel, unsigned long, const char* file, int line, const char* fmt, ...) {
  std::va_list args;
  va_start(args, fmt);
  std::fprintf(stderr, "plugin log %s:%d: ", file, line);
  std::vfprintf(stderr, fmt, args);
  std::fputc('\n', stderr);
  va_end(args);
}

struct Job {
  int rank = 0, nranks = 1;
  std::uint64_t hash = 0;
  int collectives = 1;
};

template <int V>
int drive(void* library, const Job& job) {
  using Descr = typename abi::Version<V>::Descr;
  using Args = typename abi::Version<V>::StateArgs;
  auto* plugin =
      static_cast<typename abi::Version<V>::Profiler*>(dlsym(library, abi::Version<V>::kSymbol));
  if (plugin == nullptr) {
    std::printf("no %s\n", abi::Version<V>::kSymbol);
    return 1;
  }
  void* context = nullptr;
  int mask = 0;
  abi::Result result = abi::kSuccess;
  if constexpr (V >= 5)
    result = plugin->init(&context, job.hash, &mask, "loader", 1, job.nranks, job.rank, logger);
  else if constexpr (V == 4)
    result = plugin->init(&context, &mask, "loader", job.hash, 1, job.nranks, job.rank, logger);
  else
    result = plugin->init(&context, &mask);
  std::printf("init v%d: result %d, mask %d, context %s\n", V, static_cast<int>(result), mask,
              context != nullptr ? "set" : "null");
  if (result != abi::kSuccess) return 1;

  auto start = [&](Descr d) {
    void* handle = nullptr;
    // NCCL starts an event when its bit is in the mask, its parents also for their children's.
    if (!abi::nccl_starts(static_cast<std::uint64_t>(d.type), static_cast<std::uint64_t>(mask)))
      return handle;
    d.rank = job.rank;
    plugin->startEvent(context, &handle, &d);
    return handle;
  };
  auto stop = [&](void* h) {
    if (h != nullptr) plugin->stopEvent(h);
  };
  auto state = [&](void* h, abi::EventState s, Args* a) {
    if (h != nullptr) plugin->recordEventState(h, s, a);
  };
  const int next = (job.rank + 1) % job.nranks;
  const int prev = (job.rank + job.nranks - 1) % job.nranks;
  const bool network = job.nranks > 1;

  // One proxy operation of `steps` network steps.
  auto proxy = [&](void* parent, int peer, bool send, int channel, std::size_t step_bytes) {
    Descr op{};
    op.type = abi::kProxyOp;
    op.parentObj = parent;
    op.proxyOp.pid = getpid();
    op.proxyOp.channelId = static_cast<std::uint8_t>(channel);
    op.proxyOp.peer = peer;
    op.proxyOp.nSteps = 2;
    op.proxyOp.chunkSize = static_cast<int>(step_bytes);
    op.proxyOp.isSend = send ? 1 : 0;
    void* h = start(op);
    if constexpr (V >= 4) {
      Args zero{};
      state(h, abi::kProxyOpInProgress, &zero);
    }
    for (int i = 0; i < 2; ++i) {
      Descr s{};
      s.type = abi::kProxyStep;
      s.parentObj = h;
      s.proxyStep.step = i;
      void* step = start(s);
      Args a{};
      if constexpr (V >= 4) a.proxyStep.transSize = step_bytes;
      if (h != nullptr) {  // NCCL records step states only under a live op
        if (send) {
          state(step, abi::kProxyStepSendGpuWait, &a);
          state(step, abi::kProxyStepSendPeerWait, &a);
          state(step, abi::kProxyStepSendWait, &a);
        } else {
          state(step, abi::kProxyStepRecvWait, &a);
          usleep(50);
          state(step, abi::kProxyStepRecvFlushWait, &a);
          state(step, abi::kProxyStepRecvGpuWait, &a);
        }
      }
      usleep(50);
      stop(step);
    }
    if constexpr (V <= 3) {
      Args a{};
      a.proxyOp.transSize = 2 * step_bytes;
      state(h, send ? abi::kProxyOpSendDone : abi::kProxyOpRecvDone, &a);
    }
    return h;
  };

  for (int i = 0; i < job.collectives; ++i) {
    // Application thread: ncclAllReduce(1024 floats) on a blocking communicator.
    void* group_api = nullptr;
    void* coll_api = nullptr;
    if constexpr (V >= 5) {
      Descr ga{};
      ga.type = abi::kGroupApi;
      ga.groupApi.groupDepth = 1;
      group_api = start(ga);
      state(group_api, abi::kGroupStartApiStop, nullptr);
      Descr ca{};
      ca.type = abi::kCollApi;
      ca.parentObj = group_api;
      ca.collApi.func = "AllReduce";
      ca.collApi.count = 1024;
      ca.collApi.datatype = "ncclFloat32";
      coll_api = start(ca);
      stop(coll_api);  // before the Coll event starts: children outlive their parents
      state(group_api, abi::kGroupEndApiStart, nullptr);
      Descr kl{};
      kl.type = abi::kKernelLaunch;
      kl.parentObj = group_api;
      stop(start(kl));
    }
    Descr g{};
    g.type = abi::kGroup;
    void* group = start(g);
    Descr c{};
    c.type = abi::kColl;
    c.parentObj = V >= 5 ? coll_api : group;
    c.coll.count = 1024;
    c.coll.seqNumber = static_cast<std::uint64_t>(i);
    if constexpr (V == 1) {
      c.coll.commHash = job.hash;
      c.coll.func = abi::v1::kFuncAllReduce;
      c.coll.datatype = 7;  // ncclFloat32
      c.coll.nMaxChannels = 1;
    } else {
      c.coll.func = "AllReduce";
      c.coll.datatype = "ncclFloat32";
      c.coll.algo = "RING";
      c.coll.proto = "SIMPLE";
      if constexpr (V <= 3) {
        c.coll.commHash = job.hash;
        c.coll.nMaxChannels = 1;
      } else {
        c.coll.nChannels = 1;
      }
      if constexpr (V >= 5) c.coll.parentGroup = group;
    }
    void* coll = start(c);
    stop(coll);
    stop(group);
    stop(group_api);

    // Proxy thread: the ring's send to the next rank and receive from the previous one, then
    // the kernel's channel 0 as the profiler's proxy op sees it.
    void* send = network ? proxy(coll, next, true, 0, 2048) : nullptr;
    void* recv = network ? proxy(coll, prev, false, 0, 2048) : nullptr;
    if constexpr (V >= 3) {
      Descr k{};
      k.type = abi::kKernelCh;
      k.parentObj = coll;
      k.kernelCh.channelId = 0;
      if constexpr (V >= 4) k.kernelCh.pTimer = realtime_ns() - 200'000;
      void* kernel = start(k);
      usleep(100);
      Args a{};
      if constexpr (V >= 4) a.kernelCh.pTimer = realtime_ns() - 20'000;
      if constexpr (V >= 4) state(kernel, abi::kKernelChStop, &a);
      stop(kernel);
    }
    stop(send);
    stop(recv);
  }

  // One point-to-point message: rank 0 sends to rank 1.
  if (network && job.rank <= 1) {
    Descr p{};
    p.type = abi::kP2p;
    p.p2p.count = 256;
    p.p2p.peer = job.rank == 0 ? 1 : 0;
    if constexpr (V == 1) {
      p.p2p.commHash = job.hash;
      p.p2p.func = job.rank == 0 ? abi::v1::kFuncSend : abi::v1::kFuncRecv;
      p.p2p.datatype = 0;
    } else {
      if constexpr (V <= 3) p.p2p.commHash = job.hash;
      p.p2p.func = job.rank == 0 ? "Send" : "Recv";
      p.p2p.datatype = "ncclInt8";
    }
    void* h = start(p);
    stop(h);
    stop(proxy(h, p.p2p.peer, job.rank == 0, 1, 128));
  }
  plugin->finalize(context);
  std::printf("events sent\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s LIBRARY VERSION RANK NRANKS COMM_HASH COLLECTIVES\n", argv[0]);
    return 2;
  }
  const int version = std::atoi(argv[2]);
  Job job;
  job.rank = std::atoi(argv[3]);
  job.nranks = std::atoi(argv[4]);
  job.hash = std::strtoull(argv[5], nullptr, 0);
  job.collectives = std::atoi(argv[6]);
  // As NCCL opens NCCL_PROFILER_PLUGIN.
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::printf("dlopen failed: %s\n", dlerror());
    return 3;
  }
  for (const char* symbol : abi::kSymbolsNewestFirst) {
    const auto* table = static_cast<const abi::v1::Profiler*>(dlsym(library, symbol));
    std::printf("%s: %s\n", symbol, table != nullptr && table->name != nullptr ? table->name : "-");
  }
  int rc = 1;
  switch (version) {
    case 1:
      rc = drive<1>(library, job);
      break;
    case 2:
      rc = drive<2>(library, job);
      break;
    case 3:
      rc = drive<3>(library, job);
      break;
    case 4:
      rc = drive<4>(library, job);
      break;
    case 5:
      rc = drive<5>(library, job);
      break;
    case 6:
      rc = drive<6>(library, job);
      break;
    default:
      std::fprintf(stderr, "no version %d\n", version);
      return 2;
  }
  // NCCL unloads the plugin with its last communicator; commtap must stay (its writer runs).
  dlclose(library);
  return rc;
}
