// Network findings by what they cost the job (docs/analyzer.md, "Severity"). A network rule
// weighs evidence, not cost: a link delayed by 3 ms on a pair the job waits for every step can
// slow the job by 40% and still read as a WARNING when only part of its messages were recorded.
// The job's pace says what it cost: the operations its ranks complete per second, which fall
// when its steps take longer, whatever calls and communicators the program uses.
//
// What this assumes: the fall belongs to the network finding. That holds only where nothing else
// found explains it; with a slow rank or host, a hang or a lost rank in the same analysis the
// fall may be theirs, and the network findings keep the severity their evidence gave them. What
// it cannot tell apart: the job's own change of phase (a solver whose steps grow) from a fault
// that began at the same moment; such a fall only raises a finding the evidence already made.
#include "analyzer/detect/detectors.hpp"

#include <algorithm>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/model/job_pace.hpp"

namespace commtap::analyzer {

namespace {

// Bins (of the job's COMMTAP_INTERVAL, at least 1 s) on each side of the fall, as the rule by
// change asks of a rank (detect_rank_changes.cpp).
constexpr int kMinBefore = 5, kMinAfter = 3;
// Under this a fall is a loaded machine's drift, not a moment (a clean CG at load 16 read 3.3%).
constexpr double kNoticeableFall = 0.05;

bool is_network(const Finding& f) {
  return f.kind == finding_kind::slow_link || f.kind == finding_kind::slow_host_network;
}

}  // namespace

void cost_network_findings(const Job& job, const HealthOptions& options, const JobTimes& times,
                           std::vector<Finding>& findings) {
  if (std::none_of(findings.begin(), findings.end(), is_network)) return;
  const bool other_cause = std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
    return !is_network(f) && f.kind != finding_kind::degradation;
  });
  if (other_cause) return;
  const std::optional<PaceFall> fall =
      largest_pace_fall(times.ranks, times.grid, kMinBefore, kMinAfter);
  if (!fall) return;
  const double since_start_s = static_cast<double>(fall->onset_wall - job.start_wall()) / 1e9;
  char at[32];
  std::snprintf(at, sizeof at, "%.0f s", since_start_s);
  // What the fault costs the job now: a fall it recovered from (another job's load that came and
  // went: a clean coupled run at load 16 lost 14% for 12 s) is not what a fault that still holds
  // costs it, so the cost is the smaller of the fall and how far down the latest bins still are.
  const double cost = std::min(fall->fall, fall->latest_fall);
  for (Finding& f : findings) {
    if (!is_network(f)) continue;
    f.evidence.job_pace_fall = cost;
    f.summary += std::string("; the job's pace (operations completed per second) ") +
                 (cost >= kNoticeableFall
                      ? "fell by " + percent_text(cost) + " from " + at + " into the job on"
                      : "is within " + percent_text(kNoticeableFall) + " of what it was before " +
                            at + " into the job");
    if (cost >= options.error_cost_share) f.severity = Severity::error;
  }
}

}  // namespace commtap::analyzer
