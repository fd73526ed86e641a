// A v5 profiler plugin that checks the proxy events it is given against the sequence NCCL 2.28
// and 2.30 raise for a network transfer (docs/nccl.md, "What NCCL raises for a network
// transfer"; transport/net.cc's sendProxyProgress and recvProxyProgress):
//   - a ProxyOp's InProgress comes before its first step;
//   - steps start in order 0, 1, ..., nSteps-1 (a receive may start the same step again before
//     its RecvWait), each with the op as parent;
//   - steps are posted ahead: when a step's data moves (SendWait, RecvFlushWait), every step the
//     window allows (min(nSteps, stopped + 8)) has been started;
//   - send: start, SendGPUWait, SendPeerWait (one or more), SendWait (transSize in 1..chunkSize),
//     stop; receive: start, RecvWait, RecvFlushWait (transSize in 1..chunkSize), RecvGPUWait,
//     stop; every step stopped before its op, and the op has all its steps.
// At finalize each process prints one line to stderr:
//   profiler_spy: <ops> ops, <steps> steps, <n> violations
// followed by the first violations. Used by tests/mpi/nccl_proxy_sequence.sh on the fake NCCL.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "nccl/profiler_abi.hpp"

namespace {

namespace abi = commtap::nccl::profiler_abi;
namespace v5 = abi::v5;

constexpr int kWindow = 8;

struct Op {
  bool send = false;
  int nsteps = 0;
  int chunk = 0;
  bool in_progress = false;
  int started = 0;  // steps started (distinct)
  int stopped = 0;
};
// Per step: how far its states went.
enum class Phase { started, gpu_or_recv_wait, peer_wait, moved, gpu_wait, stopped };
struct Step {
  Op* op = nullptr;
  int index = 0;
  Phase phase = Phase::started;
};

std::mutex g_mutex;
std::vector<std::string> g_violations;
long g_ops = 0, g_steps = 0;
int g_task = 0;  // the parent handle given to Coll and P2p events

void violation(const std::string& what) {
  g_violations.push_back(what);
}

abi::Result init(void** context, std::uint64_t, int* mask, const char*, int, int, int,
                 abi::DebugLogger) {
  *context = &g_task;
  *mask = static_cast<int>(abi::kColl | abi::kP2p | abi::kProxyOp | abi::kProxyStep);
  return abi::kSuccess;
}

abi::Result start_event(void*, void** handle, v5::Descr* d) {
  *handle = nullptr;
  std::lock_guard lock(g_mutex);
  if (d->type == abi::kColl || d->type == abi::kP2p) {
    *handle = &g_task;
  } else if (d->type == abi::kProxyOp) {
    if (d->parentObj != &g_task) violation("ProxyOp without its task as parent");
    auto* op = new Op;
    op->send = d->proxyOp.isSend != 0;
    op->nsteps = d->proxyOp.nSteps;
    op->chunk = d->proxyOp.chunkSize;
    ++g_ops;
    *handle = op;
  } else if (d->type == abi::kProxyStep) {
    auto* op = static_cast<Op*>(d->parentObj);
    if (op == nullptr) return abi::kSuccess;
    const int k = d->proxyStep.step;
    if (!op->in_progress) violation("step started before the op's InProgress");
    if (k == op->started - 1 && !op->send) {
      // A receive whose post failed starts the step again.
    } else if (k != op->started) {
      violation("step " + std::to_string(k) + " started, expected " + std::to_string(op->started));
    } else {
      ++op->started;
      ++g_steps;
    }
    if (k >= op->nsteps) violation("step beyond nSteps");
    if (op->started > op->stopped + kWindow) violation("more than 8 steps in flight");
    *handle = new Step{op, k};
  }
  return abi::kSuccess;
}

// Ops and steps share stop_event; the plugin keeps them apart by registering the handles.
std::vector<void*> g_op_handles;

bool is_op(void* handle) {
  for (void* h : g_op_handles)
    if (h == handle) return true;
  return false;
}

abi::Result start_event_tracked(void* context, void** handle, v5::Descr* d) {
  start_event(context, handle, d);
  if (d->type == abi::kProxyOp && *handle != nullptr) {
    std::lock_guard lock(g_mutex);
    g_op_handles.push_back(*handle);
  }
  return abi::kSuccess;
}

abi::Result stop_tracked(void* handle) {
  if (handle == nullptr || handle == &g_task) return abi::kSuccess;
  std::lock_guard lock(g_mutex);
  if (is_op(handle)) {
    auto* op = static_cast<Op*>(handle);
    if (op->started != op->nsteps) violation("op stopped with steps never started");
    if (op->stopped != op->started) violation("op stopped before its steps");
    std::erase(g_op_handles, handle);
    delete op;
    return abi::kSuccess;
  }
  auto* step = static_cast<Step*>(handle);
  const Phase done_before_stop = step->op->send ? Phase::moved : Phase::gpu_wait;
  if (step->phase != done_before_stop)
    violation(std::string(step->op->send ? "send" : "receive") + " step stopped in phase " +
              std::to_string(static_cast<int>(step->phase)));
  if (step->index != step->op->stopped) violation("steps stopped out of order");
  ++step->op->stopped;
  delete step;
  return abi::kSuccess;
}

abi::Result record(void* handle, abi::EventState state, v5::StateArgs* args) {
  if (handle == nullptr || handle == &g_task) return abi::kSuccess;
  std::lock_guard lock(g_mutex);
  if (is_op(handle)) {
    auto* op = static_cast<Op*>(handle);
    if (state != abi::kProxyOpInProgress) violation("op state " + std::to_string(state));
    if (op->started != 0) violation("InProgress after a step");
    op->in_progress = true;
    return abi::kSuccess;
  }
  auto* step = static_cast<Step*>(handle);
  Op& op = *step->op;
  const std::size_t size = args != nullptr ? args->proxyStep.transSize : 0;
  auto expect = [&](Phase from, Phase to, const char* name) {
    if (step->phase != from)
      violation(std::string(name) + " in phase " + std::to_string(static_cast<int>(step->phase)));
    step->phase = to;
  };
  auto window_full = [&](const char* name) {
    const int allowed = std::min(op.nsteps, op.stopped + kWindow);
    if (op.started != allowed)
      violation(std::string(name) + " with " + std::to_string(op.started) +
                " steps posted, NCCL posts " + std::to_string(allowed));
  };
  auto sized = [&](const char* name) {
    if (size == 0 || size > static_cast<std::size_t>(op.chunk))
      violation(std::string(name) + " transSize " + std::to_string(size));
  };
  switch (state) {
    case abi::kProxyStepSendGpuWait:
      expect(Phase::started, Phase::gpu_or_recv_wait, "SendGPUWait");
      break;
    case abi::kProxyStepSendPeerWait:
      if (step->phase != Phase::peer_wait)
        expect(Phase::gpu_or_recv_wait, Phase::peer_wait, "SendPeerWait");
      break;
    case abi::kProxyStepSendWait:
      expect(Phase::peer_wait, Phase::moved, "SendWait");
      window_full("SendWait");
      sized("SendWait");
      break;
    case abi::kProxyStepRecvWait:
      expect(Phase::started, Phase::gpu_or_recv_wait, "RecvWait");
      break;
    case abi::kProxyStepRecvFlushWait:
      expect(Phase::gpu_or_recv_wait, Phase::moved, "RecvFlushWait");
      window_full("RecvFlushWait");
      sized("RecvFlushWait");
      break;
    case abi::kProxyStepRecvGpuWait:
      expect(Phase::moved, Phase::gpu_wait, "RecvGPUWait");
      break;
    default:
      violation("step state " + std::to_string(state));
  }
  if (op.send != (state == abi::kProxyStepSendGpuWait || state == abi::kProxyStepSendPeerWait ||
                  state == abi::kProxyStepSendWait))
    violation("a state of the other direction");
  return abi::kSuccess;
}

abi::Result finalize(void*) {
  std::lock_guard lock(g_mutex);
  std::fprintf(stderr, "profiler_spy: %ld ops, %ld steps, %zu violations\n", g_ops, g_steps,
               g_violations.size());
  for (std::size_t i = 0; i < g_violations.size() && i < 10; ++i)
    std::fprintf(stderr, "profiler_spy: %s\n", g_violations[i].c_str());
  return abi::kSuccess;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) v5::Profiler ncclProfiler_v5 = {
    "profiler_spy", init, start_event_tracked, stop_tracked, record, finalize};
}
