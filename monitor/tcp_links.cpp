#include "monitor/tcp_links.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <ranges>

namespace commtap::monitor {
namespace {

// A process with more descriptors than this (a server holding many files) is read up to here:
// an MPI library's connections are among the first a rank opens, and the writer must stay cheap.
constexpr int kMaxDescriptors = 65536;
// tcpi_state values (the kernel's tcp_states.h, not exported to user space; <netinet/tcp.h>
// names them but clashes with <linux/tcp.h>, whose struct tcp_info has the newer counters).
constexpr unsigned kStateClosed = 7, kStateListening = 10;

// The address without the port, IPv4-mapped IPv6 addresses as IPv4 (a dual-stack listener's
// connections then match the other end's plain IPv4 socket).
std::string ip_text(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    return ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text) ? text : "";
  }
  const auto& v6 = reinterpret_cast<const sockaddr_in6&>(address);
  if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr))
    return ::inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], text, sizeof text) ? text : "";
  return ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text) ? text : "";
}
std::uint16_t port_of(const sockaddr_storage& address) {
  return ntohs(address.ss_family == AF_INET
                   ? reinterpret_cast<const sockaddr_in&>(address).sin_port
                   : reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
}
std::string with_port(const std::string& ip, std::uint16_t port) {
  const bool v6 = ip.find(':') != std::string::npos;
  return (v6 ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

// The descriptor's connection, or false if it is not a connected TCP socket.
bool read_connection(int fd, TcpConnection& c) {
  int domain = 0, type = 0;
  socklen_t length = sizeof domain;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0) return false;  // ENOTSOCK
  if (domain != AF_INET && domain != AF_INET6) return false;
  length = sizeof type;
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) != 0 || type != SOCK_STREAM)
    return false;
  tcp_info info{};
  length = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return false;
  // Older kernels return a shorter struct: segment counts since 4.6, D-SACKs since 4.19.
  auto has = [&](std::size_t end) { return length >= end; };
  if (!has(offsetof(tcp_info, tcpi_data_segs_out) + sizeof info.tcpi_data_segs_out)) return false;
  if (info.tcpi_state == kStateListening || info.tcpi_state == kStateClosed) return false;
  sockaddr_storage local{}, peer{};
  socklen_t local_length = sizeof local, peer_length = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0)
    return false;
  c.local_ip = ip_text(local);
  c.peer_ip = ip_text(peer);
  if (c.local_ip.empty() || c.peer_ip.empty()) return false;
  c.local = with_port(c.local_ip, port_of(local));
  c.peer = with_port(c.peer_ip, port_of(peer));
  c.bytes_acked = info.tcpi_bytes_acked;
  c.bytes_received = info.tcpi_bytes_received;
  c.data_segs_out = info.tcpi_data_segs_out;
  c.data_segs_in = info.tcpi_data_segs_in;
  c.retrans_segs = info.tcpi_total_retrans;
  c.has_dsack = has(offsetof(tcp_info, tcpi_dsack_dups) + sizeof info.tcpi_dsack_dups);
  c.dsack_dups = c.has_dsack ? info.tcpi_dsack_dups : 0;
  c.rtt_us = info.tcpi_rtt;
  c.min_rtt_us = info.tcpi_min_rtt;
  c.notsent_bytes = info.tcpi_notsent_bytes;
  c.has_busy = has(offsetof(tcp_info, tcpi_rwnd_limited) + sizeof info.tcpi_rwnd_limited);
  if (c.has_busy) {
    c.busy_us = info.tcpi_busy_time;
    c.rwnd_limited_us = info.tcpi_rwnd_limited;
  }
  return true;
}

std::uint64_t thread_cpu_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(t.tv_nsec);
}

}  // namespace

std::vector<TcpConnection> read_tcp_connections() {
  std::vector<TcpConnection> connections;
  DIR* directory = ::opendir("/proc/self/fd");
  if (directory == nullptr) return connections;
  const int own = ::dirfd(directory);
  int seen = 0;
  while (const dirent* entry = ::readdir(directory)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    if (++seen > kMaxDescriptors) break;
    const int fd = std::atoi(entry->d_name);
    TcpConnection c;
    if (fd != own && read_connection(fd, c)) connections.push_back(std::move(c));
  }
  ::closedir(directory);
  return connections;
}

std::vector<TcpLinkRow> TcpLinkCounters::due(std::uint64_t now_ns, bool last_window) {
  if (now_ns < next_read_ns_ && !last_window) return {};
  const std::uint64_t cpu_before = thread_cpu_ns();
  std::vector<TcpConnection> now = read_tcp_connections();
  std::map<std::pair<std::string, std::string>, TcpConnection> open;
  for (TcpLinkRow& total : totals_ | std::views::values) {
    total.connections = 0;
    total.rtt_us = 0;
    total.notsent_bytes = 0;
  }
  for (TcpConnection& c : now) {
    TcpLinkRow& total = totals_[{c.local_ip, c.peer_ip}];
    total.local = c.local_ip;
    total.peer = c.peer_ip;
    auto last = connections_.find({c.local, c.peer});
    // Bytes are counted in 64 bits: fewer than before is a new connection on the same addresses.
    const bool fresh = last == connections_.end() || c.bytes_acked < last->second.bytes_acked ||
                       c.bytes_received < last->second.bytes_received;
    const TcpConnection before = fresh ? TcpConnection{} : last->second;
    // Unsigned 32-bit differences: right across a wrap of the counter.
    total.data_segs_out += static_cast<std::uint32_t>(c.data_segs_out - before.data_segs_out);
    total.data_segs_in += static_cast<std::uint32_t>(c.data_segs_in - before.data_segs_in);
    total.retrans_segs += static_cast<std::uint32_t>(c.retrans_segs - before.retrans_segs);
    if (c.has_dsack)
      total.dsack_dups = std::max<std::int64_t>(total.dsack_dups, 0) +
                         static_cast<std::uint32_t>(c.dsack_dups - before.dsack_dups);
    if (c.has_busy) {
      // 64-bit times since the connection opened: a time that fell is a reused descriptor's.
      const auto grown = [](std::uint64_t current, std::uint64_t then) {
        return current >= then ? current - then : current;
      };
      total.busy_us = std::max<std::int64_t>(total.busy_us, 0) +
                      static_cast<std::int64_t>(grown(c.busy_us, before.busy_us));
      total.rwnd_limited_us =
          std::max<std::int64_t>(total.rwnd_limited_us, 0) +
          static_cast<std::int64_t>(grown(c.rwnd_limited_us, before.rwnd_limited_us));
    }
    total.bytes_acked += c.bytes_acked - before.bytes_acked;
    total.bytes_received += c.bytes_received - before.bytes_received;
    total.connections += 1;
    total.notsent_bytes += c.notsent_bytes;
    total.rtt_us = std::max<std::uint64_t>(total.rtt_us, c.rtt_us);
    total.min_rtt_us = total.min_rtt_us == 0
                           ? c.min_rtt_us
                           : std::min<std::uint64_t>(total.min_rtt_us, c.min_rtt_us);
    open.emplace(std::pair{c.local, c.peer}, std::move(c));
  }
  connections_ = std::move(open);  // closed ones are forgotten: their addresses may come back
  std::vector<TcpLinkRow> rows;
  for (const auto& [key, total] : totals_) {
    auto [written, added] = written_.try_emplace(key, total);
    if (!added && written->second == total) continue;
    written->second = total;
    rows.push_back(total);
  }
  const double cpu = static_cast<double>(thread_cpu_ns() - cpu_before);
  const double budget = max_cpu_share_ * static_cast<double>(interval_ns_);
  const double intervals = std::clamp(budget > 0 ? cpu / budget : 1.0, 1.0, 11.0);
  // A tenth early: the writer's windows that call this come with some jitter.
  next_read_ns_ =
      now_ns + static_cast<std::uint64_t>((intervals - 0.1) * static_cast<double>(interval_ns_));
  return rows;
}

}  // namespace commtap::monitor
