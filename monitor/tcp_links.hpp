// monitor/tcp_links: the kernel's counters of this process's TCP connections (TCP_INFO), read by
// the trace writer. MPI libraries that run over TCP between hosts (MPICH's ch3 sockets and
// nemesis tcp, UCX's and libfabric's tcp transports) hold a connection per peer, and on each the
// kernel counts what no message timing can show for certain: the segments sent, those sent again,
// the resends the receiver reported as duplicates (D-SACK: the first copy had arrived, so nothing
// was lost), the round trip. A link that drops packets shows as resends on the connections that
// send over it, whatever the job's own traffic is and however it is sampled.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "monitor/trace_schema.hpp"

namespace commtap::monitor {

// One connection as TCP_INFO reports it now (counters since it opened; the kernel keeps segment
// counts in 32 bits, which wrap).
struct TcpConnection {
  std::string local, peer;        // "10.0.0.2:40093", "[fd00::2]:40093" (IPv4-mapped as IPv4)
  std::string local_ip, peer_ip;  // the same without the port (and brackets)
  std::uint64_t bytes_acked = 0, bytes_received = 0;
  std::uint32_t data_segs_out = 0, data_segs_in = 0, retrans_segs = 0;
  std::uint32_t dsack_dups = 0;
  bool has_dsack = false;  // the kernel reports dsack_dups
  std::uint32_t rtt_us = 0, min_rtt_us = 0;
  // The time it had data in flight (tcpi_busy_time), and of that the time the receiver's window
  // was full (tcpi_rwnd_limited: the receiving process did not read); in the kernel's ticks
  // (1-4 ms). What is left is the time the network, not either process, set the pace.
  std::uint64_t busy_us = 0, rwnd_limited_us = 0;
  bool has_busy = false;  // the kernel reports them (Linux 4.10)
  // Bytes the process wrote that the connection has not sent yet, now (tcpi_notsent_bytes): a
  // backlog the network does not take as fast as it comes.
  std::uint32_t notsent_bytes = 0;
};

// Every TCP connection of this process now (not listening sockets). Reads /proc/self/fd and asks
// each socket: no MPI, safe on any thread (a descriptor closed or reused meanwhile is skipped or
// read as what it is now). Empty where /proc is not mounted or the kernel predates the counters
// (Linux 4.6). At most 65,536 descriptors are looked at.
std::vector<TcpConnection> read_tcp_connections();

// The writer's view: per (local address, peer address) pair, the counters of all the
// connections between them added up since the first read, so that they only grow (a connection
// that closes keeps what it had counted at the last read; a counter that wrapped is carried on).
// Reads at most every `interval_ns`; where a read costs more than `max_cpu_share` of that interval
// in CPU time (a process holding many thousands of files), the next waits up to 10 intervals
// longer so that reading stays within the share.
class TcpLinkCounters {
 public:
  explicit TcpLinkCounters(std::uint64_t interval_ns, double max_cpu_share = 0.001)
      : interval_ns_(interval_ns), max_cpu_share_(max_cpu_share) {}

  // Called every window with the monotonic time: the address pairs whose totals changed since
  // the last rows returned, when a read is due or `last_window` (the final window: the connections
  // are still open, and a job shorter than the interval is read once at least); empty otherwise.
  std::vector<TcpLinkRow> due(std::uint64_t now_ns, bool last_window = false);

 private:
  std::uint64_t interval_ns_;
  double max_cpu_share_;
  std::uint64_t next_read_ns_ = 0;
  std::map<std::pair<std::string, std::string>, TcpConnection> connections_;  // by local, peer
  std::map<std::pair<std::string, std::string>, TcpLinkRow> totals_;  // by local IP, peer IP
  std::map<std::pair<std::string, std::string>, TcpLinkRow> written_;
};

}  // namespace commtap::monitor
