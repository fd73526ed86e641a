// Sockets of the fake NCCL: which address to advertise, listeners and connections, and the
// transfer engine that moves an operation's chunks over the data sockets.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>

#include "fake_nccl.hpp"
#include "profiler_hooks.hpp"

namespace fake_nccl {

std::int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1'000'000'000LL + now.tv_nsec;
}

Deadline Deadline::from_environment() {
  static const double seconds = [] {
    const char* value = std::getenv("FAKE_NCCL_TIMEOUT_S");
    return value ? std::atof(value) : 0.0;
  }();
  if (seconds <= 0) return Deadline{};
  return Deadline{monotonic_ns() + static_cast<std::int64_t>(seconds * 1e9)};
}

int Deadline::poll_timeout_ms() const {
  if (at_ns < 0) return -1;
  const std::int64_t left = at_ns - monotonic_ns();
  return left <= 0 ? 0 : static_cast<int>((left + 999'999) / 1'000'000);
}

bool Deadline::passed() const {
  return at_ns >= 0 && monotonic_ns() >= at_ns;
}

namespace {

// NCCL_SOCKET_IFNAME's syntax: a comma-separated list of name prefixes; a leading '=' asks for
// exact names, a leading '^' excludes the listed ones.
bool interface_selected(std::string_view name, std::string_view spec) {
  const bool exclude = !spec.empty() && spec.front() == '^';
  if (exclude) spec.remove_prefix(1);
  const bool exact = !spec.empty() && spec.front() == '=';
  if (exact) spec.remove_prefix(1);
  bool listed = false;
  while (!spec.empty() && !listed) {
    const std::size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    listed = exact ? name == item : !item.empty() && name.starts_with(item);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
  }
  return listed != exclude;
}

in_addr find_local_address() {
  in_addr found{htonl(INADDR_LOOPBACK)};
  const char* spec = std::getenv("NCCL_SOCKET_IFNAME");
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return found;
  for (ifaddrs* entry = interfaces; entry; entry = entry->ifa_next) {
    if (!entry->ifa_addr || entry->ifa_addr->sa_family != AF_INET) continue;
    if (!(entry->ifa_flags & IFF_UP)) continue;
    const bool chosen = spec && *spec ? interface_selected(entry->ifa_name, spec)
                                      : !(entry->ifa_flags & IFF_LOOPBACK);
    if (chosen) {
      found = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr;
      break;
    }
  }
  freeifaddrs(interfaces);
  return found;
}

void set_socket_options(int fd) {
  const int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

bool wait_for(int fd, short events, Deadline deadline) {
  pollfd entry{fd, events, 0};
  for (;;) {
    const int ready = poll(&entry, 1, deadline.poll_timeout_ms());
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

// A peer that went away shows as a closed or reset socket: NCCL calls that a remote error.
ncclResult_t io_failure(int error, const char* what) {
  const bool remote = error == 0 || error == ECONNRESET || error == EPIPE || error == ENOTCONN ||
                      error == ECONNABORTED || error == ETIMEDOUT || error == EHOSTUNREACH;
  if (remote) return fail(ncclRemoteError, "%s: peer closed the connection", what);
  return fail(ncclSystemError, "%s: %s", what, std::strerror(error));
}

}  // namespace

in_addr local_address() {
  static const in_addr address = find_local_address();
  return address;
}

int open_listener(sockaddr_in* advertised) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof any;
  if (bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&any), &length) != 0) {
    close(fd);
    return -1;
  }
  *advertised = sockaddr_in{};
  advertised->sin_family = AF_INET;
  advertised->sin_port = any.sin_port;
  advertised->sin_addr = local_address();
  return fd;
}

int connect_to(const sockaddr_in& address, Deadline deadline) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int error = 0;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    error = errno;
    if (error == EINPROGRESS && wait_for(fd, POLLOUT, deadline)) {
      socklen_t length = sizeof error;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    } else if (error == EINPROGRESS) {
      error = ETIMEDOUT;
    }
  }
  if (error != 0) {
    close(fd);
    errno = error;
    return -1;
  }
  set_socket_options(fd);
  return fd;
}

int accept_one(int listener, Deadline deadline) {
  for (;;) {
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      set_socket_options(fd);
      return fd;
    }
    if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) return -1;
    if (errno == EAGAIN && !wait_for(listener, POLLIN, deadline)) return -1;
  }
}

ncclResult_t send_all(int fd, const void* data, std::size_t bytes, Deadline deadline) {
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t sent = send(fd, next, bytes, MSG_NOSIGNAL);
    if (sent > 0) {
      next += sent;
      bytes -= static_cast<std::size_t>(sent);
    } else if (errno == EAGAIN) {
      if (!wait_for(fd, POLLOUT, deadline)) return fail(ncclSystemError, "send: timed out");
    } else if (errno != EINTR) {
      return io_failure(errno, "send");
    }
  }
  return ncclSuccess;
}

ncclResult_t recv_all(int fd, void* data, std::size_t bytes, Deadline deadline) {
  char* next = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t got = recv(fd, next, bytes, 0);
    if (got > 0) {
      next += got;
      bytes -= static_cast<std::size_t>(got);
    } else if (got == 0) {
      return io_failure(0, "recv");
    } else if (errno == EAGAIN) {
      if (!wait_for(fd, POLLIN, deadline)) return fail(ncclSystemError, "recv: timed out");
    } else if (errno != EINTR) {
      return io_failure(errno, "recv");
    }
  }
  return ncclSuccess;
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// ---- The transfer engine ------------------------------------------------------------------
namespace {

// Each chunk travels behind a header, so a peer that runs a different operation (or a
// different size) is reported instead of silently misread.
struct ChunkHeader {
  std::uint32_t magic;
  std::uint32_t step;
  std::uint64_t bytes;
};
constexpr std::uint32_t kChunkMagic = 0xfa4ec0de;

// The transfers to or from one peer in one direction, run in order.
struct Lane {
  int fd = -1;
  bool send = false;
  std::vector<Transfer*> transfers;
  std::size_t current = 0;      // index into transfers
  std::size_t offset = 0;       // start of the current chunk within the current transfer
  std::size_t chunk_bytes = 0;  // of the current chunk
  bool in_chunk = false;
  ChunkHeader header{};
  std::size_t header_done = 0;
  std::size_t payload_done = 0;
  char* scratch = nullptr;  // receives to be reduced land here first
  void* step = nullptr;
  std::uint64_t moved = 0;  // bytes so far: a lane that moves holds the timeout off

  bool finished() const { return current == transfers.size(); }
  Transfer& transfer() const { return *transfers[current]; }
};

// Reused between operations: a reduce needs a chunk-sized landing zone per receiving peer.
char* scratch_for(std::size_t lane) {
  thread_local std::vector<std::unique_ptr<char[]>> buffers;
  while (buffers.size() <= lane) buffers.push_back(std::make_unique<char[]>(kChunkBytes));
  return buffers[lane].get();
}

void begin_chunk(Lane& lane) {
  Transfer& transfer = lane.transfer();
  lane.chunk_bytes = std::min(kChunkBytes, transfer.bytes - lane.offset);
  lane.in_chunk = true;
  lane.header_done = lane.payload_done = 0;
  lane.step = nullptr;
  int step = 0;
  if (transfer.proxy) {
    step = transfer.proxy->next_step++;
    lane.step = profiler::proxy_step_ready(*transfer.proxy, step, lane.chunk_bytes);
  }
  if (lane.send)
    lane.header = ChunkHeader{kChunkMagic, static_cast<std::uint32_t>(step), lane.chunk_bytes};
}

// Every byte of the chunk is in the socket (send) or has arrived (receive).
void chunk_transmitted(Lane& lane) {
  Transfer& transfer = lane.transfer();
  if (transfer.proxy)
    profiler::proxy_step_transmitted(*transfer.proxy, lane.step, lane.chunk_bytes);
  if (!lane.send && transfer.reduce)
    reduce_into(transfer.data + lane.offset, lane.scratch,
                lane.chunk_bytes / type_size(transfer.type), transfer.type, transfer.reduction);
  if (transfer.proxy) profiler::proxy_step_stop(*transfer.proxy, lane.step);
  lane.in_chunk = false;
  lane.offset += lane.chunk_bytes;
  if (lane.offset >= transfer.bytes) {  // an empty transfer is one empty chunk
    ++lane.current;
    lane.offset = 0;
  }
}

// Moves as much as the socket takes without blocking. Returns false with *result set on error.
bool progress_send(Lane& lane, ncclResult_t* result) {
  while (!lane.finished()) {
    if (!lane.in_chunk) begin_chunk(lane);
    iovec parts[2];
    int count = 0;
    if (lane.header_done < sizeof lane.header)
      parts[count++] = {reinterpret_cast<char*>(&lane.header) + lane.header_done,
                        sizeof lane.header - lane.header_done};
    if (lane.payload_done < lane.chunk_bytes)
      parts[count++] = {lane.transfer().data + lane.offset + lane.payload_done,
                        lane.chunk_bytes - lane.payload_done};
    if (count > 0) {
      msghdr message{};
      message.msg_iov = parts;
      message.msg_iovlen = static_cast<std::size_t>(count);
      const ssize_t sent = sendmsg(lane.fd, &message, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EAGAIN || errno == EINTR) return true;
        *result = io_failure(errno, "send");
        return false;
      }
      const std::size_t left = static_cast<std::size_t>(sent);
      lane.moved += left;
      const std::size_t to_header = std::min(left, sizeof lane.header - lane.header_done);
      lane.header_done += to_header;
      lane.payload_done += left - to_header;
      if (lane.header_done < sizeof lane.header || lane.payload_done < lane.chunk_bytes) continue;
    }
    chunk_transmitted(lane);
  }
  return true;
}

bool progress_recv(Lane& lane, ncclResult_t* result) {
  while (!lane.finished()) {
    if (!lane.in_chunk) begin_chunk(lane);
    char* target;
    std::size_t wanted;
    if (lane.header_done < sizeof lane.header) {
      target = reinterpret_cast<char*>(&lane.header) + lane.header_done;
      wanted = sizeof lane.header - lane.header_done;
    } else {
      target = (lane.transfer().reduce ? lane.scratch : lane.transfer().data + lane.offset) +
               lane.payload_done;
      wanted = lane.chunk_bytes - lane.payload_done;
    }
    if (wanted > 0) {
      const ssize_t got = recv(lane.fd, target, wanted, 0);
      if (got == 0) {
        *result = io_failure(0, "recv");
        return false;
      }
      if (got < 0) {
        if (errno == EAGAIN || errno == EINTR) return true;
        *result = io_failure(errno, "recv");
        return false;
      }
      lane.moved += static_cast<std::size_t>(got);
      if (lane.header_done < sizeof lane.header) {
        lane.header_done += static_cast<std::size_t>(got);
      } else {
        lane.payload_done += static_cast<std::size_t>(got);
      }
      if (lane.header_done == sizeof lane.header && lane.payload_done == 0 &&
          (lane.header.magic != kChunkMagic || lane.header.bytes != lane.chunk_bytes)) {
        *result = fail(ncclSystemError,
                       "peer sent a %llu-byte chunk where a %zu-byte one was expected: the ranks "
                       "called different operations or sizes",
                       static_cast<unsigned long long>(lane.header.bytes), lane.chunk_bytes);
        return false;
      }
      if (lane.header_done < sizeof lane.header || lane.payload_done < lane.chunk_bytes) continue;
    }
    chunk_transmitted(lane);
  }
  return true;
}

// Sends to oneself pair with receives from oneself in order: a copy, as in NCCL.
ncclResult_t run_self_transfers(std::span<Transfer> transfers, int self) {
  std::vector<Transfer*> sends, receives;
  for (Transfer& transfer : transfers)
    if (transfer.peer == self) (transfer.send ? sends : receives).push_back(&transfer);
  if (sends.size() != receives.size())
    return fail(ncclInvalidUsage, "unmatched send/receive to self");
  for (std::size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->bytes != receives[i]->bytes)
      return fail(ncclInvalidUsage, "send/receive to self of different sizes");
    if (receives[i]->reduce) {
      reduce_into(receives[i]->data, sends[i]->data, sends[i]->bytes / type_size(sends[i]->type),
                  sends[i]->type, receives[i]->reduction);
    } else if (sends[i]->bytes > 0) {  // empty buffers may be NULL
      std::memmove(receives[i]->data, sends[i]->data, sends[i]->bytes);
    }
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t run_transfers(Comm& comm, std::span<Transfer> transfers) {
  if (ncclResult_t result = run_self_transfers(transfers, comm.rank); result != ncclSuccess)
    return result;
  std::vector<Lane> lanes;
  for (Transfer& transfer : transfers) {
    if (transfer.peer == comm.rank) continue;
    const int fd = comm.data_fd(transfer.peer);
    auto lane = std::find_if(lanes.begin(), lanes.end(), [&](const Lane& existing) {
      return existing.fd == fd && existing.send == transfer.send;
    });
    if (lane == lanes.end()) {
      lanes.push_back(Lane{});
      lane = lanes.end() - 1;
      lane->fd = fd;
      lane->send = transfer.send;
    }
    lane->transfers.push_back(&transfer);
  }
  for (std::size_t i = 0; i < lanes.size(); ++i)
    if (!lanes[i].send) lanes[i].scratch = scratch_for(i);

  std::vector<pollfd> waiting;
  std::vector<std::size_t> lane_of;  // waiting[i] belongs to lanes[lane_of[i]]
  Deadline deadline = Deadline::from_environment();
  ncclResult_t result = ncclSuccess;
  std::vector<bool> ready(lanes.size(), true);  // try everything once before waiting
  for (;;) {
    bool moved = false, all_done = true;
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      Lane& lane = lanes[i];
      if (lane.finished()) continue;
      if (ready[i]) {
        const std::uint64_t before = lane.moved;
        if (!(lane.send ? progress_send(lane, &result) : progress_recv(lane, &result))) {
          if (comm.aborted || comm.revoked)
            return fail(ncclSystemError, "operation aborted on the communicator");
          return result;
        }
        moved |= before != lane.moved;
      }
      all_done &= lane.finished();
    }
    if (all_done) return ncclSuccess;
    if (comm.aborted || comm.revoked)
      return fail(ncclSystemError, "operation aborted on the communicator");
    if (moved) deadline = Deadline::from_environment();

    waiting.clear();
    lane_of.clear();
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      if (lanes[i].finished()) continue;
      waiting.push_back(
          pollfd{lanes[i].fd, static_cast<short>(lanes[i].send ? POLLOUT : POLLIN), 0});
      lane_of.push_back(i);
    }
    const int count = poll(waiting.data(), waiting.size(), deadline.poll_timeout_ms());
    if (count < 0 && errno != EINTR) return fail(ncclSystemError, "poll: %s", std::strerror(errno));
    if (count == 0 && deadline.passed())
      return fail(ncclSystemError, "no progress for FAKE_NCCL_TIMEOUT_S seconds");
    std::fill(ready.begin(), ready.end(), false);
    for (std::size_t i = 0; i < waiting.size(); ++i)
      if (waiting[i].revents != 0) ready[lane_of[i]] = true;
  }
}

}  // namespace fake_nccl
