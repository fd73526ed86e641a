// Internals of the fake libnccl.so.2 (tests/fake_nccl/): a host-memory NCCL whose ranks are
// processes (or threads) talking TCP, so NCCL jobs without MPI run on machines without a GPU.
//
// Layout:
//   transport.cpp    sockets: the local address, listeners, deadlines, the transfer engine
//   bootstrap.cpp    the unique id and its root thread, meshes, control-plane all-gathers
//   comm.cpp         communicators: init, split, shrink, finalize, destroy, abort, revoke
//   streams.cpp      the stream workers (the "GPU"), groups, launches, fakeStream*
//   collectives.cpp  the algorithms the workers run, and the reductions
//   api.cpp          the exported pnccl* functions, their weak nccl* aliases, the call counter
//   profiler_hooks.* where NCCL would emit profiler plugin events
#pragma once

#include <netinet/in.h>

#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "profiler_hooks.hpp"

namespace fake_nccl {

// ---- Deadlines ----------------------------------------------------------------------------
// Every wait is unbounded unless FAKE_NCCL_TIMEOUT_S is set: a stopped peer stalls everybody,
// as it stalls NCCL.
struct Deadline {
  std::int64_t at_ns = -1;  // CLOCK_MONOTONIC; -1: never
  static Deadline from_environment();
  // Milliseconds for poll(): -1 when unbounded, 0 when passed.
  int poll_timeout_ms() const;
  bool passed() const;
};
std::int64_t monotonic_ns();

// ---- Sockets ------------------------------------------------------------------------------
// The IPv4 address others should use to reach this process: NCCL_SOCKET_IFNAME's interface,
// else the first up non-loopback one, else 127.0.0.1.
in_addr local_address();
// A listening socket on all addresses and an ephemeral port; *advertised is local_address()
// with that port. Returns -1 on failure.
int open_listener(sockaddr_in* advertised);
int connect_to(const sockaddr_in& address, Deadline deadline);
int accept_one(int listener, Deadline deadline);
// Whole-buffer I/O on a nonblocking socket, waiting with poll(): for the control plane.
ncclResult_t send_all(int fd, const void* data, std::size_t bytes, Deadline deadline);
ncclResult_t recv_all(int fd, void* data, std::size_t bytes, Deadline deadline);
void close_fd(int& fd);

// ---- Communicators ------------------------------------------------------------------------
struct PeerSockets {
  int control = -1;  // bootstrap traffic of the application thread (split, shrink)
  int data = -1;     // the stream worker's transfers
};

struct Comm {
  int rank = 0;
  int nranks = 1;
  std::uint64_t hash = 0;  // equal on all ranks (NCCL's commHash)
  std::string name;        // config->commName, if any
  bool blocking = true;
  std::vector<PeerSockets> peers;  // by rank; this rank's entry stays empty
  // Hosts, told apart by the address each rank advertised: NCCL's nodes, whose ranks talk
  // through the network transport (and so have proxy events) only with other nodes.
  std::vector<int> node_of;  // by rank
  int nnodes = 1;

  // Split and shrink calls made on this comm so far: every member makes the same ones, so the
  // count gives derived comms equal hashes on all their ranks.
  int derived_count = 0;

  std::atomic<ncclResult_t> async_error{ncclSuccess};
  std::atomic<bool> aborted{false};
  std::atomic<bool> revoked{false};
  bool finalized = false;

  // Work on one comm runs in launch order whatever its streams, as in NCCL: launches take
  // tickets and wait for their turn. Guarded by mutex.
  std::mutex mutex;
  std::condition_variable turn_changed;
  std::uint64_t next_ticket = 0;
  std::uint64_t turn = 0;
  bool executing = false;

  profiler::CommContext* profiler = nullptr;

  ~Comm();
  int data_fd(int peer) const { return peers[static_cast<std::size_t>(peer)].data; }
  int control_fd(int peer) const { return peers[static_cast<std::size_t>(peer)].control; }
  // Makes every blocked transfer on this comm fail now (and the peers see the sockets close).
  void shut_down_sockets(bool control_too);
};
using CommRef = std::shared_ptr<Comm>;

// The handle the application holds is a Comm*; the registry keeps the comm alive until
// destroy/abort, and queued work keeps it alive until that work has run.
CommRef retain(ncclComm_t handle);  // null when the handle is not a live comm
ncclComm_t publish(CommRef comm);
void unpublish(Comm* comm);

// Records a message for ncclGetLastError and returns result.
ncclResult_t fail(ncclResult_t result, const char* format, ...)
    __attribute__((format(printf, 2, 3)));
const char* last_error();

// ---- Bootstrap ----------------------------------------------------------------------------
struct RootAddress {
  std::uint64_t nonce;
  sockaddr_in address;
};
ncclResult_t make_unique_id(ncclUniqueId* id);
ncclResult_t decode_unique_id(const ncclUniqueId& id, RootAddress* root);
std::uint64_t hash_bytes(const void* data, std::size_t bytes, std::uint64_t seed);
// Registers with the root and connects the mesh of a new comm (rank, nranks, hash set).
ncclResult_t join_through_root(Comm& comm, const RootAddress& root);
// Connects the mesh of a new comm whose members listen at addresses[new rank].
ncclResult_t connect_mesh(Comm& comm, int listener, std::span<const sockaddr_in> addresses);
// All-gathers `bytes` per member over the control sockets of `comm` among `members` (ranks of
// comm, including this one, in the order the result is laid out).
ncclResult_t control_allgather(Comm& comm, std::span<const int> members, const void* mine,
                               std::size_t bytes, void* all);

// ---- Communicator management (the application thread) -------------------------------------
ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config);
ncclResult_t init_all(ncclComm_t* comms, int ndev);
ncclResult_t split(Comm& parent, int color, int key, ncclComm_t* out, const ncclConfig_t* config);
ncclResult_t shrink(Comm& parent, std::span<const int> excluded, ncclComm_t* out,
                    const ncclConfig_t* config, int flags);
ncclResult_t finalize(Comm& comm);
ncclResult_t destroy(Comm* comm);
ncclResult_t abort_comm(Comm* comm);
ncclResult_t revoke(Comm& comm);
ncclResult_t async_error(Comm& comm);

// ---- Operations and their execution -------------------------------------------------------
// The API's operations. AlltoAll, Gather and Scatter become grouped Sends and Recvs when they
// are queued, as in NCCL 2.28; the others run as they are.
enum class OpKind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AlltoAll,
  Gather,
  Scatter,
  Send,
  Recv
};
const char* op_name(OpKind kind);  // "AllReduce", ... as NCCL names them (its profiler's func)
bool is_p2p(OpKind kind);

struct Op {
  OpKind kind{};
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // as passed: per rank for AllGather, ReduceScatter, AlltoAll, ...
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t reduction = ncclSum;
  int root = -1;  // root, or the peer of Send/Recv
  CommRef comm;
  void* stream = nullptr;
  profiler::OpEvents events;
};

std::size_t type_size(ncclDataType_t type);  // NCCL's sizes (commtap's one table); 0 if unknown
// dst[i] = dst[i] (op) src[i]; avg reduces as sum (finish_average divides at the end).
void reduce_into(void* dst, const void* src, std::size_t count, ncclDataType_t type,
                 ncclRedOp_t op);
void finish_average(void* data, std::size_t count, ncclDataType_t type, int nranks);

// Runs on a stream worker: one collective, or all the point-to-point operations of one launch
// on one comm at once (as NCCL runs a group's sends and receives concurrently).
ncclResult_t run_collective(Op& op);
ncclResult_t run_p2p(Comm& comm, std::span<Op* const> ops);

// One direction of traffic with one peer, cut into chunks: the engine's unit of work (NCCL's
// proxy op); each chunk is a proxy step.
struct Transfer {
  int peer = 0;
  bool send = false;
  char* data = nullptr;
  std::size_t bytes = 0;
  bool reduce = false;  // receive: combine into data with (type, reduction) instead of copying
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t reduction = ncclSum;
  profiler::ProxyOp* proxy = nullptr;  // the proxy op whose steps these chunks are
};
// Bytes per chunk: a proxy step. Every transfer is at least one chunk (an empty one matches
// an empty transfer on the peer).
constexpr std::size_t kChunkBytes = 128 * 1024;
inline int chunks_of(std::size_t bytes) {
  return bytes == 0 ? 1 : static_cast<int>((bytes + kChunkBytes - 1) / kChunkBytes);
}
// Moves every transfer, all peers at once, each peer's sends (and receives) in order.
ncclResult_t run_transfers(Comm& comm, std::span<Transfer> transfers);

// ---- Groups and launches (streams.cpp) ----------------------------------------------------
ncclResult_t group_start();
ncclResult_t group_end();
// Checks an operation's arguments as NCCL does and queues it: on its stream at once, or at the
// outermost ncclGroupEnd.
ncclResult_t enqueue(OpKind kind, const void* send, void* recv, std::size_t count,
                     ncclDataType_t type, ncclRedOp_t reduction, int root, ncclComm_t handle,
                     void* stream);
// fakeStreamSynchronize / fakeStreamQuery.
int stream_synchronize(void* stream);
int stream_query(void* stream);
// Blocks until every launch made so far on comm has run (finalize, destroy).
void wait_for_comm_idle(Comm& comm);
bool comm_has_pending_work(Comm& comm);

}  // namespace fake_nccl
