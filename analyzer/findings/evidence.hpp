// analyzer/findings/evidence: how sure a finding is. A detector observes its subject (a rank, a
// host, a link) again and again and counts how often it stood out: last to arrive at a collective
// that kept the others waiting, a message over the slow threshold. A healthy subject stands out
// too, by chance, about as often as `chance` says (one rank in four is last at a four-rank
// all-reduce); the evidence is how unlikely the observed count is under that chance. Observations
// closer in time than kIndependentNs count once: a rank descheduled for a time slice, or a burst of
// traffic, is one event however many collectives or messages it touched. The bound on that
// probability, times the number of subjects and spans the job's analysis tested, is the chance
// of the finding in a healthy job: the false-alarm rate it is held to (HealthOptions::
// false_alarm_rate) whatever the job's length, and `confidence` is one minus it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace commtap::analyzer {

// Observations of one subject closer than this in time count as one.
inline constexpr std::int64_t kIndependentNs = 100'000'000;

// An upper bound on the chance that independent observations, each standing out with
// probability at most `chance` (a value in [0, 1] per observation: a share of one), stand out
// `hits` times or more in `observations`: Chernoff's bound in Hoeffding's relative-entropy form,
// exp(-n KL(hits/n || chance)). 1 where the observed share is not above the chance.
inline double chance_bound(double hits, double observations, double chance) {
  if (observations <= 0) return 1;
  const double q = std::clamp(hits / observations, 0.0, 1.0);
  const double p = std::clamp(chance, 1e-12, 1 - 1e-12);
  if (q <= p) return 1;
  auto term = [](double a, double b) { return a <= 0 ? 0.0 : a * std::log(a / b); };
  const double divergence = term(q, p) + term(1 - q, 1 - p);
  return std::exp(-observations * divergence);
}

// What a finding's test saw (in its evidence as "test"; analyzer/store/evidence_json prints it).
struct EvidenceTest {
  std::string observed_what;  // "last to arrive", "slow messages", ...
  double observations = 0;    // independent observations (kIndependentNs apart at least)
  double hits = 0;            // of them, where the subject stood out
  double chance = 0;          // the probability of standing out in a healthy job
  std::uint64_t samples = 0;  // every observation before thinning (collectives, messages)
  double comparisons = 1;     // subjects and spans the analysis tested: the multiplicity
  // How far apart the observations are at least (s; 0: not said, as for probe rounds).
  double spacing_s = static_cast<double>(kIndependentNs) / 1e9;
  double p_value() const { return chance_bound(hits, observations, chance); }
  // Adds another subject's observations to this one's (a host's pairs together), at the larger
  // of the two chances.
  void pool(const EvidenceTest& other) {
    observations += other.observations;
    hits += other.hits;
    samples += other.samples;
    chance = std::max(chance, other.chance);
  }
  // The chance of this finding in a healthy job (a bound).
  double false_alarm() const { return std::min(1.0, p_value() * std::max(1.0, comparisons)); }
  double confidence() const { return 1 - false_alarm(); }

  // "38 of 38 independent observations, 25% by chance: false-alarm chance < 1e-12"
  std::string text() const {
    char buffer[200];
    const double fa = false_alarm();
    char bound[32], apart[48] = "", by_chance[16];
    if (fa < 1e-12)
      std::snprintf(bound, sizeof bound, "< 1e-12");
    else
      std::snprintf(bound, sizeof bound, "%.1g", fa);
    if (spacing_s > 0) std::snprintf(apart, sizeof apart, " %.1f s apart or more", spacing_s);
    std::snprintf(by_chance, sizeof by_chance, chance < 0.01 ? "%.1g%%" : "%.0f%%", 100 * chance);
    std::snprintf(buffer, sizeof buffer,
                  "%s in %.0f of %.0f observations%s, %s by chance: a healthy job shows this "
                  "with probability %s",
                  observed_what.c_str(), hits, observations, apart, by_chance, bound);
    return buffer;
  }
};

// Of the runs of newest observations in `stood_out` (oldest first), each tested against
// `chance`, the one least likely in a healthy job: replaces `best` where stronger.
inline void strongest_newest_run(const std::vector<bool>& stood_out, double chance,
                                 EvidenceTest& best) {
  int hits = 0;
  for (std::size_t length = 1; length <= stood_out.size(); ++length) {
    hits += stood_out[stood_out.size() - length] ? 1 : 0;
    EvidenceTest run = best;
    run.observations = static_cast<double>(length);
    run.hits = hits;
    run.samples = length;
    run.chance = chance;
    if (run.p_value() < best.p_value()) best = run;
  }
}

// What a finding's severity needs beyond its false-alarm rate: an error is a finding a healthy
// job would show a thousand times less often than the warning's rate, and one that costs the job
// at least HealthOptions::error_cost_share of its time (a cron user pages someone on an error).
inline constexpr double kErrorEvidenceFactor = 1e-3;

}  // namespace commtap::analyzer
