// monitor/trace_schema: what the trace database is, for its writer (the monitor) and its readers
// (the analyzer and the `commtap` command) alike: the schema and its version, the row types both
// sides use, and the job id. A leaf: no MPI, no libunwind, nothing of the runtime.
#pragma once

#include <cstdint>
#include <string>

namespace commtap::monitor {

// The schema (monitor/schema.sql) and its version.
const char* schema_sql();
constexpr int kSchemaVersion = 17;
// The oldest version the readers still accept. Each version since has only added tables and
// nullable columns (5: probes; 6: probes' four times; 7: heartbeats.stalled_ns; 8:
// probes.slowest_ns; 9: probes.slowest_oneway_ns; 10: tcp_links; 11: heartbeats.sample_level and
// instances_thinned; 12: transfers.seen_pending_ns; 13: probes.from_held_ns and to_held_ns; 14:
// ranks.error_*, probes.method; 15: heartbeats.throttled_ns; 16: heartbeats.measuring_ns; 17:
// tcp_links.busy_us, rwnd_limited_us and notsent_bytes), so an
// older file is read with those empty: its findings are what that version's data supports.
constexpr int kOldestReadableSchemaVersion = 4;
// transfers.tag of commtap's own all-reduce messages (every message of a recorded instance):
// negative, so that it never collides with an application's (MPI tags are >= 0).
constexpr int kAlgorithmStepTag = -1;
extern const char* const kCommtapVersion;

// reference time = local now_ns() + offset_ns, within +-error_ns (error_ns < 0: no estimate).
struct ClockOffset {
  std::int64_t offset_ns = 0;
  std::int64_t error_ns = -1;
};

// One estimate of the offset to rank 0's clock, made when this rank's now_ns() read `at_ns`.
struct ClockEstimate {
  std::uint64_t at_ns = 0;
  ClockOffset offset;
};

// How far a rank got on one communicator: collectives entered and completed (sequence numbers).
struct CommProgress {
  std::int64_t comm_id = 0;
  std::uint64_t entered = 0;
  std::uint64_t completed = 0;
  bool operator==(const CommProgress&) const = default;
};

// One link probe measurement (the probes table): `bytes` from one host's leader to another's
// took `ns` (bytes = 1: half the fastest round trip, the latency; larger: the transfer).
struct ProbeRow {
  std::uint64_t at_ns = 0;  // the measuring rank's monotonic clock when its probe round began
  int from_node = 0, to_node = 0;
  std::string from_host, to_host;
  std::uint64_t bytes = 0;
  std::uint64_t ns = 0;
  // Latency rows: the fastest round trip's four times (NTP's): sent and received on the
  // measuring leader's monotonic clock, the peer leader's receipt and reply on its own. The
  // analyzer aligns the two clocks and gets each direction's one-way time. 0: not recorded.
  std::uint64_t sent_ns = 0, peer_received_ns = 0, peer_replied_ns = 0, received_ns = 0;
  // The slowest of the same measurements (0: not recorded): a retransmission shows there.
  std::uint64_t slowest_ns = 0;
  // The longest one-way delay from `from_host` to `to_host` in the round (0: not recorded):
  // latency rows over every small message that way (pings, replies, acknowledgements, as either
  // leader saw them), transfer rows the longest of its transfers' data legs, until the receiver had
  // it all. Each leg is split from its round trip with the clock offset of the fastest, so a stall
  // is put on the direction that lost the packet.
  std::uint64_t slowest_oneway_ns = 0;
  // How long the measured message(s) may have waited for each end's leader off the CPU: at each
  // completion the measurement waited for, the time since that leader last found it incomplete
  // (of the fastest round trip, or of the fastest transfer). A polling leader sees a message
  // within microseconds; one descheduled on a loaded machine only when it runs again, and that
  // wait is the scheduler's, not the link's. Both 0: not recorded (files before version 13).
  std::uint64_t from_held_ns = 0, to_held_ns = 0;
  // Measured asynchronously (probes/async_probes.hpp: pings answered wherever the peer leader
  // polls), not in a collective probe round.
  bool asynchronous = false;
};

// The kernel's counters of the TCP connections between two addresses (the tcp_links table,
// monitor/tcp_links.hpp): TCP_INFO's, added up over those connections since the rank's first read.
struct TcpLinkRow {
  std::string local, peer;        // addresses without the port: "10.0.0.2", "fd00::2"
  std::uint64_t connections = 0;  // open at this read
  std::uint64_t bytes_acked = 0, bytes_received = 0;
  std::uint64_t data_segs_out = 0, data_segs_in = 0;  // segments that carried data
  std::uint64_t retrans_segs = 0;                     // sent again (tcpi_total_retrans)
  std::int64_t dsack_dups = -1;  // resends the receiver had already (D-SACK); -1: not reported
  std::uint64_t rtt_us = 0, min_rtt_us = 0;  // largest smoothed and lowest round trip now
  // Time with data in flight, and of it with the receiver's window full; -1: not reported.
  std::int64_t busy_us = -1, rwnd_limited_us = -1;
  std::uint64_t notsent_bytes = 0;  // written and not yet sent, over the open connections now
  bool operator==(const TcpLinkRow&) const = default;
};

// The job id to use: `explicit_id` if not empty, else the batch system's (SLURM_JOB_ID,
// PBS_JOBID, LSB_JOBID, FLUX_JOB_ID), else one made from the UTC time and the process id.
// '/' and spaces become '_' so that the id can name a directory.
std::string choose_job_id(const std::string& explicit_id);

}  // namespace commtap::monitor
