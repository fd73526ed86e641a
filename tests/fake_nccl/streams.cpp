// The fake's GPU: every stream the application names gets a worker thread that runs the
// stream's launches in order, as a GPU runs a stream's kernels. NCCL calls only queue work (at
// once, or at the outermost ncclGroupEnd for calls inside a group); fakeStreamSynchronize and
// fakeStreamQuery stand in for cudaStreamSynchronize and cudaStreamQuery.
#include <algorithm>
#include <deque>
#include <thread>
#include <unordered_map>

#include "fake_nccl.hpp"
#include "profiler_hooks.hpp"

namespace fake_nccl {
namespace {

// What one outermost ncclGroupEnd (or a call outside any group) launches: per comm, its
// collectives in call order and then all its sends and receives at once.
struct Launch {
  struct Part {
    CommRef comm;
    std::uint64_t ticket = 0;
    std::vector<Op*> collectives;
    std::vector<Op*> p2p;
  };
  std::vector<Op> ops;
  std::vector<Part> parts;
  // A launch on several streams runs on the first and makes the others wait for it, as the
  // kernel of a multi-stream group joins its streams.
  void* executor = nullptr;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  ncclResult_t result = ncclSuccess;
};
using LaunchRef = std::shared_ptr<Launch>;

struct Stream {
  void* handle = nullptr;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<LaunchRef> queue;
  std::uint64_t enqueued = 0;
  std::uint64_t completed = 0;
  bool failed = false;  // since the last synchronize, like a stream's error state
};

// Leaked on purpose: workers run until the process exits.
struct Streams {
  std::mutex mutex;
  std::unordered_map<void*, Stream*> by_handle;
};
Streams& streams() {
  static auto* instance = new Streams;
  return *instance;
}

// All launches of the process take their tickets and queue places in one order, so launches
// that share comms or streams never wait for each other in a cycle.
std::mutex& launch_order() {
  static auto* instance = new std::mutex;
  return *instance;
}

struct GroupState {
  int depth = 0;
  std::vector<Op> ops;
  ncclResult_t error = ncclSuccess;  // the first invalid call inside the group
};
thread_local GroupState group;

ncclResult_t run_part(Launch::Part& part) {
  Comm& comm = *part.comm;
  ncclResult_t result = ncclSuccess;
  {
    std::unique_lock lock(comm.mutex);
    comm.turn_changed.wait(lock, [&] { return comm.turn == part.ticket; });
    if (comm.aborted || comm.revoked) {
      result = ncclInvalidUsage;
    } else {
      result = comm.async_error.load();
    }
    comm.executing = result == ncclSuccess;
  }
  const bool runs = result == ncclSuccess;
  if (runs) {
    for (Op* op : part.collectives) {
      profiler::kernel_channel_start(*op, 0);
      result = run_collective(*op);
      profiler::kernel_channel_stop(*op, 0);
      if (result != ncclSuccess) break;
    }
    if (result == ncclSuccess && !part.p2p.empty()) {
      for (Op* op : part.p2p) profiler::kernel_channel_start(*op, 0);
      result = run_p2p(comm, part.p2p);
      for (Op* op : part.p2p) profiler::kernel_channel_stop(*op, 0);
    }
    // An error found by the "kernel" is the comm's asynchronous error, as in NCCL; the errors
    // an abort or revoke causes are not.
    ncclResult_t none = ncclSuccess;
    if (result != ncclSuccess && !comm.aborted && !comm.revoked)
      comm.async_error.compare_exchange_strong(none, result);
  }
  {
    std::lock_guard lock(comm.mutex);
    comm.executing = false;
    ++comm.turn;
  }
  comm.turn_changed.notify_all();
  return result;
}

void execute(Launch& launch) {
  std::vector<ncclResult_t> results(launch.parts.size(), ncclSuccess);
  // Comms of one launch progress together (a clique from ncclCommInitAll needs all of its
  // ranks at once): every comm beyond the first gets its own thread.
  std::vector<std::thread> helpers;
  for (std::size_t i = 1; i < launch.parts.size(); ++i)
    helpers.emplace_back([&, i] { results[i] = run_part(launch.parts[i]); });
  results[0] = run_part(launch.parts[0]);
  for (std::thread& helper : helpers) helper.join();
  for (ncclResult_t result : results)
    if (result != ncclSuccess && launch.result == ncclSuccess) launch.result = result;
}

void work(Stream* stream) {
  for (;;) {
    LaunchRef launch;
    {
      std::unique_lock lock(stream->mutex);
      stream->changed.wait(lock, [&] { return !stream->queue.empty(); });
      launch = stream->queue.front();
    }
    if (launch->executor == stream->handle) {
      execute(*launch);
      {
        std::lock_guard lock(launch->mutex);
        launch->done = true;
      }
      launch->finished.notify_all();
    } else {
      std::unique_lock lock(launch->mutex);
      launch->finished.wait(lock, [&] { return launch->done; });
    }
    {
      std::lock_guard lock(stream->mutex);
      stream->queue.pop_front();
      ++stream->completed;
      if (launch->result != ncclSuccess) stream->failed = true;
    }
    stream->changed.notify_all();
  }
}

Stream* find_stream(void* handle, bool create) {
  Streams& all = streams();
  std::lock_guard lock(all.mutex);
  auto found = all.by_handle.find(handle);
  if (found != all.by_handle.end()) return found->second;
  if (!create) return nullptr;
  auto* stream = new Stream;
  stream->handle = handle;
  all.by_handle.emplace(handle, stream);
  std::thread(work, stream).detach();
  return stream;
}

void launch(std::vector<Op> ops) {
  auto work_unit = std::make_shared<Launch>();
  work_unit->ops = std::move(ops);
  std::vector<void*> handles;
  for (Op& op : work_unit->ops) {
    auto part =
        std::find_if(work_unit->parts.begin(), work_unit->parts.end(),
                     [&](const Launch::Part& existing) { return existing.comm == op.comm; });
    if (part == work_unit->parts.end()) {
      work_unit->parts.push_back(Launch::Part{op.comm, 0, {}, {}});
      part = work_unit->parts.end() - 1;
    }
    (is_p2p(op.kind) ? part->p2p : part->collectives).push_back(&op);
    if (std::find(handles.begin(), handles.end(), op.stream) == handles.end())
      handles.push_back(op.stream);
  }
  work_unit->executor = handles.front();
  for (Launch::Part& part : work_unit->parts) {
    std::vector<Op*> plan = part.collectives;
    plan.insert(plan.end(), part.p2p.begin(), part.p2p.end());
    profiler::plan_launched(*part.comm, plan);
  }
  std::lock_guard order(launch_order());
  for (Launch::Part& part : work_unit->parts) {
    std::lock_guard lock(part.comm->mutex);
    part.ticket = part.comm->next_ticket++;
  }
  for (void* handle : handles) {
    Stream* stream = find_stream(handle, true);
    {
      std::lock_guard lock(stream->mutex);
      stream->queue.push_back(work_unit);
      ++stream->enqueued;
    }
    stream->changed.notify_all();
  }
}

bool needs_root(OpKind kind) {
  return kind == OpKind::Broadcast || kind == OpKind::Reduce || kind == OpKind::Gather ||
         kind == OpKind::Scatter || kind == OpKind::Send || kind == OpKind::Recv;
}

bool reduces(OpKind kind) {
  return kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter;
}

// NCCL's argument checks, as far as a host-memory fake can make them.
ncclResult_t check(const Op& op) {
  const Comm& comm = *op.comm;
  if (type_size(op.type) == 0)
    return fail(ncclInvalidArgument, "%s: unsupported datatype %d", op_name(op.kind), op.type);
  // The 8-bit floats move as bytes; the fake has no arithmetic for them (NCCL reduces them on
  // sm_90 and later only).
  if (reduces(op.kind) && (op.type == ncclFloat8e4m3 || op.type == ncclFloat8e5m2))
    return fail(ncclInvalidArgument, "%s: no 8-bit float reductions in the fake", op_name(op.kind));
  if (reduces(op.kind) && (op.reduction < 0 || op.reduction >= ncclNumOps))
    return fail(ncclInvalidArgument, "%s: unsupported reduction %d", op_name(op.kind),
                op.reduction);
  if (needs_root(op.kind) && (op.root < 0 || op.root >= comm.nranks))
    return fail(ncclInvalidArgument, "%s: root/peer %d of %d ranks", op_name(op.kind), op.root,
                comm.nranks);
  if (comm.aborted || comm.finalized || comm.revoked)
    return fail(ncclInvalidUsage, "%s on a finalized, aborted or revoked communicator",
                op_name(op.kind));
  if (ncclResult_t error = comm.async_error.load(); error != ncclSuccess) return error;
  if (op.count == 0) return ncclSuccess;
  const bool is_root = op.root == comm.rank;
  const bool reads = op.kind != OpKind::Recv && (op.kind != OpKind::Scatter || is_root) &&
                     (op.kind != OpKind::Broadcast || is_root);
  const bool writes = op.kind != OpKind::Send &&
                      ((op.kind != OpKind::Reduce && op.kind != OpKind::Gather) || is_root);
  if ((reads && !op.send) || (writes && !op.recv))
    return fail(ncclInvalidArgument, "%s: NULL buffer", op_name(op.kind));
  return ncclSuccess;
}

// The end of a group, the application's or an operation's implicit one: the outermost end
// launches what the group collected.
ncclResult_t end_group_level() {
  const bool api_group_ended = profiler::api_group_end();
  ncclResult_t result = ncclSuccess;
  if (--group.depth == 0) {
    std::vector<Op> ops = std::move(group.ops);
    group.ops.clear();
    result = group.error;
    group.error = ncclSuccess;
    // As in NCCL, a group with an invalid call launches nothing.
    if (result == ncclSuccess && !ops.empty()) launch(std::move(ops));
  }
  if (api_group_ended) profiler::api_group_stop();
  return result;
}

// Queues one checked operation inside its own implicit group, as ncclEnqueueCheck does.
// A one-rank communicator's operation raises no profiler event at all: NCCL runs it at once
// (enqueue.cc, taskAppend: ncclLaunchOneRank) before collTaskAppend would start its API events.
ncclResult_t append(Op op) {
  ++group.depth;
  const bool profiled = op.comm->nranks > 1;
  if (profiled) profiler::api_op_start(op, group.depth);
  group.ops.push_back(std::move(op));
  if (profiled) profiler::api_op_stop(group.ops.back());
  return end_group_level();
}

Op make_op(OpKind kind, const void* send, void* recv, std::size_t count, ncclDataType_t type,
           ncclRedOp_t reduction, int root, CommRef comm, void* stream) {
  Op op;
  op.kind = kind;
  op.send = send;
  op.recv = recv;
  op.count = count;
  op.type = type;
  op.reduction = reduction;
  op.root = root;
  op.comm = std::move(comm);
  op.stream = stream;
  return op;
}

// AlltoAll, Gather and Scatter as NCCL 2.28 runs them: a group of sends and receives, one pair
// per peer (the own piece a send and receive to oneself).
ncclResult_t append_as_p2p(const Op& op) {
  const Comm& comm = *op.comm;
  const std::size_t piece = op.count * type_size(op.type);
  auto at = [&](const void* base, int rank) {
    return static_cast<char*>(const_cast<void*>(base)) + static_cast<std::size_t>(rank) * piece;
  };
  ++group.depth;
  ncclResult_t result = ncclSuccess;
  auto add = [&](OpKind kind, const void* buffer, int peer) {
    if (result != ncclSuccess) return;
    const bool send = kind == OpKind::Send;
    result =
        append(make_op(kind, send ? buffer : nullptr, send ? nullptr : const_cast<void*>(buffer),
                       op.count, op.type, ncclSum, peer, op.comm, op.stream));
  };
  for (int peer = 0; peer < comm.nranks; ++peer) {
    if (op.kind == OpKind::AlltoAll) {
      add(OpKind::Send, at(op.send, peer), peer);
      add(OpKind::Recv, at(op.recv, peer), peer);
    } else if (op.kind == OpKind::Gather && comm.rank == op.root) {
      if (peer == comm.rank) add(OpKind::Send, op.send, peer);
      add(OpKind::Recv, at(op.recv, peer), peer);
    } else if (op.kind == OpKind::Scatter && comm.rank == op.root) {
      add(OpKind::Send, at(op.send, peer), peer);
      if (peer == comm.rank) add(OpKind::Recv, op.recv, peer);
    }
  }
  if (comm.rank != op.root && op.kind == OpKind::Gather) add(OpKind::Send, op.send, op.root);
  if (comm.rank != op.root && op.kind == OpKind::Scatter) add(OpKind::Recv, op.recv, op.root);
  if (result != ncclSuccess && group.error == ncclSuccess) group.error = result;
  const ncclResult_t ended = end_group_level();
  return result != ncclSuccess ? result : ended;
}

}  // namespace

ncclResult_t enqueue(OpKind kind, const void* send, void* recv, std::size_t count,
                     ncclDataType_t type, ncclRedOp_t reduction, int root, ncclComm_t handle,
                     void* stream) {
  Op op = make_op(kind, send, recv, count, type, reduction, root, retain(handle), stream);
  const ncclResult_t result =
      op.comm ? check(op) : fail(ncclInvalidArgument, "%s: invalid communicator", op_name(kind));
  if (result != ncclSuccess) {
    if (group.depth > 0 && group.error == ncclSuccess) group.error = result;
    return result;
  }
  if (kind == OpKind::AlltoAll || kind == OpKind::Gather || kind == OpKind::Scatter)
    return append_as_p2p(op);
  return append(std::move(op));
}

ncclResult_t group_start() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t group_end() {
  if (group.depth == 0) return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  return end_group_level();
}

void wait_for_comm_idle(Comm& comm) {
  std::unique_lock lock(comm.mutex);
  comm.turn_changed.wait(lock, [&] { return comm.turn == comm.next_ticket; });
}

bool comm_has_pending_work(Comm& comm) {
  std::lock_guard lock(comm.mutex);
  return comm.turn != comm.next_ticket;
}

int stream_synchronize(void* handle) {
  Stream* stream = find_stream(handle, false);
  if (!stream) return 0;
  std::unique_lock lock(stream->mutex);
  const std::uint64_t target = stream->enqueued;
  stream->changed.wait(lock, [&] { return stream->completed >= target; });
  const bool failed = stream->failed;
  stream->failed = false;
  return failed ? 1 : 0;
}

int stream_query(void* handle) {
  Stream* stream = find_stream(handle, false);
  if (!stream) return 0;
  std::lock_guard lock(stream->mutex);
  return stream->completed == stream->enqueued ? 0 : 1;
}

}  // namespace fake_nccl
