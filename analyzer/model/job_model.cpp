#include "analyzer/model/job_model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "analyzer/trace/fact_rows.hpp"

namespace commtap::analyzer {

std::string program_of(const std::string& command_line) {
  const std::string first = command_line.substr(0, command_line.find(' '));
  const std::size_t slash = first.rfind('/');
  return slash == std::string::npos ? first : first.substr(slash + 1);
}

std::vector<int> parse_members(const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    out.push_back(item == "?" ? -1 : std::atoi(item.c_str()));
    start = comma + 1;
  }
  return out;
}

std::int64_t bounded_ns(double ns) {
  constexpr double kMost = 4e18;
  return std::llround(std::clamp(ns, -kMost, kMost));
}

void reconcile_clock_estimates(std::vector<monitor::ClockEstimate>& estimates) {
  std::vector<std::size_t> by_precision(estimates.size());
  for (std::size_t i = 0; i < estimates.size(); ++i) by_precision[i] = i;
  std::stable_sort(by_precision.begin(), by_precision.end(), [&](std::size_t a, std::size_t b) {
    return estimates[a].offset.error_ns < estimates[b].offset.error_ns;
  });
  // The offsets settled so far, by time: held before the first and after the last, linear
  // between (as Rank::aligned reads them).
  std::map<std::uint64_t, std::int64_t> settled;
  for (const std::size_t i : by_precision) {
    monitor::ClockEstimate& e = estimates[i];
    e.offset.offset_ns = bounded_ns(static_cast<double>(e.offset.offset_ns));
    if (!settled.empty()) {
      const auto next = settled.lower_bound(e.at_ns);
      double predicted = 0;
      if (next == settled.begin())
        predicted = static_cast<double>(next->second);
      else if (next == settled.end())
        predicted = static_cast<double>(std::prev(next)->second);
      else {
        const auto previous = std::prev(next);
        const double f = static_cast<double>(e.at_ns - previous->first) /
                         static_cast<double>(next->first - previous->first);
        predicted = static_cast<double>(previous->second) +
                    f * static_cast<double>(next->second - previous->second);
      }
      const double low =
          static_cast<double>(e.offset.offset_ns) - static_cast<double>(e.offset.error_ns);
      const double high =
          static_cast<double>(e.offset.offset_ns) + static_cast<double>(e.offset.error_ns);
      e.offset.offset_ns = bounded_ns(std::clamp(predicted, low, high));
    }
    settled.emplace(e.at_ns, e.offset.offset_ns);  // a second estimate at one time: the first's
  }
}

bool load_facts(Job& job, const HealthOptions& options, std::string& error) {
  if (options.at_s > 0) {
    std::int64_t start = INT64_MAX;
    if (!earliest_rank_start(job, start, error)) return false;
    if (start != INT64_MAX) job.until_wall = start + static_cast<std::int64_t>(options.at_s * 1e9);
  }
  job.analyzed_at_wall =
      job.until_wall != INT64_MAX
          ? static_cast<std::uint64_t>(std::max<std::int64_t>(job.until_wall, 0))
          : static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::system_clock::now().time_since_epoch())
                                           .count());
  std::set<std::string> host_names;
  std::map<int, std::string> host_of_rank;
  // Each rank's own row of a communicator without a members list: (comm_rank, world rank).
  struct RowsOfComm {
    int size = 0;
    std::string created_by;
    std::vector<std::pair<int, int>> members;
  };
  std::map<std::int64_t, RowsOfComm> rows_of_comm;
  FactRows facts;
  facts.job_id = [&](const std::string& id) { job.job_id = id; };
  facts.rank = [&](const RankRow& row) {
    Rank& r = job.ranks[row.rank];
    r.rank = row.rank;
    host_of_rank[r.rank] = row.host;
    host_names.insert(row.host);
    r.ended_by = row.ended_by;
    r.start_ns = row.start_ns;
    r.init_offset_ns = row.clock_offset_ns;
    if (r.rank == 0) job.program = program_of(row.command_line);
    r.mpi_library = row.mpi_library;
    r.end_ns = row.end_ns;
    r.mpi_clock |= row.has_clock_error;
    r.error = row.error;
    r.seen = true;
  };
  facts.clock = [&](const ClockOffsetRow& row) {
    Rank& r = job.ranks[row.rank];
    r.clocks.push_back(row.estimate);
    r.mpi_clock = true;
  };
  facts.interval_ms = [&](const std::string& text) {
    const double ms = std::atof(text.c_str());
    if (ms > 0) job.interval_s = ms / 1000.0;
  };
  facts.heartbeat = [&](const HeartbeatRow& row) {
    Rank& r = job.ranks[row.rank];
    Heartbeat& h = row.running ? r.last_running : r.last;
    h.wall_ns = row.wall_ns;
    h.state = row.state;
    h.function = row.function;
    h.comm_id = row.comm_id;
    h.seq = row.seq;
    h.since_ns = row.since_ns;
  };
  facts.progress = [&](const ProgressRow& row) {
    Rank& r = job.ranks[row.rank];
    r.progress[row.progress.comm_id] = row.progress;
    r.progress_since[row.progress.comm_id] = row.wall_ns;
  };
  facts.nccl_aborts = [&](const CallCountRow& row) { job.ranks[row.rank].nccl_aborts = row.calls; };
  facts.communicator = [&](const CommunicatorRow& row) {
    if (row.members) {
      Communicator& c = job.comms[row.comm_id];
      c.size = row.size;
      c.members = parse_members(*row.members);
      return;
    }
    RowsOfComm& rows = rows_of_comm[row.comm_id];
    if (rows.size == 0) rows.size = row.size;
    rows.created_by = row.created_by;
    rows.members.emplace_back(row.comm_rank, row.rank);
  };
  const bool ok = read_job_facts(job, options.since_s > 0 && !options.read_all, facts, error);
  if (!ok) return false;
  // A rank that appears only in other tables has no ranks row: not a usable rank.
  for (auto it = job.ranks.begin(); it != job.ranks.end();)
    it = it->second.seen ? std::next(it) : job.ranks.erase(it);
  if (job.ranks.empty()) {
    error = job.path + ": no rank has written its facts yet";
    return false;
  }
  // MPI writes a communicator's members in its rank 0's row. Another library's (NCCL) cannot
  // tell a rank who the others are: every rank wrote its own comm_rank, and the members are
  // gathered from those rows, so that the detectors, the report and the export see its
  // collectives' members as an MPI communicator's. A rank whose file is missing is left out of
  // the list (not padded: the size is untrusted, and a list as long as it says could be any
  // length), the size stays the communicator's. An MPI communicator whose rank 0's row is
  // missing stays out, as it always did.
  for (auto& [id, rows] : rows_of_comm) {
    if (job.comms.count(id) || rows.created_by.rfind("MPI_", 0) == 0 ||
        rows.created_by == "unseen" || rows.size <= 0)
      continue;
    Communicator& c = job.comms[id];
    c.size = rows.size;
    c.nccl = true;
    std::sort(rows.members.begin(), rows.members.end());
    for (const auto& [comm_rank, rank] : rows.members)
      if (comm_rank >= 0 && comm_rank < rows.size) c.members.push_back(rank);
  }
  job.hosts.assign(host_names.begin(), host_names.end());
  for (auto& [number, rank] : job.ranks) {
    rank.host = static_cast<int>(
        std::lower_bound(job.hosts.begin(), job.hosts.end(), host_of_rank[number]) -
        job.hosts.begin());
    rank.wall_minus_monotonic =
        static_cast<std::int64_t>(rank.start_ns) -
        static_cast<std::int64_t>(rank.clocks.empty() ? 0 : rank.clocks.front().at_ns);
    job.now_wall = std::max(job.now_wall, rank.last.wall_ns);
    reconcile_clock_estimates(rank.clocks);
  }
  // Ranks without MPI's estimates: aligned by their collectives (a job without MPI_Init).
  if (!align_clocks_by_collectives(job, error)) return false;
  const Rank& first = job.ranks.begin()->second;
  job.wall_minus_aligned = first.wall_minus_monotonic;
  return true;
}

void set_read_horizon(Job& job, const HealthOptions& options) {
  job.read_from_wall = INT64_MIN;
  job.read_from_local.clear();
  if (options.since_s <= 0 || options.read_all) return;
  const double seconds =
      std::max(options.since_s, options.window_s) + 2 * std::max(1.0, job.interval_s) + 1;
  job.read_from_wall =
      static_cast<std::int64_t>(job.now_wall) - static_cast<std::int64_t>(seconds * 1e9);
  for (const auto& [number, rank] : job.ranks)
    job.read_from_local[number] = read_from_local(job, rank);
}

std::int64_t read_from_local(const Job& job, const Rank& rank) {
  if (job.read_from_wall == INT64_MIN) return INT64_MIN;
  // aligned = local + offset >= horizon for every local >= horizon - the largest offset.
  std::int64_t largest = rank.clocks.empty() ? rank.init_offset_ns : INT64_MIN;
  for (const monitor::ClockEstimate& e : rank.clocks)
    largest = std::max(largest, e.offset.offset_ns);
  return job.read_from_wall - job.wall_minus_aligned - largest;
}

std::int64_t since_wall_ns(const Job& job, const HealthOptions& options) {
  return options.since_s > 0 ? static_cast<std::int64_t>(job.now_wall) -
                                   static_cast<std::int64_t>(options.since_s * 1e9)
                             : INT64_MIN;
}
std::int64_t since_aligned_ns(const Job& job, const HealthOptions& options) {
  const std::int64_t wall = since_wall_ns(job, options);
  return wall == INT64_MIN ? wall : wall - job.wall_minus_aligned;
}

}  // namespace commtap::analyzer
