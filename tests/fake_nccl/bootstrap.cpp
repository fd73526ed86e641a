// How ranks find each other, as NCCL's bootstrap does it: ncclGetUniqueId starts a root that
// listens on an ephemeral port and writes its address into the id; every rank of a new comm
// registers its own listener with the root and gets back everybody's; then the ranks connect a
// mesh (a control and a data socket per pair). Derived comms (split, shrink) all-gather their
// listeners over the parent's control sockets instead of a root.
#include <arpa/inet.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "fake_nccl.hpp"

namespace fake_nccl {
namespace {

constexpr std::uint64_t kIdMagic = 0x4c43434e454b4146;  // "FAKENCCL"

// The id's bytes: magic, nonce, the root's address; the rest zero.
struct IdLayout {
  std::uint64_t magic;
  std::uint64_t nonce;
  sockaddr_in root;
};
static_assert(sizeof(IdLayout) <= NCCL_UNIQUE_ID_BYTES);

struct RootHello {
  std::uint64_t magic;
  std::uint64_t nonce;
  std::int32_t rank;
  std::int32_t nranks;
  sockaddr_in listener;
};

enum class SocketKind : std::int32_t { Control = 0, Data = 1 };
struct MeshHello {
  std::uint64_t magic;
  std::uint64_t comm_hash;
  std::int32_t rank;
  SocketKind kind;
};

// The root of one unique id: collects every rank's listener address, answers each with the
// whole table, and ends. Ranks that never come leave it waiting, as NCCL's root does.
void serve_root(int listener, std::uint64_t nonce) {
  std::vector<int> connections;
  std::vector<sockaddr_in> table;
  int joined = 0;
  while (table.empty() || joined < static_cast<int>(table.size())) {
    int fd = accept_one(listener, Deadline{});
    if (fd < 0) break;
    RootHello hello{};
    const bool valid = recv_all(fd, &hello, sizeof hello, Deadline{}) == ncclSuccess &&
                       hello.magic == kIdMagic && hello.nonce == nonce && hello.nranks > 0 &&
                       (table.empty() || hello.nranks == static_cast<int>(table.size())) &&
                       hello.rank >= 0 && hello.rank < hello.nranks;
    if (valid && table.empty()) {
      table.resize(static_cast<std::size_t>(hello.nranks));
      connections.assign(table.size(), -1);
    }
    if (!valid || connections[static_cast<std::size_t>(hello.rank)] >= 0) {
      close_fd(fd);
      continue;
    }
    connections[static_cast<std::size_t>(hello.rank)] = fd;
    table[static_cast<std::size_t>(hello.rank)] = hello.listener;
    ++joined;
  }
  for (int& fd : connections) {
    if (fd >= 0) send_all(fd, table.data(), table.size() * sizeof(sockaddr_in), Deadline{});
    close_fd(fd);
  }
  close_fd(listener);
}

}  // namespace

std::uint64_t hash_bytes(const void* data, std::size_t bytes, std::uint64_t seed) {
  // FNV-1a, then a final mix so that nearby inputs spread over all 64 bits.
  std::uint64_t hash = 0xcbf29ce484222325ULL ^ seed;
  const auto* next = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ next[i]) * 0x100000001b3ULL;
  hash ^= hash >> 33;
  hash *= 0xff51afd7ed558ccdULL;
  hash ^= hash >> 33;
  return hash;
}

ncclResult_t make_unique_id(ncclUniqueId* id) {
  IdLayout layout{kIdMagic, 0, {}};
  if (getrandom(&layout.nonce, sizeof layout.nonce, 0) != sizeof layout.nonce)
    layout.nonce =
        static_cast<std::uint64_t>(monotonic_ns()) ^ static_cast<std::uint64_t>(getpid());
  const int listener = open_listener(&layout.root);
  if (listener < 0)
    return fail(ncclSystemError, "ncclGetUniqueId: cannot listen: %s", strerror(errno));
  std::thread(serve_root, listener, layout.nonce).detach();
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, &layout, sizeof layout);
  return ncclSuccess;
}

ncclResult_t decode_unique_id(const ncclUniqueId& id, RootAddress* root) {
  IdLayout layout;
  std::memcpy(&layout, id.internal, sizeof layout);
  if (layout.magic != kIdMagic || layout.root.sin_family != AF_INET)
    return fail(ncclInvalidArgument, "not a unique id made by ncclGetUniqueId");
  *root = RootAddress{layout.nonce, layout.root};
  return ncclSuccess;
}

ncclResult_t join_through_root(Comm& comm, const RootAddress& root) {
  sockaddr_in mine{};
  int listener = open_listener(&mine);
  if (listener < 0) return fail(ncclSystemError, "cannot listen: %s", strerror(errno));
  const Deadline deadline = Deadline::from_environment();
  int fd = connect_to(root.address, deadline);
  if (fd < 0) {
    close_fd(listener);
    char address[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &root.address.sin_addr, address, sizeof address);
    return fail(ncclSystemError, "cannot reach the root at %s:%d: %s", address,
                ntohs(root.address.sin_port), strerror(errno));
  }
  const RootHello hello{kIdMagic, root.nonce, comm.rank, comm.nranks, mine};
  std::vector<sockaddr_in> table(static_cast<std::size_t>(comm.nranks));
  ncclResult_t result = send_all(fd, &hello, sizeof hello, deadline);
  if (result == ncclSuccess)
    result = recv_all(fd, table.data(), table.size() * sizeof(sockaddr_in), Deadline{});
  close_fd(fd);
  if (result == ncclSuccess) result = connect_mesh(comm, listener, table);
  close_fd(listener);
  return result;
}

ncclResult_t connect_mesh(Comm& comm, int listener, std::span<const sockaddr_in> addresses) {
  comm.peers.assign(static_cast<std::size_t>(comm.nranks), PeerSockets{});
  // Ranks that advertise one address share a host: NCCL's node.
  comm.node_of.assign(static_cast<std::size_t>(comm.nranks), 0);
  comm.nnodes = 0;
  for (std::size_t rank = 0; rank < addresses.size(); ++rank) {
    std::size_t first = 0;
    while (addresses[first].sin_addr.s_addr != addresses[rank].sin_addr.s_addr) ++first;
    comm.node_of[rank] = first == rank ? comm.nnodes++ : comm.node_of[first];
  }
  const Deadline deadline = Deadline::from_environment();
  // Connect to the lower ranks (their listeners queue us until they accept), then accept the
  // higher ones: no two ranks wait for each other.
  for (int peer = 0; peer < comm.rank; ++peer) {
    for (SocketKind kind : {SocketKind::Control, SocketKind::Data}) {
      const int fd = connect_to(addresses[static_cast<std::size_t>(peer)], deadline);
      if (fd < 0)
        return fail(ncclSystemError, "cannot connect to rank %d: %s", peer, strerror(errno));
      PeerSockets& sockets = comm.peers[static_cast<std::size_t>(peer)];
      (kind == SocketKind::Control ? sockets.control : sockets.data) = fd;
      const MeshHello hello{kIdMagic, comm.hash, comm.rank, kind};
      if (ncclResult_t result = send_all(fd, &hello, sizeof hello, deadline); result != ncclSuccess)
        return result;
    }
  }
  for (int expected = 2 * (comm.nranks - 1 - comm.rank); expected > 0; --expected) {
    int fd = accept_one(listener, deadline);
    if (fd < 0) return fail(ncclSystemError, "waiting for higher ranks: %s", strerror(errno));
    MeshHello hello{};
    ncclResult_t result = recv_all(fd, &hello, sizeof hello, deadline);
    const bool valid = result == ncclSuccess && hello.magic == kIdMagic &&
                       hello.comm_hash == comm.hash && hello.rank > comm.rank &&
                       hello.rank < comm.nranks &&
                       (hello.kind == SocketKind::Control || hello.kind == SocketKind::Data);
    if (!valid) {
      close_fd(fd);
      return result != ncclSuccess ? result
                                   : fail(ncclInternalError, "unexpected connection to the mesh");
    }
    PeerSockets& sockets = comm.peers[static_cast<std::size_t>(hello.rank)];
    int& slot = hello.kind == SocketKind::Control ? sockets.control : sockets.data;
    if (slot >= 0) {
      close_fd(fd);
      return fail(ncclInternalError, "rank %d connected twice", hello.rank);
    }
    slot = fd;
  }
  return ncclSuccess;
}

ncclResult_t control_allgather(Comm& comm, std::span<const int> members, const void* mine,
                               std::size_t bytes, void* all) {
  const Deadline deadline = Deadline::from_environment();
  // Items are small: every send fits in the socket buffer, so sending to all before receiving
  // from any cannot deadlock.
  for (int member : members) {
    if (member == comm.rank) continue;
    if (ncclResult_t result = send_all(comm.control_fd(member), mine, bytes, deadline);
        result != ncclSuccess)
      return result;
  }
  char* out = static_cast<char*>(all);
  for (int member : members) {
    if (member == comm.rank) {
      std::memcpy(out, mine, bytes);
    } else if (ncclResult_t result = recv_all(comm.control_fd(member), out, bytes, deadline);
               result != ncclSuccess) {
      return result;
    }
    out += bytes;
  }
  return ncclSuccess;
}

}  // namespace fake_nccl
