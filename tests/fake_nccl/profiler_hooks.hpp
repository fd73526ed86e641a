// The points where NCCL 2.28 calls a profiler plugin, as the fake reaches them. The comm,
// stream and collective code calls these and knows nothing of the plugin; profiler_hooks.cpp
// loads it (NCCL_PROFILER_PLUGIN) and turns the calls into its events, in NCCL's order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace fake_nccl {
struct Comm;
struct Op;
}  // namespace fake_nccl

namespace fake_nccl::profiler {

// A communicator's plugin context and its per-function sequence numbers.
struct CommContext;

// What the plugin was told about one operation (all null without a plugin).
struct OpEvents {
  int mask = 0;               // the activation mask when the operation was enqueued
  void* group_api = nullptr;  // the GroupApi event it belongs to
  void* api = nullptr;        // its CollApi or P2pApi event
  void* task = nullptr;       // its Coll or P2p event
  void* kernel = nullptr;     // its KernelCh event while the "kernel" runs
};

// One direction of traffic with one peer for one operation on one channel (NCCL's proxy op),
// filled in by the algorithm before proxy_op_start. Its steps are its chunks.
struct ProxyOp {
  static constexpr int kWindow = 8;  // NCCL_STEPS: steps posted ahead of the first not done
  Op* op = nullptr;
  int channel = 0;
  int peer = 0;
  bool send = false;
  int nsteps = 0;         // chunks this op will move in all
  std::size_t chunk = 0;  // bytes per full chunk
  int next_step = 0;      // advanced by the transfer engine
  // Set by the hooks.
  bool profiled = false;  // a NET peer with proxy events enabled
  int posted = 0;         // steps started (posted to the GPU / the network)
  int done = 0;           // steps stopped
  void* steps[kWindow] = {};
  std::size_t last_size = 0;  // NCCL's sub->transSize: the last SendWait's / RecvFlushWait's
  void* handle = nullptr;
};

// Communicators: once a comm is connected (init, split, shrink, init_all), and when it is
// destroyed or aborted.
void comm_init(Comm& comm);
void comm_finalize(Comm& comm);

// The API layer, on the application thread. Every operation runs inside a group (its own
// implicit one at least): api_op_start/api_op_stop around queueing it, at depth ncclGroupDepth;
// api_group_end at every group end, true when the GroupApi event's ncclGroupEnd has begun, after
// which the launch (if any) and api_group_stop follow.
void api_op_start(Op& op, int group_depth);
void api_op_stop(Op& op);
bool api_group_end();
void api_group_stop();

// The launch of one comm's operations on the application thread (KernelLaunch, Group and the
// Coll/P2p events): before the stream worker can see them.
void plan_launched(Comm& comm, std::span<Op* const> ops);

// On the stream worker: one channel of an operation's "kernel".
void kernel_channel_start(Op& op, int channel);
void kernel_channel_stop(Op& op, int channel);

// Proxy operations and their steps (one step = one chunk), raised as 2.28's net transport does
// (transport/net.cc: sendProxyProgress, recvProxyProgress): the op's start posts its first
// kWindow steps (send: start + SendGPUWait; receive: start + RecvWait), each step's stop posts
// the next one.
void proxy_op_start(ProxyOp& proxy);
void proxy_op_stop(ProxyOp& proxy);
// The chunk `step` begins to move: send: the GPU's data is there and goes to the network
// (SendPeerWait, SendWait with its size); receive: nothing (posted already). Returns the step's
// handle for the later calls (nullptr is fine).
void* proxy_step_ready(ProxyOp& proxy, int step, std::size_t bytes);
// Send: every byte is in the socket. Receive: every byte has arrived (RecvFlushWait with its
// size), handed to the "GPU" (RecvGPUWait).
void proxy_step_transmitted(ProxyOp& proxy, void* step, std::size_t bytes);
// Send: done. Receive: consumed (after the reduce). Posts the next step of the window.
void proxy_step_stop(ProxyOp& proxy, void* step);

}  // namespace fake_nccl::profiler
