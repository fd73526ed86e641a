// monitor/trace_budget: COMMTAP_TRACE_BUDGET, a bound on how much a rank's trace database grows
// per hour whatever the call rate. Two means, both on the writer thread:
//
// - The sampled rows (collectives and transfers, one per recorded instance) are thinned per
//   window to a level k (sampling.hpp's is_kept_at_level: one in 2^k of what COMMTAP_SAMPLE
//   recorded, nested, so that ranks at different levels still share the higher level's
//   instances whole). InstanceThinning chooses k from the rows the windows hold against the
//   sampled rows' share of the budget.
// - The rows written every window whatever the rate (aggregates, heartbeats, comm_progress,
//   tcp_links, clock_offsets) are kept at full resolution for kFullResolutionNs and merged into
//   kMergedWindowNs windows after that (the writer's downsampling, window_merge.cpp).
//
// Call totals and aggregates count every call at any level: only the per-instance rows thin.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "monitor/call_counters.hpp"

namespace commtap::monitor {

// Aggregates, heartbeats and the other per-window rows of the last 10 minutes stay at the
// window's resolution: twice the analyzer's default lookback (30 persistence windows of 10 s),
// so that its recent-window rules see every window. Older ones are merged into 1-minute windows
// aligned to the wall clock (equal on every rank).
constexpr std::uint64_t kFullResolutionNs = 600'000'000'000ull;
constexpr std::uint64_t kMergedWindowNs = 60'000'000'000ull;

// The sampled rows' share of the budget; the rest is for the per-window rows (their last
// kFullResolutionNs at full resolution and their merged windows), the call sites and the rest.
constexpr double kSampledShare = 0.5;
// Bytes a sampled row takes in the file (collectives and transfers rows with their share of
// b-tree pages, measured with bench/writer --hour: 55-60 bytes).
constexpr double kBytesPerSampledRow = 60.0;
// A rank starts with a credit of this much of the share (the first hour's rows need not wait for
// the hour), and keeps every recorded row while that credit lasts beyond a burst's: short jobs
// and tests keep all that COMMTAP_SAMPLE records.
constexpr double kStartSeconds = 1800.0;
// After that, the credit for bursts: the sampled rows may run ahead of their share by this much
// of it.
constexpr double kBurstSeconds = 600.0;

struct TraceBudgetSettings {
  std::uint64_t bytes_per_hour = 0;  // 0: unbounded (nothing thinned, nothing merged)
  std::uint64_t sample = 1;          // COMMTAP_SAMPLE, which the levels nest in
  double interval_s = 1.0;           // COMMTAP_INTERVAL: the first window's length

  // From the settings a rank database records: COMMTAP_TRACE_BUDGET (MB, 10^6 bytes, per
  // hour), COMMTAP_SAMPLE and COMMTAP_INTERVAL. Without COMMTAP_TRACE_BUDGET (databases that
  // tools and tests write) the trace is unbounded.
  static TraceBudgetSettings from(const std::vector<std::pair<std::string, std::string>>& settings);
};

// The key that decides whether a record is kept at a level: a collective's sequence number, a
// message's hash (sampling.hpp), from the record as `own_rank`'s database has it (a send's
// sender is the rank, a receive's the peer in `root`), so that both ends agree.
std::uint64_t thinning_key(const InstanceRecord& record, int own_rank);

// The highest level that keeps `record` (64: all of them).
unsigned thinning_depth(const InstanceRecord& record, int own_rank, std::uint64_t sample);

// A window's records after thinning, in their order, and the level that kept them.
struct ThinnedWindow {
  unsigned level = 0;
  std::vector<const InstanceRecord*> collectives, transfers;
  std::uint64_t thinned = 0;  // records left out
};

// Chooses one rank's level window by window. A rank starts at level 0 and stays there while its
// start credit (kStartSeconds of the share, less a burst's) pays for the rows. From then on the
// level follows the smoothed rate of recorded rows (rows and window lengths each averaged with
// weight 1/4, so one short or busy window does not move it) with hysteresis: it rises when the
// rate at the current level exceeds the share, and falls only when the next lower level would
// use under half of it. SPMD ranks see the same rates and so leave the start and settle on the
// same level; where they do not (a rate at a boundary, a busier rank), nesting keeps the higher
// level's instances complete. A burst beyond the smoothed rate is paid from a credit of
// kBurstSeconds of the share, and a window that would overdraw it is thinned further for itself
// only: the rows kept never exceed kStartSeconds of the share plus the share of the time since
// start.
class InstanceThinning {
 public:
  explicit InstanceThinning(const TraceBudgetSettings& settings);

  bool bounded() const { return rows_per_second_ > 0; }
  // The window's records of `own_rank`, thinned; `seconds` is the window's length.
  ThinnedWindow thin(const std::vector<InstanceRecord>& records, int own_rank, double seconds);
  // Records left out since start.
  std::uint64_t thinned() const { return thinned_; }
  // The level the rate chose (the level in force is 0 during the start, and a window may have
  // been thinned further by the credit).
  unsigned level() const { return level_; }
  // Whether the start credit still pays for every row.
  bool starting() const { return starting_; }

 private:
  std::uint64_t sample_;
  double rows_per_second_ = 0;  // the sampled rows' share of the budget; 0: unbounded
  double smoothed_rows_ = -1, smoothed_seconds_ = 0;
  double credit_rows_ = 0;
  bool starting_ = true;
  unsigned level_ = 0;
  std::uint64_t thinned_ = 0;
};

}  // namespace commtap::monitor
