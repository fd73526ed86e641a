// analyzer/model/job_model: what the health analysis knows about one job (ranks, hosts, clocks,
// latest heartbeats, communicators), read from its files in a few streaming passes, and the
// row loops the detectors run over those files.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analyzer/findings/finding.hpp"
#include "analyzer/findings/job_evidence.hpp"
#include "analyzer/options.hpp"
#include "analyzer/trace/fact_rows.hpp"
#include "analyzer/trace/file_rows.hpp"
#include "analyzer/trace/job_files.hpp"
#include "analyzer/trace/recent_rows.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::analyzer {

struct Heartbeat {
  std::uint64_t wall_ns = 0;
  std::string state, function;
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0;
  std::uint64_t since_ns = 0;
};

struct Rank {
  int rank = 0;
  int host = 0;  // index into Job::hosts
  std::string ended_by;
  std::string mpi_library;  // 'none': an NCCL job that never called MPI_Init
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;  // wall clock of its last window
  std::int64_t init_offset_ns = 0;
  // Sorted by at_ns: MPI's estimates (clock_offsets), or, for a rank that has none, those made
  // from its collectives' completion times (collective_clocks.cpp).
  std::vector<monitor::ClockEstimate> clocks;
  bool mpi_clock = false;                 // it has a valid estimate of MPI's
  std::int64_t wall_minus_monotonic = 0;  // of this rank's clock
  Heartbeat last;                         // newest heartbeat
  Heartbeat last_running;                 // newest written while it ran ('computing' or 'in_call')
  std::map<std::int64_t, monitor::CommProgress> progress;
  // Per communicator: wall clock of the newest comm_progress row, i.e. since when its counts
  // have been what `progress` says (a row is written only when they change).
  std::map<std::int64_t, std::uint64_t> progress_since;
  std::uint64_t nccl_aborts = 0;  // ncclCommAbort calls (call_totals)
  MpiError error;                 // the fatal MPI error that ended it (ended_by 'mpi_error')
  bool seen = false;

  // This rank's monotonic time on rank 0's clock: the offset interpolated between estimates.
  std::int64_t aligned(std::uint64_t t) const {
    if (clocks.empty()) return static_cast<std::int64_t>(t) + init_offset_ns;
    if (t <= clocks.front().at_ns || clocks.size() == 1)
      return static_cast<std::int64_t>(t) + clocks.front().offset.offset_ns;
    if (t >= clocks.back().at_ns)
      return static_cast<std::int64_t>(t) + clocks.back().offset.offset_ns;
    auto next = std::upper_bound(
        clocks.begin(), clocks.end(), t,
        [](std::uint64_t v, const monitor::ClockEstimate& e) { return v < e.at_ns; });
    auto previous = next - 1;
    const double f = static_cast<double>(t - previous->at_ns) /
                     static_cast<double>(next->at_ns - previous->at_ns);
    const double offset =
        static_cast<double>(previous->offset.offset_ns) +
        f * static_cast<double>(next->offset.offset_ns - previous->offset.offset_ns);
    return static_cast<std::int64_t>(t) + static_cast<std::int64_t>(offset);
  }
};

struct Communicator {
  int size = 0;
  std::vector<int> members;  // world ranks in comm-rank order (-1: not known; NCCL: the ranks
                             // with a row, so fewer than `size` where files are missing)
  // Made by another library than MPI (NCCL): no rank knows the others, so the members were
  // gathered from every rank's own row (its comm_rank), and its progress counts enqueued and
  // completed work on the GPU rather than calls the host is blocked in.
  bool nccl = false;
};

// How the ranks' clocks were put on rank 0's (`commtap analyze --json`: the job's "clocks").
struct ClockMethod {
  int mpi_ranks = 0;         // ranks with MPI's estimates
  int collective_ranks = 0;  // ranks aligned by their collectives' completion times
  // ... and those whose estimates agreed with the offset of an aligned rank on their host, which
  // they took (one machine, one clock)
  int host_ranks = 0;
  std::vector<int> unaligned;  // ranks with neither (rank 0 itself never counts here)
  double error_ns = 0;         // the largest bound of the collective-completion estimates
  std::string describe() const;
};

// The job's files and read bounds (path, files, threads, rows_read, the cron horizon, --at) are
// its JobFiles part, which the trace layer's readers take.
struct Job : JobFiles {
  std::string job_id;
  std::vector<std::string> hosts;
  std::string program;  // rank 0's executable, without its directory ("" if unknown)
  std::map<int, Rank> ranks;
  std::map<std::int64_t, Communicator> comms;
  ClockMethod clock_method;
  double interval_s = 1.0;
  std::uint64_t now_wall = 0;  // the newest heartbeat's wall clock: the data's "now"
  // When the analysis looks (wall clock): --at's moment, else the analyzer's own clock. Only
  // for what the next window may still settle (a live analysis right after an event).
  std::uint64_t analyzed_at_wall = 0;
  // rank 0's clock (aligned ns) -> wall ns
  std::int64_t wall_minus_aligned = 0;
  std::int64_t until_aligned() const {
    return until_wall == INT64_MAX ? INT64_MAX : until_wall - wall_minus_aligned;
  }

  // Wall clock of the earliest rank's MPI_Init: 0 s on the report's time axes.
  std::int64_t start_wall() const {
    std::int64_t start = INT64_MAX;
    for (const auto& [number, r] : ranks)
      start = std::min(start, static_cast<std::int64_t>(r.start_ns));
    return start == INT64_MAX ? 0 : start;
  }

  std::string rank_name(int rank) const {
    auto found = ranks.find(rank);
    const std::string host =
        found == ranks.end() ? "?" : hosts[static_cast<std::size_t>(found->second.host)];
    return "rank " + std::to_string(rank) + " (" + host + ")";
  }
};

// "/opt/app/train --steps 9" -> "train": a ranks.command_line's executable.
std::string program_of(const std::string& command_line);

// "1,3,?" -> {1, 3, -1}: a communicators.members value.
std::vector<int> parse_members(const std::string& text);

// Offsets and bounds stay within what a file's times may span (untrusted_input: 0 to 4e18 ns), so
// that no aligned time or difference of two overflows, whatever a hostile file holds.
std::int64_t bounded_ns(double ns);

// One rank's offset estimates (sorted by at_ns) made to agree with each other, most precise
// first: each moves to the offset the more precise ones interpolate at its time (hold beyond
// them), as far as its own bound allows: the least drift that every bound allows. An exchange on a
// loaded machine (MPI_Finalize's, beside busy processes) can be bounded by milliseconds where
// MPI_Init's was by microseconds; interpolated as it stands, its midpoint would drag the offset
// milliseconds off over the whole job. Every estimate keeps its stated error, which still contains
// its new offset (and every offset is bounded_ns's). Called by load_facts on MPI's.
void reconcile_clock_estimates(std::vector<monitor::ClockEstimate>& estimates);

// Reads the job's facts from `job.files` (set by the caller), as they stood at options.at_s.
bool load_facts(Job& job, const HealthOptions& options, std::string& error);

// Aligns the clocks of the ranks that have no MPI estimate (a job that never called MPI_Init)
// to rank 0's by their collectives' completion times: fills their `clocks` with estimates and
// their `wall_minus_monotonic`, and `job.clock_method` (collective_clocks.cpp). Called by
// load_facts.
bool align_clocks_by_collectives(Job& job, std::string& error);

// Cron mode (--since, trace/recent_rows.hpp): sets job.read_from_wall (after load_facts: it
// needs the newest heartbeat) to the oldest time any detector looks at (--since, and the latest
// --window the stall rule reads), less a margin of two writer intervals and a second (a row
// before the first window, late writers, clock offsets), and job.read_from_local per rank.
void set_read_horizon(Job& job, const HealthOptions& options);

// The oldest time on the rank's own monotonic clock that is at or after job.read_from_wall on
// rank 0's clock, whatever its offset estimates (the largest is assumed).
std::int64_t read_from_local(const Job& job, const Rank& rank);

// The oldest wall-clock time --since keeps (INT64_MIN: everything).
std::int64_t since_wall_ns(const Job& job, const HealthOptions& options);
// The same on rank 0's monotonic clock, for instance and transfer times.
std::int64_t since_aligned_ns(const Job& job, const HealthOptions& options);

}  // namespace commtap::analyzer
