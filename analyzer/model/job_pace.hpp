// analyzer/model/job_pace: each rank's time per second of the job's wall clock, from the
// writer's windows (aggregates: time inside MPI and operations completed; heartbeats: time held
// off the CPU, and commtap's own measuring between the program's calls), and the job's pace from
// them: how many operations its ranks complete per second. Read once per analysis (health.cpp) for
// the rules that ask what a rank did second by second: its change (detect_rank_changes), what a
// network finding cost the job (network_cost), and which hosts their own CPU limit held
// (HostLimits: for the link probes' measurements and the held hosts of health.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analyzer/model/job_model.hpp"

namespace commtap::analyzer {

// One rank's time in one bin of the job's wall clock.
struct BinTime {
  double covered = 0, mpi = 0, held_off = 0;  // ns
  // commtap's own measuring outside MPI calls (heartbeats.measuring_ns): the rank is not
  // computing then, and its probe rounds and decisions wait for the other leaders, so it counts
  // as time inside MPI.
  double measuring = 0;
  // Of the time held off, its cgroup CPU limit's (heartbeats.throttled_ns); -1: not recorded.
  double throttled = -1;
  // Of the bin's covered time, the share its limit throttled (where recorded: throttled >= 0).
  double throttled_share() const { return throttled / std::max(1.0, covered); }
  // Operations completed (the aggregates' calls): the rank's progress, over `counted` ns of the
  // bin. The first write's are not counted: it spans MPI_Init and the program's set-up (3 s of
  // 40 in sweep 18's OSU runs), which complete few.
  double completed = 0, counted = 0;
  bool paced(double bin_ns) const { return counted >= 0.5 * bin_ns; }
  bool known(double bin_ns) const { return covered >= 0.5 * bin_ns; }
  // Inside MPI (waiting, in a coupled program).
  double waiting() const { return covered > 0 ? std::min(mpi + measuring, covered) / covered : 0; }
  // Not waiting for the others: computing, or held off the CPU wherever it was (a rank stopped
  // inside an MPI call counts its stop as time inside MPI).
  double own() const { return std::min(1.0, 1 - waiting() + held_off / std::max(1.0, covered)); }
};

// Whole bins of the job's COMMTAP_INTERVAL (at least 1 s) from `first` (wall clock).
struct BinGrid {
  std::int64_t first = 0, bin_ns = 1'000'000'000;
  int bins = 0;
};

using RankBins = std::map<int, std::vector<BinTime>>;  // rank -> one per bin of the grid

// Every rank's bins over the analysis's span.
struct JobTimes {
  BinGrid grid;
  RankBins ranks;
};

// Per rank and bin, from the writer's rows since `since_wall`.
bool read_bin_times(const Job& job, std::int64_t since_wall, JobTimes& out, std::string& error);

// The bins in which a host's ranks were held by their own cgroup CPU limit
// (heartbeats.throttled_ns): one of its ranks throttled kOwnLimitShare of the bin or more, and as
// much above the median of the job's ranks that recorded it then. A limit every rank shares (a
// container's) is the job's condition, not one host's. One host's limit makes it send, receive
// and answer late as a slow network would: its probe transfers (NPB SP with one host at 10 ms of
// CPU per 100 ms read 89 MB/s against 803 and was named slow_host_network beside slow_host in 5
// of 21 live analyses, docs/faults.md sweep 53) and its messages (NPB LU's host at 15 ms per
// 100 ms: `slow_link ctap1 -> ctap3` at WARNING beside slow_host, sweep 54). What it cannot tell
// apart: a host whose network slowed while its own limit held it.
class HostLimits {
 public:
  static constexpr double kOwnLimitShare = 0.10;
  HostLimits(const Job& job, const JobTimes& times);
  // Whether `host` was held in the bin holding `wall_ns` or the next (a probe round begun late
  // in a bin measures in the next).
  bool held(const std::string& host, std::int64_t wall_ns) const;
  // The hosts held in half or more of the whole bins from `from_wall` to `to_wall` (one at least).
  std::set<std::string> held_through(std::int64_t from_wall, std::int64_t to_wall) const;

 private:
  BinGrid grid_;
  std::map<std::string, std::set<int>> held_;  // host -> bins of the grid
};

// How much the job's pace fell from `onset_wall` on: one minus the median over ranks of each
// rank's median operations per bin since (counted from `since_wall`, at or after the onset)
// against before, over the bins it is paced in from the first bin every rank is paced in (the
// job's set-up is no baseline). Unknown (nullopt) where fewer than 3 ranks have `min_before`
// bins before and `min_after` since. A pace that rose reads 0.
std::optional<double> pace_fall_between(const RankBins& times, const BinGrid& grid,
                                        std::int64_t onset_wall, std::int64_t since_wall,
                                        int min_before, int min_after);

// The moment the job's pace fell most clearly (the split of its operations per bin, summed over
// the ranks, whose fall weighted by the bins on each side is largest), how much it fell from then
// on (pace_fall_between), and how far down its latest bins (as many as `min_after`) still are
// against the same baseline. Unknown where the job has fewer known bins than that or its pace never
// fell.
struct PaceFall {
  std::int64_t onset_wall = 0;
  double fall = 0, latest_fall = 0;
};
std::optional<PaceFall> largest_pace_fall(const RankBins& times, const BinGrid& grid,
                                          int min_before, int min_after);

}  // namespace commtap::analyzer
