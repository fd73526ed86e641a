// The probe rule and the time its leaders were held off the CPU (probes.from_held_ns,
// to_held_ns): a measurement slow only by that time is the scheduler's and counts neither way; one
// slow by more than it is the network's. And the asynchronous probes' links, which wait for their
// hosts' other pairs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <utility>

#include "analyzer/health.hpp"
#include "analyzer/store/evidence_json.hpp"
#include "tests/fixtures/synthetic_job.hpp"
#include "tests/unit/analyzer/health_checks.hpp"

namespace {

using commtap::analyzer::evidence_json;
using commtap::analyzer::HealthOptions;
using commtap::fixtures::SyntheticJob;
using commtap::testing::analyze;
using commtap::testing::expect_exactly;

SyntheticJob probed_job() {
  SyntheticJob job;
  job.messages = false;
  job.probe_every_s = 5;
  return job;
}

bool touches(int host, int from, int to) {
  return from == host || to == host;
}

// h2's leader descheduled in every round: its round trips read 800 us against 30 us, and each
// waited 1.5 ms for it off the CPU (a reply it found only when it ran again).
TEST(ProbeHeld, AHostSlowOnlyWhileItsLeaderWasOffTheCpuIsNoFinding) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SyntheticJob job = probed_job();
    job.seed = seed;
    job.probe_latency_us = [](int from, int to, double) {
      return touches(2, from, to) ? 800.0 : 30.0;
    };
    // Without the held times (a file before version 13) it is h2's network, as before.
    expect_exactly(analyze(job, HealthOptions{}), {{"slow_host_network", "host h2"}});
    job.probe_held_us = [](int from, int to, double) {
      return std::pair{from == 2 ? 1500.0 : 0.0, to == 2 ? 1500.0 : 0.0};
    };
    expect_exactly(analyze(job, HealthOptions{}), {});
  }
}

// The same for throughput: h2's transfers took about 52 ms (5 MB/s, under the stalled-transfer
// rule's 100 ms), and their completions waited 40 ms at each end for a leader off the CPU.
TEST(ProbeHeld, TransfersSlowOnlyWhileALeaderWasOffTheCpuAreNoFinding) {
  SyntheticJob job = probed_job();
  job.probe_mb_per_s = [](int from, int to, double) { return touches(2, from, to) ? 5.0 : 1000.0; };
  job.probe_held_us = [](int from, int to, double) {
    return touches(2, from, to) ? std::pair{40'000.0, 40'000.0} : std::pair{0.0, 0.0};
  };
  expect_exactly(analyze(job, HealthOptions{}), {});
  job.probe_held_us = nullptr;  // a file before version 13: h2's network, as before
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_host_network", "host h2"}});
}

// A real fault on a loaded machine: the leaders are held off the CPU too, but for less than the
// excess; the rest is the network's and the host or link is named.
TEST(ProbeHeld, AFaultSlowerThanTheTimeOffTheCpuIsStillNamed) {
  SyntheticJob job = probed_job();
  job.probe_latency_us = [](int from, int to, double) {
    return touches(2, from, to) ? 2030.0 : 30.0;  // +2 ms at h2
  };
  job.probe_held_us = [](int from, int to, double) {
    return std::pair{touches(2, from, to) ? 1500.0 : 20.0, 300.0};  // 1.8 ms of 4 ms round trips
  };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_host_network", "host h2"}});

  job = probed_job();
  job.probe_mb_per_s = [](int from, int to, double) { return touches(2, from, to) ? 2.5 : 1000.0; };
  job.probe_held_us = [](int, int, double) { return std::pair{5'000.0, 5'000.0}; };
  const auto rate = analyze(job, HealthOptions{});
  expect_exactly(rate, {{"slow_host_network", "host h2"}});

  job = probed_job();
  job.probe_latency_us = [](int from, int to, double) {
    return touches(1, from, to) && touches(3, from, to) ? 2030.0 : 30.0;
  };
  job.probe_held_us = [](int, int, double) { return std::pair{400.0, 400.0}; };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h1 <-> h3"}});
}

// Two leaders that wait their turns for the CPU at every end of their transfers (1.4 ms each)
// wait mid-transfer too, where the held times do not see it: h0 <-> h3 at 33 MB/s against 1,000
// from 10 s, its pings as fast as the others'. Throughput alone, less than a loaded machine's
// worst, says nothing then (a clean all-to-all at 2 busy loops, docs/faults.md sweep 44). With
// the pings 2 ms slower, a delay's, the link is named; and 400 times slow, a rate limit's.
TEST(ProbeHeld, TransfersOfLeadersWaitingTheirTurnsForTheCpuAreNoFindingWhileThePingsAreFast) {
  auto pair_h0_h3 = [](int from, int to) { return touches(0, from, to) && touches(3, from, to); };
  SyntheticJob job = probed_job();
  job.probe_every_s = 2;
  job.probe_mb_per_s = [pair_h0_h3](int from, int to, double t) {
    return t >= 10 && pair_h0_h3(from, to) ? 33.0 : 1000.0;
  };
  job.probe_held_us = [pair_h0_h3](int from, int to, double t) {
    return t >= 10 && pair_h0_h3(from, to) ? std::pair{1400.0, 1400.0} : std::pair{5.0, 5.0};
  };
  expect_exactly(analyze(job, HealthOptions{}), {});
  job.probe_latency_us = [pair_h0_h3](int from, int to, double t) {
    return t >= 10 && pair_h0_h3(from, to) ? 2030.0 : 30.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 <-> h3"}});
  job.probe_latency_us = [](int, int, double) { return 30.0; };
  job.probe_mb_per_s = [pair_h0_h3](int from, int to, double t) {
    return t >= 10 && pair_h0_h3(from, to) ? 2.5 : 1000.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 <-> h3"}});
}

// Held in some rounds only: those count neither way, the others still make the case, and the
// evidence says how many were left out.
TEST(ProbeHeld, RoundsLeftOutAreCountedInTheEvidence) {
  SyntheticJob job = probed_job();
  job.seconds = 40;
  job.probe_mb_per_s = [](int from, int to, double) { return touches(2, from, to) ? 2.5 : 1000.0; };
  job.probe_held_us = [](int from, int to, double t) {
    const bool held = touches(2, from, to) && static_cast<int>(t) % 10 == 5;
    return std::pair{held ? 104'000.0 : 0.0, 0.0};
  };
  const auto health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_host_network", "host h2"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_GT(evidence_json(health.findings[0].evidence).value("held_rounds", 0), 0);
}

// Measurements of a pair less than a second apart are one observation: the asynchronous probes
// may measure a pair again within a second, and a leader held off the CPU in a burst slows each
// of them (ranks spinning on more ranks than cores). The same pair slow in measurements a second
// apart, as confirmations are, is a fault.
TEST(ProbeHeld, MeasurementsOfAPairWithinASecondAreOneObservation) {
  SyntheticJob job = probed_job();
  job.probe_mb_per_s = [](int from, int to, double t) {
    return from == 0 && to == 1 && t >= 10.4 ? 30.0 : 1000.0;
  };
  job.probe_every_s = 0.25;  // 6 slow measurements in the last 1.5 s: 2 observations
  job.seconds = 12;
  expect_exactly(analyze(job, HealthOptions{}), {});
  job.probe_every_s = 1;  // the same pair slow in 5 measurements 1 s apart
  job.seconds = 15;
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 -> h1"}});
}

// The asynchronous probes measure one pair at a time: here every directed pair once every 3 s, in
// turn a quarter second apart, and a pair that changed again 1 s and 2 s later (a leader's
// confirmations). A host's network fault at 18.9 s is seen first on one of its pairs, h1 -> h2
// (measured at 19.0, confirmed at 20.0 and 21.0), and on each of its other pairs once by 21.5 s.
constexpr int kPairs = 12;
int pair_index(int from, int to) {
  return from * 3 + (to < from ? to : to - 1);
}
bool near(double t, double at) {
  return std::abs(t - at) < 0.01;
}
SyntheticJob asynchronously_probed_job(const std::function<bool(int, int, double)>& slowed,
                                       double seconds) {
  SyntheticJob job = probed_job();
  job.probes_asynchronous = true;
  job.probe_every_s = 0.25;
  job.seconds = seconds;
  job.probed_at = [](int from, int to, double t) {
    const double turn = 0.25 * pair_index(from, to);
    const double since = std::fmod(t - turn + 3 * kPairs, 3.0);
    return near(since, 0) || near(since, 3) ||
           (from == 1 && to == 2 && (near(t, 20.0) || near(t, 21.0)));
  };
  job.probe_latency_us = [slowed](int from, int to, double t) {
    return slowed(from, to, t) ? 2030.0 : 30.0;
  };
  job.probe_mb_per_s = [slowed](int from, int to, double t) {
    return slowed(from, to, t) ? 5.0 : 1000.0;
  };
  job.killed_by = "running";  // a live analysis: the job goes on
  return job;
}

TEST(ProbeAsync, AHostSeenFirstOnOneOfItsPairsIsNotNamedAsThatLink) {
  auto host_h1 = [](int from, int to, double t) { return t >= 18.9 && touches(1, from, to); };
  SyntheticJob job = asynchronously_probed_job(host_h1, 21.5);
  const auto early = analyze(job, HealthOptions{});
  expect_exactly(early, {});
  ASSERT_EQ(early.evidence.probes.awaiting_hosts.size(), 1u);
  EXPECT_EQ(early.evidence.probes.awaiting_hosts[0].subject, "link h1 -> h2");
  // Once the host's other pairs confirm, the host.
  job = asynchronously_probed_job(host_h1, 26);
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_host_network", "host h1"}});
  // A job that has ended will not measure the other pairs: the link, as the evidence stands.
  job = asynchronously_probed_job(host_h1, 21.5);
  job.killed_by = "";
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h1 -> h2"}});
  // The same pair slow once at the job's start and not measured again until 19 s (the
  // collective rounds had it until then): not when its slowness began, and it still waits.
  auto host_h1_after_a_spike = [host_h1](int from, int to, double t) {
    return host_h1(from, to, t) || (from == 1 && to == 2 && near(t, 1.0));
  };
  job = asynchronously_probed_job(host_h1_after_a_spike, 21.5);
  job.probed_at = [schedule = job.probed_at](int from, int to, double t) {
    return from == 1 && to == 2 ? near(t, 1.0) || (t >= 18.9 && schedule(from, to, t))
                                : schedule(from, to, t);
  };
  expect_exactly(analyze(job, HealthOptions{}), {});
}

// A host's fault seen first on one of its pairs (h1 -> h2 at 19.0 s, confirmed at 20.0 and 21.0),
// then on one other pair (h3 -> h1 at 22.0), and on all of them only at the rounds from 25 s on:
// the link waits for the host rule's second round, which names the host 7 s after the link began
// to read slow (the link was named at 25.5 s with a wait of 6 s). Seen: a split
// pipeline's host network named as its link ctap0 -> ctap2 from 15 s to 17 s (docs/faults.md,
// sweep 40 E).
TEST(ProbeAsync, AHostWhoseOtherPairsReadSlowLateIsNotNamedAsItsFirstLink) {
  auto host_h1 = [](int from, int to, double t) { return t >= 18.9 && touches(1, from, to); };
  for (double seconds : {23.5, 25.5, 26.5}) {
    SyntheticJob job = asynchronously_probed_job(host_h1, seconds);
    job.probed_at = [](int from, int to, double t) {
      const bool round = near(t, 18.0) || (t > 24.9 && near(std::fmod(t, 1.0), 0));
      return round || (from == 1 && to == 2 && (near(t, 19.0) || near(t, 20.0) || near(t, 21.0))) ||
             (from == 3 && to == 1 && near(t, 22.0));
    };
    const auto health = analyze(job, HealthOptions{});
    if (seconds < 26) {
      expect_exactly(health, {});
    } else {
      expect_exactly(health, {{"slow_host_network", "host h1"}});
    }
  }
}

TEST(ProbeAsync, ALinkIsNamedOnceItsHostsOtherPairsAreMeasuredFine) {
  // By 21.5 s every other pair of h1 and h2 was measured fine since 19.0, but h1's own (its
  // leader's turns went to confirming the link), which are not waited for.
  auto link = [](int from, int to, double t) {
    return t >= 18.9 && touches(1, from, to) && touches(2, from, to);
  };
  expect_exactly(analyze(asynchronously_probed_job(link, 21.5), HealthOptions{}),
                 {{"slow_link", "link h1 -> h2"}});
  // One of h2's other pairs read as slow once since (h3 -> h2 at 20.75 s): the link waits, and
  // is named 9 s after its first slow reading whatever that pair says (both ways by then: the
  // fixture's link is slow both ways, and h2 -> h1 has had its turn).
  auto link_and_a_spike = [link](int from, int to, double t) {
    return link(from, to, t) || (from == 3 && to == 2 && near(t, 20.75));
  };
  for (double seconds : {21.5, 23.5, 25.5, 27.5})
    expect_exactly(analyze(asynchronously_probed_job(link_and_a_spike, seconds), HealthOptions{}),
                   {});
  expect_exactly(analyze(asynchronously_probed_job(link_and_a_spike, 29.5), HealthOptions{}),
                 {{"slow_link", "link h1 <-> h2"}});
}

// A link rate-limited so that a probe's transfer takes 130 ms (2 MB/s), which the stalled-transfer
// rule would count as a stall each time: while the probe rule holds the link back for its hosts'
// other pairs, the stall rule does not name it in its place (as `h1 <-> h2`, packets lost).
TEST(ProbeAsync, ARateLimitedLinkHeldBackIsNotNamedByItsStalledTransfers) {
  auto link = [](int from, int to, double t) {
    return t >= 18.9 && touches(1, from, to) && touches(2, from, to);
  };
  auto link_and_a_spike = [link](int from, int to, double t) {
    return link(from, to, t) || (from == 3 && to == 2 && near(t, 20.75));
  };
  for (double seconds : {21.5, 29.5}) {
    SyntheticJob job = asynchronously_probed_job(link_and_a_spike, seconds);
    job.probe_mb_per_s = [link_and_a_spike](int from, int to, double t) {
      return link_and_a_spike(from, to, t) ? 2.0 : 1000.0;
    };
    const auto health = analyze(job, HealthOptions{});
    if (seconds < 23) {
      expect_exactly(health, {});
    } else {
      expect_exactly(health, {{"slow_link", "link h1 <-> h2"}});
    }
  }
}

// A link rate-limited one way (h1 -> h2 at 2 MB/s from 10 s): the reverse's transfers are slow
// too while the limited way is busy (their acknowledgements queue behind its data), in most
// rounds but not all.
double rate_limited_one_way(int from, int to, double t) {
  if (t < 10) return 1000.0;
  if (from == 1 && to == 2) return 2.0;
  if (from == 2 && to == 1) return std::abs(t - 20) < 0.5 ? 1000.0 : 4.0;
  return 1000.0;
}

// That link, its latencies fine: both directions read slow, and the best transfer each way since
// tells which is the limited one.
TEST(ProbeHeld, ALinkRateLimitedOneWayIsNamedByItsBestTransfersEachWay) {
  SyntheticJob job = probed_job();
  job.probe_mb_per_s = rate_limited_one_way;
  const auto health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_link", "link h1 -> h2"}});
  // The summary gives both ways' best: the reverse's by its whole time, a lower bound of the
  // 1000 MB/s its network part reads.
  const std::string& summary = health.findings[0].summary;
  const std::string before = "this direction only (2.0 MB/s, back ";
  const auto at = summary.find(before);
  ASSERT_NE(at, std::string::npos) << summary;
  const double back = std::stod(summary.substr(at + before.size()));
  EXPECT_GT(back, 500) << summary;
  EXPECT_LE(back, 1000) << summary;
  EXPECT_NE(summary.find("MB/s or more)", at), std::string::npos) << summary;
}

// The same rate limit, whose pings' replies queue behind the limited way's data too: every round
// trip reads slow, and the clocks aligned by the fastest of them put the excess on the unlimited
// way's leg (700 us against 30). The transfers tell the limited way first: NPB CG's
// `ctap2 -> ctap3` at 20 Mbit/s was named the wrong way for two analyses when the one-way legs
// came first (docs/faults.md, sweep 56).
TEST(ProbeHeld, ARateLimitedLinkIsNamedByItsTransfersBeforeItsOneWayLegs) {
  SyntheticJob job = probed_job();
  job.probe_mb_per_s = rate_limited_one_way;
  job.probe_one_way_us = [](int from, int to, double t) {
    return t >= 10 && from == 2 && to == 1 ? 700.0 : 30.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h1 -> h2"}});
}

// A link slow one way (h1 -> h2 +3 ms) in a job of point-to-point calls, probed asynchronously,
// whose h1 leader computes between its MPI calls and finds what h2 sends 1 ms after it came: the
// reverse's one-way leg reads 1 ms slow in both hosts' measurements, and the link slow both ways,
// unless the leader's time away from its look is taken out (NPB MG, docs/faults.md sweep 40).
TEST(ProbeAsync, ALeaderAwayFromItsLookDoesNotMakeALinkSlowBothWays) {
  SyntheticJob job = probed_job();
  job.probes_asynchronous = true;
  job.probe_one_way_us = [](int from, int to, double t) {
    return t >= 10 && from == 1 && to == 2 ? 3030.0 : 30.0;
  };
  job.probe_held_us = [](int from, int to, double) {
    return std::pair{from == 1 && to == 2 ? 1000.0 : 0.0, from == 2 && to == 1 ? 1000.0 : 0.0};
  };
  job.probe_times_include_held = true;
  const auto health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_link", "link h1 -> h2"}});
  for (const auto& leg : health.evidence.clocks.probed_one_way) {
    if (leg.from == "h2" && leg.to == "h1") {
      EXPECT_LT(leg.one_way_us, 100) << leg.one_way_us;
    }
  }
}

// The same link, with h1's leader away 1.4 ms, longer than the 30 us leg it covers, in two of
// every three rounds (away since before the reply was sent): those rounds say only that the leg
// took at most its reading, and it reads next to nothing, not the -1.37 ms the subtraction
// gives, which looks like a clock error and the link slow both ways. Seen: an all-to-all
// transpose, named `<->` from 20 s on (docs/faults.md, sweep 41).
TEST(ProbeAsync, ALeaderAwayLongerThanTheLegItCoversTakesNoMoreThanTheLeg) {
  SyntheticJob job = probed_job();
  job.probes_asynchronous = true;
  job.probe_every_s = 1;
  job.probe_one_way_us = [](int from, int to, double t) {
    return t >= 10 && from == 1 && to == 2 ? 3030.0 : 30.0;
  };
  job.probe_held_us = [](int from, int to, double t) {
    const double away = std::fmod(t + 0.5, 3.0) < 2.0 ? 1400.0 : 0.0;
    return std::pair{from == 1 && to == 2 ? away : 0.0, from == 2 && to == 1 ? away : 0.0};
  };
  const auto health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_link", "link h1 -> h2"}});
  bool reverse_measured = false;
  for (const auto& leg : health.evidence.clocks.probed_one_way) {
    if (leg.from == "h2" && leg.to == "h1") {
      reverse_measured = true;
      EXPECT_NEAR(leg.one_way_us, 15, 20);
    }
  }
  EXPECT_TRUE(reverse_measured);
}

}  // namespace
