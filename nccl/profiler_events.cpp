// NCCL profiler plugin events -> commtap records (nccl/profiler_events.hpp).
#include "nccl/profiler_events.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>

#include "monitor/sampling.hpp"
#include "nccl/datatypes.hpp"
#include "nccl/event_pool.hpp"
#include "nccl/functions.hpp"

namespace commtap::nccl::profiler {

namespace {

using namespace event_pool;

std::uint64_t no_clock() noexcept {
  return 0;
}
void no_record(const monitor::InstanceRecord&) noexcept {}

// Set before the first init, then only read.
Sink g_sink{no_clock, no_record, nullptr, 0};

// Point-to-point transfers are tagged apart from the collectives' (whose tag is the channel):
// both number their messages from 1 on the same communicator and channel.
constexpr int kP2pTagBase = 256;
constexpr std::uint64_t kSecond = 1'000'000'000;

// One collective, from its Coll event until the next allocation that reuses the slot.
struct alignas(64) CollSlot {
  std::atomic<std::uint64_t> word{0};
  std::atomic<Comm*> comm{nullptr};
  std::atomic<std::uint64_t> seq{0};
  // KernelCh stops still to come, plus one for the Coll stop (NCCL may report a channel's
  // kernel before it stops the Coll event): the collective is complete at zero.
  std::atomic<int> pending{0};
  std::atomic<bool> done{false};
  std::atomic<bool> sampled{false};
  std::atomic<std::uint32_t> function{0};
  std::atomic<std::int32_t> root{-1};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> enter_ns{0};
  // Sampled ones only: the GPU's latest channel stop (%globaltimer), the host time the last
  // channel's stop was seen, and the GPU stop of the channel being stopped.
  std::atomic<std::uint64_t> gpu_stop{0};
  std::atomic<std::uint64_t> seen_ns{0};
  std::atomic<std::uint64_t> channel_stop{0};
};

// One sampled proxy operation (a transfer), from its ProxyOp start to its stop.
struct alignas(64) OpSlot {
  std::atomic<std::uint64_t> word{0};
  std::atomic<Comm*> comm{nullptr};
  std::atomic<std::uint64_t> msg{0};
  std::atomic<std::uint64_t> first_ns{0};  // its first step started (posted)
  std::atomic<std::uint64_t> last_ns{0};   // its last step done
  // Its last step: posted to the network (send: SendWait; receive: the step started) and its
  // size. A transfer row is that step: an operation's steps wait between them for the GPU and
  // for the peers upstream in the ring, so its first post to its last arrival spans the whole
  // collective, which a slow host anywhere lengthens; the last step's post to its arrival is
  // one message over this one link.
  std::atomic<std::uint64_t> last_post_ns{0};
  std::atomic<std::uint64_t> last_step_bytes{0};
  std::atomic<std::uint64_t> step_bytes{0};  // v4+: the steps' transfer sizes
  std::atomic<std::uint64_t> op_bytes{0};    // v1-v3: the op's running total
  std::atomic<std::uint32_t> function{0};
  std::atomic<std::int32_t> peer{0};
  std::atomic<std::int32_t> tag{0};
  std::atomic<std::int32_t> steps{0};
  std::atomic<bool> send{false};
};

// Collectives in flight at once (enqueued, kernel not finished) across the process, and
// sampled proxy operations in flight. 2 MiB and 512 KiB of zero pages until used.
Pool<CollSlot, 16384> g_colls;
Pool<OpSlot, 4096> g_ops;

// ---- The GPU's clock --------------------------------------------------------------------
// KernelCh times are %globaltimer readings, which follow CLOCK_REALTIME, not now_ns()'s
// CLOCK_MONOTONIC. The proxy thread reports each one late, never early, so the smallest
// (host now_ns() when reported - GPU time) seen is the closest estimate of the offset between
// the clocks. Two one-second windows follow a slow drift (NTP slews the realtime clock).
struct GpuClock {
  std::atomic<std::int64_t> current{LLONG_MAX}, previous{LLONG_MAX};
  std::atomic<std::uint64_t> window_ns{0};
  void observe(std::uint64_t host_ns, std::uint64_t gpu_ns) {
    if (gpu_ns == 0 || host_ns == 0) return;
    const std::int64_t d = static_cast<std::int64_t>(host_ns) - static_cast<std::int64_t>(gpu_ns);
    if (host_ns - get(window_ns) > kSecond) {
      put(previous, get(current));
      put(current, d);
      put(window_ns, host_ns);
    } else if (d < get(current)) {
      put(current, d);
    }
  }
  bool offset(std::int64_t& out) const {
    out = std::min(get(current), get(previous));
    return out != LLONG_MAX;
  }
};

}  // namespace

// ---- Communicators ------------------------------------------------------------------------
struct Comm {
  explicit Comm(int v) : version(v) {}
  const int version;
  enum Phase : int { unset = 0, recording = 1, closed = 2 };
  std::atomic<int> phase{unset};
  std::mutex lazy;  // v1-v3: the first event naming the communicator configures it
  CommSetup setup;  // written before phase becomes `recording`
  std::atomic<world::CommState*> state{nullptr};
  // Collectives enqueued: the sequence numbers, whether or not CommState::started is ours.
  std::atomic<std::uint64_t> collectives{0};
  // The highest completed: a communicator's collectives complete in order, so the slots of
  // lower ones whose last KernelCh never came can be reused.
  std::atomic<std::uint64_t> completed{0};
  // Point-to-point messages sent to and received from each peer (record_transfers only).
  std::unique_ptr<std::atomic<std::uint64_t>[]> sent, received;
  GpuClock gpu_clock;
};

namespace {

bool is_recording(const Comm* comm) {
  return comm != nullptr && comm->phase.load(kAcquire) == Comm::recording;
}

// v1-v3 events name their communicator (hash, rank); the first one configures it if init could
// not. Later events cost the phase check only.
bool ready(Comm* comm, std::uint64_t hash, int rank) {
  const int phase = comm->phase.load(kAcquire);
  if (phase != Comm::unset) return phase == Comm::recording;
  if (comm->version >= 4) return false;  // init had everything: not recording
  std::lock_guard lock(comm->lazy);
  if (comm->phase.load(kAcquire) == Comm::unset) {
    if (hash != 0 && g_sink.start_lazily != nullptr)
      g_sink.start_lazily(comm, comm->version, hash, rank);
    // Not configured: this communicator stays silent rather than lock on every event.
    int expected = Comm::unset;
    comm->phase.compare_exchange_strong(expected, Comm::closed, std::memory_order_acq_rel);
  }
  return comm->phase.load(kAcquire) == Comm::recording;
}

// A record's function: the caller's function table's index (Sink::function_base).
std::uint32_t function_index(Function function) {
  return g_sink.function_base + index_of(function);
}
// One past the NCCL functions: "unknown" (the caller's table ends with NCCL's).
std::uint32_t unknown_function() {
  return g_sink.function_base + kFunctionCount;
}

bool is_rooted(std::uint32_t function) {
  return function == function_index(Function::Broadcast) ||
         function == function_index(Function::Reduce);
}

// v1's numeric codes.
std::uint32_t function_of_code(std::uint8_t code) {
  switch (code) {
    case abi::v1::kFuncBroadcast:
      return function_index(Function::Broadcast);
    case abi::v1::kFuncReduce:
      return function_index(Function::Reduce);
    case abi::v1::kFuncAllGather:
      return function_index(Function::AllGather);
    case abi::v1::kFuncReduceScatter:
      return function_index(Function::ReduceScatter);
    case abi::v1::kFuncAllReduce:
      return function_index(Function::AllReduce);
    case abi::v1::kFuncSend:
      return function_index(Function::Send);
    case abi::v1::kFuncRecv:
      return function_index(Function::Recv);
    default:
      return unknown_function();
  }
}
// v1-v3 descriptors carry the datatype's code; a code newer than the table counts as 1 byte.
std::uint32_t datatype_size_of_code(std::uint8_t code) {
  const std::uint32_t bytes = datatype_bytes(code);
  return bytes != 0 ? bytes : 1;
}

// The fields a version's Coll and P2p descriptors carry, in one shape.
struct CollFields {
  std::uint32_t function;
  std::uint64_t bytes;
  int root;
  int channels;
  std::uint64_t hash;  // v1-v3 only
};
template <int V>
CollFields coll_fields(const typename abi::Version<V>::Descr& d) {
  const auto& c = d.coll;
  if constexpr (V == 1) {
    return {function_of_code(c.func), c.count * datatype_size_of_code(c.datatype), c.root,
            c.nMaxChannels, c.commHash};
  } else if constexpr (V <= 3) {
    return {function_of(c.func), c.count * datatype_size(c.datatype), c.root, c.nMaxChannels,
            c.commHash};
  } else {
    return {function_of(c.func), c.count * datatype_size(c.datatype), c.root, c.nChannels, 0};
  }
}
struct P2pFields {
  bool send;
  bool known;  // a Send or a Recv
  int peer;
  std::uint64_t hash;
};
template <int V>
P2pFields p2p_fields(const typename abi::Version<V>::Descr& d) {
  const auto& p = d.p2p;
  std::uint32_t function = 0;
  if constexpr (V == 1)
    function = function_of_code(p.func);
  else
    function = function_of(p.func);
  std::uint64_t hash = 0;
  if constexpr (V <= 3) hash = p.commHash;
  const bool send = function == function_index(Function::Send);
  return {send, send || function == function_index(Function::Recv), p.peer, hash};
}

// ---- Collectives --------------------------------------------------------------------------
void complete(CollSlot& slot) {
  Comm* comm = get(slot.comm);
  const std::uint64_t seq = get(slot.seq);
  raise_to(comm->completed, seq);
  const CommSetup& setup = comm->setup;
  if (setup.owns_progress)
    if (world::CommState* state = comm->state.load(kAcquire)) state->completed_seq(seq, false);
  if (get(slot.sampled) && setup.record_instances) {
    // The exit on now_ns()'s scale: the GPU's last channel stop moved by the clocks' offset,
    // never after the host saw it nor before the enqueue; the host's sighting where there is
    // no GPU time (v3) or no offset yet. Without KernelCh (v1, v2): unknown (0).
    const std::uint64_t enter = get(slot.enter_ns);
    std::uint64_t exit = 0;
    // NCCL may report no channel (nChannels 0): then the exit is unknown too.
    if (setup.kernel_channels && get(slot.seen_ns) != 0) {
      exit = get(slot.seen_ns);
      std::int64_t offset = 0;
      const std::uint64_t gpu_stop = get(slot.gpu_stop);
      if (gpu_stop != 0 && comm->gpu_clock.offset(offset)) {
        const std::int64_t host = static_cast<std::int64_t>(gpu_stop) + offset;
        if (host > 0 && static_cast<std::uint64_t>(host) < exit)
          exit = static_cast<std::uint64_t>(host);
      }
      if (exit < enter) exit = enter;
    }
    monitor::InstanceRecord record;
    record.comm_id = setup.id;
    record.seq = seq;
    record.bytes = get(slot.bytes);
    record.enter_ns = enter;
    record.exit_ns = exit;
    record.function = get(slot.function);
    record.root = get(slot.root);
    record.kind = monitor::RecordKind::collective;
    g_sink.record(record);
  }
  slot.done.store(true, kRelease);
}

// One of the collective's awaited stops (a channel's, or the Coll event's own).
void count_down(CollSlot& slot) {
  if (slot.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) complete(slot);
}

template <int V>
void* start_coll(Comm* comm, const typename abi::Version<V>::Descr& d) {
  const CollFields f = coll_fields<V>(d);
  if (!ready(comm, f.hash, d.rank)) return nullptr;
  const CommSetup& setup = comm->setup;
  const std::uint64_t seq = comm->collectives.fetch_add(1, kRelaxed) + 1;
  if (setup.owns_progress)
    if (world::CommState* state = comm->state.load(kAcquire))
      // A plain store: only this communicator's launches write it, one at a time (a CUDA
      // graph's replay reporting from a driver thread can at worst lower it until the next).
      if (state->started.load(kRelaxed) < seq) state->started.store(seq, kRelaxed);
  std::uint32_t index = 0;
  std::uint64_t gen = 0;
  const bool taken = g_colls.take(index, gen, [](CollSlot& s) {
    if (s.done.load(kAcquire)) return true;
    const Comm* owner = get(s.comm);
    return owner != nullptr && get(s.seq) <= get(owner->completed);
  });
  // Without a slot its completion is taken from a later collective's (see Comm::completed).
  if (!taken) return nullptr;
  CollSlot& slot = g_colls.slots[index];
  const bool sampled = monitor::is_sampled(setup.id, seq, setup.sample);
  put(slot.comm, comm);
  put(slot.seq, seq);
  put(slot.done, false);
  put(slot.sampled, sampled);
  put(slot.function, f.function);
  put(slot.root, is_rooted(f.function) ? f.root : -1);
  put(slot.bytes, f.bytes);
  put(slot.enter_ns, sampled ? g_sink.now() : std::uint64_t{0});
  put(slot.gpu_stop, std::uint64_t{0});
  put(slot.seen_ns, std::uint64_t{0});
  put(slot.channel_stop, std::uint64_t{0});
  slot.pending.store((setup.kernel_channels ? f.channels : 0) + 1, kRelease);
  return encode(Kind::coll, index, gen);
}

template <int V>
void* start_kernel_ch(Comm* comm, const typename abi::Version<V>::Descr& d) {
  if (!is_recording(comm)) return nullptr;
  const Decoded parent = decode(d.parentObj);
  if (parent.kind != Kind::coll) return nullptr;  // a P2p's: completion is not tracked
  CollSlot* slot = g_colls.find(parent);
  if (slot == nullptr) return nullptr;
  if constexpr (V >= 4) {
    // The clock of the communicator that enqueued it (the context, save under PXN).
    if (get(slot->sampled)) get(slot->comm)->gpu_clock.observe(g_sink.now(), d.kernelCh.pTimer);
  }
  return encode(Kind::kernel_ch, parent.index, parent.gen);
}

// ---- Point-to-point and proxy operations --------------------------------------------------
template <int V>
void* start_p2p(Comm* comm, const typename abi::Version<V>::Descr& d) {
  const P2pFields f = p2p_fields<V>(d);
  if (!ready(comm, f.hash, d.rank)) return nullptr;
  const CommSetup& setup = comm->setup;
  if (!setup.record_transfers || !f.known || f.peer < 0 || f.peer >= setup.nranks) return nullptr;
  auto& counters = f.send ? comm->sent : comm->received;
  const std::uint64_t msg = counters[static_cast<std::size_t>(f.peer)].fetch_add(1, kRelaxed) + 1;
  const int sender = f.send ? setup.rank : f.peer;
  const int receiver = f.send ? f.peer : setup.rank;
  const bool sampled =
      monitor::is_message_sampled(setup.id, sender, receiver, kP2pTagBase, msg, setup.sample);
  return encode_p2p(msg, f.send, sampled);
}

template <int V>
void* start_op(Comm* comm, const typename abi::Version<V>::Descr& d) {
  if (!is_recording(comm)) return nullptr;
  const CommSetup& setup = comm->setup;
  const abi::ProxyOpDescr& op = d.proxyOp;
  // Under PXN another process's proxy runs the op: its parent is that process's pointer.
  if (!setup.record_transfers || op.pid != setup.pid) return nullptr;
  if (op.peer < 0 || op.peer >= setup.nranks) return nullptr;
  const Decoded parent = decode(d.parentObj);
  std::uint64_t msg = 0;
  std::uint32_t function = 0;
  int tag = op.channelId;
  if (parent.kind == Kind::coll) {
    CollSlot* slot = g_colls.find(parent);
    if (slot == nullptr || !get(slot->sampled)) return nullptr;
    msg = get(slot->seq);
    function = get(slot->function);
  } else if (parent.kind == Kind::p2p) {
    if ((parent.flags & kFlagB) == 0) return nullptr;  // not sampled
    msg = p2p_msg(d.parentObj);
    function = function_index((parent.flags & kFlagA) != 0 ? Function::Send : Function::Recv);
    tag += kP2pTagBase;
  } else {
    return nullptr;
  }
  std::uint32_t index = 0;
  std::uint64_t gen = 0;
  if (!g_ops.take(index, gen, [](OpSlot&) { return false; })) return nullptr;
  OpSlot& slot = g_ops.slots[index];
  put(slot.comm, comm);
  put(slot.msg, msg);
  put(slot.first_ns, std::uint64_t{0});
  put(slot.last_ns, std::uint64_t{0});
  put(slot.last_post_ns, std::uint64_t{0});
  put(slot.last_step_bytes, std::uint64_t{0});
  put(slot.step_bytes, std::uint64_t{0});
  put(slot.op_bytes, std::uint64_t{0});
  put(slot.function, function);
  put(slot.peer, op.peer);
  put(slot.tag, tag);
  put(slot.steps, op.nSteps);
  put(slot.send, op.isSend != 0);
  return encode(Kind::op, index, gen);
}

void stop_op(OpSlot& slot) {
  // Only network operations have steps: one without any moved nothing over a link.
  const std::uint64_t first = get(slot.first_ns);
  if (first != 0) {
    Comm* comm = get(slot.comm);
    std::uint64_t last = get(slot.last_ns);
    if (last == 0) last = g_sink.now();
    const std::uint64_t step_bytes = get(slot.step_bytes);
    const std::uint64_t last_step_bytes = get(slot.last_step_bytes);
    const std::uint64_t steps = static_cast<std::uint64_t>(std::max(1, get(slot.steps)));
    const std::uint64_t last_post = get(slot.last_post_ns);
    monitor::InstanceRecord record;
    record.comm_id = comm->setup.id;
    record.seq = get(slot.msg);
    // The last step's size: v4+ report it; before, the operation's bytes over its steps.
    record.bytes = last_step_bytes != 0 ? last_step_bytes
                   : step_bytes != 0    ? step_bytes / steps
                                        : get(slot.op_bytes) / steps;
    record.enter_ns =
        last_post != 0 && last_post <= (last != 0 ? last : last_post) ? last_post : first;
    record.exit_ns = last < first ? first : last;
    record.function = get(slot.function);
    record.root = get(slot.peer);  // = its world rank (record_transfers)
    record.tag = get(slot.tag);
    record.kind = get(slot.send) ? monitor::RecordKind::send : monitor::RecordKind::recv;
    g_sink.record(record);
  }
  g_ops.release(slot);
}

template <int V>
void* start_step(const typename abi::Version<V>::Descr& d) {
  const Decoded parent = decode(d.parentObj);
  if (parent.kind != Kind::op) return nullptr;
  OpSlot* slot = g_ops.find(parent);
  if (slot == nullptr) return nullptr;
  const int step = d.proxyStep.step;
  std::uint64_t flags = 0;
  if (step == 0) {
    flags |= kFlagA;
    // A receive whose post is retried starts its step again: the first post counts.
    if (get(slot->first_ns) == 0) put(slot->first_ns, g_sink.now());
  }
  if (step + 1 >= get(slot->steps)) {
    flags |= kFlagB;
    // A receive's last step is posted now (a send's when it reaches SendWait).
    if (!get(slot->send)) put(slot->last_post_ns, g_sink.now());
  }
  return encode(Kind::step, parent.index, parent.gen, flags);
}

}  // namespace

// ---- Public -------------------------------------------------------------------------------
void set_sink(const Sink& sink) noexcept {
  g_sink.now = sink.now != nullptr ? sink.now : no_clock;
  g_sink.record = sink.record != nullptr ? sink.record : no_record;
  g_sink.start_lazily = sink.start_lazily;
  g_sink.function_base = sink.function_base;
}

Comm* new_comm(int version) noexcept {
  return new (std::nothrow) Comm(version);
}

void configure(Comm* comm, const CommSetup& setup) noexcept {
  if (comm == nullptr) return;
  comm->setup = setup;
  if (setup.state != nullptr) comm->state.store(setup.state, kRelease);
  if (setup.record_transfers && setup.nranks > 0) {
    const auto n = static_cast<std::size_t>(setup.nranks);
    comm->sent.reset(new (std::nothrow) std::atomic<std::uint64_t>[n]());
    comm->received.reset(new (std::nothrow) std::atomic<std::uint64_t>[n]());
    if (!comm->sent || !comm->received) comm->setup.record_transfers = false;
  }
  comm->phase.store(Comm::recording, kRelease);
}

std::atomic<world::CommState*>* progress_state(Comm* comm) noexcept {
  return comm != nullptr ? &comm->state : nullptr;
}

void close_comm(Comm* comm) noexcept {
  if (comm != nullptr) comm->phase.store(Comm::closed, kRelease);
}

bool recording(const Comm* comm) noexcept {
  return is_recording(comm);
}

int activation_mask(int version) noexcept {
  std::uint64_t mask = abi::kColl | abi::kP2p | abi::kProxyOp | abi::kProxyStep;
  if (version >= 3) mask |= abi::kKernelCh;
  return static_cast<int>(mask);
}

template <int V>
abi::Result start_event(void* context, void** handle,
                        typename abi::Version<V>::Descr* descr) noexcept {
  if (handle == nullptr) return abi::kSuccess;
  *handle = nullptr;  // NCCL relies on it being written, declined or not
  auto* comm = static_cast<Comm*>(context);
  if (comm == nullptr || descr == nullptr) return abi::kSuccess;
  const std::uint64_t type = descr->type;
  if (type == abi::kColl) {
    *handle = start_coll<V>(comm, *descr);
  } else if (type == abi::kProxyStep) {
    *handle = start_step<V>(*descr);
  } else if (type == abi::kProxyOp) {
    *handle = start_op<V>(comm, *descr);
  } else if (type == abi::kP2p) {
    *handle = start_p2p<V>(comm, *descr);
  } else if (type == abi::kKernelCh) {
    if constexpr (V >= 3) *handle = start_kernel_ch<V>(comm, *descr);
  }
  // Group, the API events, ProxyCtrl, NetPlugin, KernelLaunch, CE: declined.
  return abi::kSuccess;
}

abi::Result stop_event(void* handle) noexcept {
  const Decoded h = decode(handle);
  switch (h.kind) {
    case Kind::coll:
      if (CollSlot* slot = g_colls.find(h)) count_down(*slot);
      break;
    case Kind::kernel_ch:
      if (CollSlot* slot = g_colls.find(h)) {
        if (get(slot->sampled)) {
          const std::uint64_t now = g_sink.now();
          put(slot->seen_ns, now);
          get(slot->comm)->gpu_clock.observe(now, get(slot->channel_stop));
          put(slot->channel_stop, std::uint64_t{0});
        }
        count_down(*slot);
      }
      break;
    case Kind::op:
      if (OpSlot* slot = g_ops.find(h)) stop_op(*slot);
      break;
    case Kind::step:
      if ((h.flags & kFlagB) != 0)
        if (OpSlot* slot = g_ops.find(h)) {
          // Send: the network has the last step. Receive: the last step reached the GPU, if
          // it was never seen arriving (RecvFlushWait).
          if (get(slot->send) || get(slot->last_ns) == 0) put(slot->last_ns, g_sink.now());
        }
      break;
    default:
      break;
  }
  return abi::kSuccess;
}

template <int V>
abi::Result record_event_state(void* handle, abi::EventState state,
                               typename abi::Version<V>::StateArgs* args) noexcept {
  const Decoded h = decode(handle);
  if (h.kind == Kind::step) {
    // Each step's bytes: at SendWait (isend posted) and RecvFlushWait (the data arrived).
    if (state != abi::kProxyStepSendWait && state != abi::kProxyStepRecvFlushWait)
      return abi::kSuccess;
    OpSlot* slot = g_ops.find(h);
    if (slot == nullptr) return abi::kSuccess;
    if constexpr (V >= 4) {
      if (args != nullptr) {
        put(slot->step_bytes, get(slot->step_bytes) + args->proxyStep.transSize);
        if ((h.flags & kFlagB) != 0)
          put(slot->last_step_bytes, static_cast<std::uint64_t>(args->proxyStep.transSize));
      }
    }
    if ((h.flags & kFlagB) != 0) {
      if (state == abi::kProxyStepRecvFlushWait) put(slot->last_ns, g_sink.now());
      if (state == abi::kProxyStepSendWait) put(slot->last_post_ns, g_sink.now());
    }
  } else if (h.kind == Kind::kernel_ch) {
    if constexpr (V >= 4) {
      if (state != abi::kKernelChStop || args == nullptr) return abi::kSuccess;
      CollSlot* slot = g_colls.find(h);
      if (slot == nullptr || !get(slot->sampled)) return abi::kSuccess;
      const std::uint64_t stop = args->kernelCh.pTimer;
      put(slot->channel_stop, stop);
      if (stop > get(slot->gpu_stop)) put(slot->gpu_stop, stop);
    }
  } else if (h.kind == Kind::op) {
    // 2.23-2.26 report an op's running byte count in its own states (0-7).
    if constexpr (V <= 3) {
      if (args == nullptr || state > abi::kProxyOpRecvDone) return abi::kSuccess;
      if (OpSlot* slot = g_ops.find(h))
        if (args->proxyOp.transSize > get(slot->op_bytes))
          put(slot->op_bytes, static_cast<std::uint64_t>(args->proxyOp.transSize));
    }
  }
  return abi::kSuccess;
}

#define COMMTAP_INSTANTIATE(V)                                                          \
  template abi::Result start_event<V>(void*, void**, abi::Version<V>::Descr*) noexcept; \
  template abi::Result record_event_state<V>(void*, abi::EventState,                    \
                                             abi::Version<V>::StateArgs*) noexcept;
COMMTAP_INSTANTIATE(1)
COMMTAP_INSTANTIATE(2)
COMMTAP_INSTANTIATE(3)
COMMTAP_INSTANTIATE(4)
COMMTAP_INSTANTIATE(5)
COMMTAP_INSTANTIATE(6)
#undef COMMTAP_INSTANTIATE

Dropped dropped() noexcept {
  return {g_colls.dropped.load(kRelaxed), g_ops.dropped.load(kRelaxed)};
}

std::uint32_t function_of(const char* f) noexcept {
  if (f == nullptr) return unknown_function();
  // NCCL's names (static strings): AllGather AllReduce AlltoAll Broadcast Gather Recv Reduce
  // ReduceScatter Scatter SendRecv Send. A switch on the first letters, then one compare.
  struct Name {
    const char* name;
    Function function;
  };
  auto pick = [f](std::initializer_list<Name> names) {
    for (const Name& n : names)
      if (std::strcmp(f, n.name) == 0) return function_index(n.function);
    return unknown_function();
  };
  switch (f[0]) {
    case 'A':
      return pick({{"AllReduce", Function::AllReduce},
                   {"AllGather", Function::AllGather},
                   {"AlltoAll", Function::AlltoAll}});
    case 'B':
      return pick({{"Broadcast", Function::Broadcast}});
    case 'G':
      return pick({{"Gather", Function::Gather}});
    case 'R':
      return pick({{"Reduce", Function::Reduce},
                   {"ReduceScatter", Function::ReduceScatter},
                   {"Recv", Function::Recv}});
    case 'S':
      // SendRecv is NCCL's fused p2p task: counted as its send side.
      return pick(
          {{"Send", Function::Send}, {"Scatter", Function::Scatter}, {"SendRecv", Function::Send}});
    default:
      return unknown_function();
  }
}

std::uint32_t datatype_size(const char* t) noexcept {
  // NCCL's ncclDatatypeToString names ncclUint8 (and any type it does not know) "Unknown":
  // counted as 1 byte, the payload then being the element count.
  const std::uint32_t bytes = datatype_bytes(t);
  return bytes != 0 ? bytes : 1;
}

}  // namespace commtap::nccl::profiler
