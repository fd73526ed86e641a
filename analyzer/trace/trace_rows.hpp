// analyzer/trace/trace_rows: rows of the trace tables as the detectors read them, one struct per
// kind and one reader each, so that a table's columns are named in one place. A reader runs over
// every file of the job in turn (memory does not grow with the files) and calls `row` for each
// row; times are the writing rank's monotonic clock unless named wall.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/trace/job_files.hpp"
#include "analyzer/trace/recent_rows.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::analyzer {

// A link probe measurement (the probes table): a latency round (bytes <= 1) or a transfer, as its
// writer made it (monitor::ProbeRow: a time not recorded, NULL in the file, is 0), with the
// measuring rank. Host names are clean_text.
struct ProbeRow : monitor::ProbeRow {
  int rank = 0;
};
// Each file's probes oldest first.
bool each_probe(const JobFiles& job, const std::function<void(const ProbeRow&)>& row,
                std::string& error);

// A point-to-point transfer (the transfers table), sent or received.
struct TransferRow {
  int rank = 0, peer = 0;  // world ranks
  std::int64_t comm_id = 0, tag = 0, msg = 0;
  std::int64_t bytes = 0;
  std::uint64_t start_ns = 0;  // the send's start, or the receive's post
  std::uint64_t end_ns = 0;    // its completion
  // A receive's last moment seen not yet done (transfers.seen_pending_ns); 0: not known. Read by
  // each_receive only.
  std::uint64_t seen_pending_ns = 0;
  // Read by each_transfer only:
  bool send = false;       // direction 'send' (else 'recv')
  std::string function;    // the call that made it
  std::int64_t site = -1;  // its call site (-1: none recorded)
};
bool each_send(const JobFiles& job, const std::function<void(const TransferRow&)>& row,
               std::string& error);
bool each_receive(const JobFiles& job, const std::function<void(const TransferRow&)>& row,
                  std::string& error);
// Every transfer, sent and received, with its direction, function and call site.
bool each_transfer(const JobFiles& job, const std::function<void(const TransferRow&)>& row,
                   std::string& error);

// A completed collective instance record (the collectives table, exit_ns not null), as the
// slow-node passes read it.
struct CollectiveRow {
  int rank = 0;
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0;
  std::int64_t enter_ns = 0, exit_ns = 0;  // the rank's clock
  std::int64_t site = -1;                  // -1: none recorded
  // Read by each_collective_instance only:
  bool finished = true;  // exit_ns recorded (else it is 0)
  std::string function, algorithm;
  std::int64_t bytes = 0;
  std::int64_t root = -1;  // -1: none
};
// Every collective instance record, finished or not (the export's timeline; in cron mode those
// each_collective_row reads, from the horizon on).
bool each_collective_instance(const JobFiles& job,
                              const std::function<void(const CollectiveRow&)>& row,
                              std::string& error);
// The columns and condition of those rows, and one row of them.
extern const std::string kCollectiveColumns, kCompletedCollectives;
extern const std::vector<int> kCollectiveTimeColumns;
CollectiveRow collective_row(const ResultRow& s);
// Only its rank, instance and entry (exit_ns and site left unread: 0 and -1), of the columns
// kArrivalColumns, times kArrivalTimeColumns.
extern const std::string kArrivalColumns;
extern const std::vector<int> kArrivalTimeColumns;
CollectiveRow collective_arrival(const ResultRow& s);
// Every file's completed collectives (in cron mode the recent ones: recent_rows.hpp), observed
// per file on the reading threads and merged in file order (observe_files_in_order):
// `observe(Partial&, const CollectiveRow&)`, `merge(Partial&&)`.
// `arrivals_only`: the rows as collective_arrival reads them (fewer columns selected).
template <class Partial, class Observe, class Merge>
bool observe_completed_collectives(const JobFiles& job, const Observe& observe, const Merge& merge,
                                   std::string& error, bool arrivals_only = false) {
  return observe_collective_rows<Partial>(
      job, arrivals_only ? kArrivalColumns : kCollectiveColumns, kCompletedCollectives,
      arrivals_only ? kArrivalTimeColumns : kCollectiveTimeColumns,
      [&](Partial& partial, const ResultRow& s) {
        observe(partial, arrivals_only ? collective_arrival(s) : collective_row(s));
      },
      merge, error);
}

// What bounds a rank's clock against the wall clock (model/collective_clocks.cpp), read file by
// file: per rank the first and last collective entries, then per comm_progress row (at or
// before job.until_wall) the entries of the sampled instances just at or below and just above
// its `entered` count. Each row says whether its times are plausible (plausible_time); the
// callback returns false to refuse an implausible row it uses, which ends the read with the
// file's implausible_table_problem("collectives").
struct CollectiveEntrySpanRow {
  int rank = 0;
  std::int64_t first_enter_ns = 0, last_enter_ns = 0;
  std::int64_t last_written_ns = 0;  // wall: the file's last window, whatever --at says
  bool plausible = true;
};
struct ProgressEntriesRow {
  int rank = 0;
  std::int64_t wall_ns = 0;
  std::optional<std::int64_t> entered_at_ns, next_entered_ns;  // none: no such instance
  bool plausible = true;
};
bool each_clock_bound(const JobFiles& job,
                      const std::function<bool(const CollectiveEntrySpanRow&)>& span,
                      const std::function<bool(const ProgressEntriesRow&)>& progress,
                      std::string& error);

// The completed collective instances (exit_ns not null) of every file: how many, and each with
// its function and exit, file by file; `row` returns false as each_clock_bound's do.
bool count_completed_collectives(const JobFiles& job, std::uint64_t& count, std::string& error);
struct CompletionRow {
  int rank = 0;
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0;
  std::string function;
  std::int64_t exit_ns = 0;
  bool plausible = true;
};
bool each_completion(const JobFiles& job, const std::function<bool(const CompletionRow&)>& row,
                     std::string& error);

// A heartbeat written while a thread was in a call (state 'in_call'), every one of them.
struct InCallHeartbeatRow {
  int rank = 0;
  std::int64_t wall_ns = 0;
  std::string function;                             // '' where none
  std::int64_t comm_id = 0, seq = 0, since_ns = 0;  // 0 where none
  std::int64_t threads_in_calls = 0;
};
bool each_in_call_heartbeat(const JobFiles& job,
                            const std::function<void(const InCallHeartbeatRow&)>& row,
                            std::string& error);
// Those in a collective (a communicator and sequence number) for at least `at_least_ns` by then
// (wall_ns - since_ns).
bool each_long_in_call_heartbeat(const JobFiles& job, std::int64_t at_least_ns,
                                 const std::function<void(const InCallHeartbeatRow&)>& row,
                                 std::string& error);

// The innermost frame of a call site that has a symbol (call_sites, frame 0).
struct CallSiteRow {
  int rank = 0, site = 0;
  std::string symbol;               // mangled, as recorded
  std::optional<std::string> file;  // its source file, where known
  std::int64_t line = 0;
};
bool each_call_site(const JobFiles& job, const std::function<void(const CallSiteRow&)>& row,
                    std::string& error);

// A heartbeat's stall counter (heartbeats.stalled_ns where recorded) and, of that, its cgroup CPU
// limit's (throttled_ns; -1 where not recorded), and commtap's own measuring time outside MPI
// calls (measuring_ns; 0 where not recorded): each rank's rows in time order (in cron mode from
// the horizon on).
struct StallRow {
  int rank = 0;
  std::int64_t wall_ns = 0, stalled_ns = 0, throttled_ns = -1, measuring_ns = 0;
};
bool each_stall_row(const JobFiles& job, const std::function<void(const StallRow&)>& row,
                    std::string& error);

// A write of a rank's window: its time inside MPI (aggregates, summed per write by the caller),
// or a heartbeat (every write has one) with no time.
struct WindowWriteRow {
  int rank = 0;
  std::int64_t wall_ns = 0;
  std::int64_t mpi_ns = 0;
  std::int64_t calls = 0;  // aggregates: the operations completed in the window
};
bool each_aggregate_total(const JobFiles& job,
                          const std::function<void(const WindowWriteRow&)>& row,
                          std::string& error);
bool each_heartbeat_write(const JobFiles& job,
                          const std::function<void(const WindowWriteRow&)>& row,
                          std::string& error);

// A window's aggregate of one call site (function, its symbol, size class).
struct AggregateRow {
  std::int64_t wall_ns = 0;
  std::string function, symbol;  // symbol: '?' where unknown
  std::int64_t size_class = 0, calls = 0, total_ns = 0;
};
bool each_aggregate(const JobFiles& job, const std::function<void(const AggregateRow&)>& row,
                    std::string& error);

// The TCP counters (the tcp_links table): each rank's own addresses, and every row ordered by
// connection (rank, local address, peer address) and time.
struct TcpAddressRow {
  int rank = 0;
  std::string local_address;
};
bool each_tcp_address(const JobFiles& job, const std::function<void(const TcpAddressRow&)>& row,
                      std::string& error);
struct TcpLinkRow {
  int rank = 0;
  std::int64_t wall_ns = 0;
  std::string local_address, peer_address;
  std::uint64_t data_segs_out = 0, retrans_segs = 0, dsack_dups = 0, bytes_acked = 0;
  std::int64_t busy_us = -1, rwnd_limited_us = -1;  // -1: not recorded (schema 16 or older)
  std::int64_t notsent_bytes = 0;
};
bool each_tcp_link(const JobFiles& job, const std::function<void(const TcpLinkRow&)>& row,
                   std::string& error);

// A setting as the job's files recorded it (the settings table), each file's value in turn.
bool each_setting_value(const JobFiles& job, const std::string& name,
                        const std::function<void(const std::string&)>& value, std::string& error);

}  // namespace commtap::analyzer
