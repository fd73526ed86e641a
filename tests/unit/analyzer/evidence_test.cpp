// How much evidence each of the analyzer's rules needs: for every rule and four job lengths
// (2 s, 10 s, 60 s, 1 h), seeded synthetic jobs with realistic noise, healthy and with one blatant
// fault, analyzed with the DEFAULT options (what `commtap analyze` runs with, not the tests'
// short windows). Each cell measures the false-alarm rate (healthy jobs with any finding), the
// power (faulty jobs where the expected finding is the only one, or the first for slow_rank) and
// the expected finding's severity, prints them as a table row ("[evidence] ..."), and asserts
// the targets: no false alarm at any length; power at least N-1 of N at every length; the
// severity the fault's cost calls for (an error where it costs the job 2% of its time or more).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/health.hpp"
#include "tests/fixtures/synthetic_job.hpp"
#include "tests/unit/analyzer/health_checks.hpp"
#include "tests/unit/temp_dir.hpp"

namespace {

using commtap::analyzer::Finding;
using commtap::analyzer::HealthOptions;
using commtap::analyzer::JobHealth;
using commtap::analyzer::Severity;
using commtap::fixtures::SyntheticJob;
using commtap::testing::analyze;
using commtap::testing::describe;
using commtap::testing::TempDir;

constexpr int kRanks = 8, kHosts = 4;
constexpr double kFaultUs = 3000;  // every fault: 3 ms, blatant next to 40 us of jitter

enum class Rule { slow_rank, slow_host, slow_link, slow_host_network };

// The finding kind each rule's faults must be named as.
const char* rule_name(Rule rule) {
  namespace kind = commtap::analyzer::finding_kind;
  constexpr const char* names[] = {kind::slow_rank, kind::slow_host, kind::slow_link,
                                   kind::slow_host_network};
  return names[static_cast<int>(rule)];
}

// A job length, and the period that gives it enough all-reduces while the whole file stays fast.
// An hour is one step a second and N = 4: its 3,600 writer windows per rank cost about 1.5 s of
// CPU per job whatever the period (half of this file's time). At a step a second a 10 s window
// holds 10 all-reduces and 2 message rounds, so one noise burst weighs more in the latest window
// than at 500 ms per step.
struct Length {
  const char* name;
  double seconds;
  double period_ms;
  int jobs;  // N healthy and N faulty
};
constexpr Length k2s{"2s", 2, 50, 10}, k10s{"10s", 10, 50, 10}, k60s{"60s", 60, 50, 10},
    k1h{"1h", 3600, 1000, 4};

// Every job's messages go every 4th step (the fixture's default).
constexpr int kMessageEvery = 4;

// The noise every job carries, healthy or not, drawn from its seed: what a real job shows that
// is nobody's fault and must not be reported. Kept in steps, not seconds: a burst that fell
// between two all-reduces (or two message rounds) would be no noise at all.
struct Noise {
  // One rank late by 2-10 ms for up to 200 ms (another job's burst on its node, a page-cache
  // flush), about once per 10 s of job and at least once: the all-reduces of 1 to 200 ms / period
  // steps, at least one.
  struct Burst {
    long first, last;  // steps
    int rank;
    double late_us;
  };
  // One host pair's messages (both ways) 5 ms slower for up to 100 ms (a switch buffer filling):
  // the messages of one round, as often as the bursts.
  struct LinkBurst {
    long step;
    int a, b;
  };
  std::vector<Burst> bursts;  // by first step
  std::vector<LinkBurst> link_bursts;
  long longest = 1;  // steps of the longest burst
  // The program's own structure: rank 0 writes a checkpoint at one step in every 100 and arrives
  // 20 ms late there.
  long checkpoint_step = 0;
  double period_ms = 50;

  Noise(std::uint64_t seed, double seconds, double period) : period_ms(period) {
    std::mt19937_64 random(seed * 0x9E3779B97F4A7C15ull + 17);
    std::uniform_real_distribution<double> unit(0, 1);
    auto below = [&](long n) {
      return static_cast<long>(random() % static_cast<std::uint64_t>(n));
    };
    const long steps = std::max(1L, std::lround(seconds * 1000 / period));
    longest = std::max(1L, static_cast<long>(200 / period));
    const int count = std::max(1, static_cast<int>(std::lround(seconds / 10)));
    for (int i = 0; i < count; ++i) {
      const long first = below(steps);
      bursts.push_back({first, first + below(longest), static_cast<int>(below(kRanks)),
                        2000 + 8000 * unit(random)});
      const int a = static_cast<int>(below(kHosts));
      const int b = (a + 1 + static_cast<int>(below(kHosts - 1))) % kHosts;
      link_bursts.push_back({below(std::max(1L, steps / kMessageEvery)) * kMessageEvery, a, b});
    }
    std::sort(bursts.begin(), bursts.end(),
              [](const Burst& x, const Burst& y) { return x.first < y.first; });
    checkpoint_step = below(100);
  }

  long step_at(double t) const { return std::lround(t * 1000 / period_ms); }

  double late_us(int rank, double t) const {
    const long step = step_at(t);
    double late = rank == 0 && step % 100 == checkpoint_step ? 20'000 : 0;
    // Only bursts that began within the longest one's steps before this one can cover it.
    auto it = std::upper_bound(bursts.begin(), bursts.end(), step,
                               [](long at, const Burst& b) { return at < b.first; });
    while (it != bursts.begin()) {
      --it;
      if (it->first <= step - longest) break;
      if (it->rank == rank && step <= it->last) late += it->late_us;
    }
    return late;
  }

  double link_us(int from, int to, double t) const {
    const long step = step_at(t);
    for (const LinkBurst& b : link_bursts)
      if (b.step == step && ((from == b.a && to == b.b) || (from == b.b && to == b.a))) return 5000;
    return 0;
  }
};

// One seeded job of `rule`'s cell: healthy, or with the rule's fault on a subject its seed picks
// (so that it is not always rank 1 or host h0). `expected` gets the subject the finding must name.
SyntheticJob make_job(Rule rule, const Length& length, std::uint64_t seed, bool faulty,
                      std::string& expected) {
  SyntheticJob job;
  job.ranks = kRanks;
  job.hosts = kHosts;
  job.seconds = length.seconds;
  job.period_ms = length.period_ms;
  job.seed = seed;
  job.jitter_us = 40;
  job.message_every = kMessageEvery;
  auto noise = std::make_shared<const Noise>(seed, length.seconds, length.period_ms);
  job.late_us = [noise](int rank, double t) { return noise->late_us(rank, t); };
  job.link_us = [noise](int from, int to, double t) { return noise->link_us(from, to, t); };
  if (!faulty) return job;
  // The others wait for a late rank inside the all-reduce, 3 ms in every one: the time-share
  // rule's evidence that it computes slowly (the fixture's aggregates hold it as receive waits).
  const double others_wait_ms = kFaultUs / 1000 * 1000 / length.period_ms;
  const int host = static_cast<int>(seed % kHosts);
  switch (rule) {
    case Rule::slow_rank: {
      const int late = 1 + static_cast<int>(seed % (kRanks - 1));  // not rank 0, the checkpointer
      job.late_us = [noise, late](int rank, double t) {
        return noise->late_us(rank, t) + (rank == late ? kFaultUs : 0.0);
      };
      job.receive_wait_ms = [late, others_wait_ms](int rank) {
        return rank == late ? 0.0 : others_wait_ms;
      };
      expected = "rank " + std::to_string(late) + " (h" + std::to_string(job.host_of(late)) + ")";
      break;
    }
    case Rule::slow_host: {
      job.late_us = [noise, host](int rank, double t) {
        return noise->late_us(rank, t) + (rank * kHosts / kRanks == host ? kFaultUs : 0.0);
      };
      job.receive_wait_ms = [host, others_wait_ms](int rank) {
        return rank * kHosts / kRanks == host ? 0.0 : others_wait_ms;
      };
      expected = "host h" + std::to_string(host);
      break;
    }
    case Rule::slow_link: {
      const int from = host;
      const int to = (from + 1 + static_cast<int>((seed / kHosts) % (kHosts - 1))) % kHosts;
      job.link_us = [noise, from, to](int a, int b, double t) {
        return noise->link_us(a, b, t) + (a == from && b == to ? kFaultUs : 0.0);
      };
      expected = "link h" + std::to_string(from) + " -> h" + std::to_string(to);
      break;
    }
    case Rule::slow_host_network:
      job.link_us = [noise, host](int a, int b, double t) {
        return noise->link_us(a, b, t) + (a == host || b == host ? kFaultUs : 0.0);
      };
      expected = "host h" + std::to_string(host);
      break;
  }
  return job;
}

// One job of a cell and what the analyzer found in it.
struct Run {
  std::uint64_t seed = 0;
  bool faulty = false;
  std::string expected;  // the subject its finding must name
  JobHealth health;
  std::string error;  // writing or analyzing it failed
};

// Where the jobs are written: in memory (/dev/shm) where there is one. An hour's 3,600 windows
// of 8 ranks are 29,000 SQLite commits a job, and on a disk their syncs took half of a cell's
// time (23 s against 13 s on tmpfs, 2 cores), more where other work shares the disk.
std::string job_directory_base() {
  std::error_code ec;
  const std::filesystem::path shm = "/dev/shm";
  if (std::filesystem::is_directory(shm, ec) && ::access(shm.c_str(), W_OK) == 0)
    return shm.string();
  return std::filesystem::temp_directory_path(ec).string();
}

// Writes and analyzes the runs' jobs on two threads: the trace writer takes seconds for an
// hour's 3,600 windows of 8 ranks, and the results do not depend on which thread ran a job.
void run_jobs(Rule rule, const Length& length, std::vector<Run>& runs) {
  std::atomic<std::size_t> next{0};
  std::mutex making_dirs;  // TempDir numbers its directories with a plain counter
  const std::string base = job_directory_base();
  auto work = [&] {
    for (std::size_t i = next++; i < runs.size(); i = next++) {
      Run& run = runs[i];
      const SyntheticJob job = make_job(rule, length, run.seed, run.faulty, run.expected);
      std::unique_ptr<TempDir> dir;
      {
        const std::lock_guard lock(making_dirs);
        // An absolute prefix: TempDir's temporary directory / prefix is then the prefix.
        dir = std::make_unique<TempDir>(base + "/commtap-evidence");
      }
      run.error = job.write(dir->path());
      if (run.error.empty() &&
          !commtap::analyzer::analyze_job(dir->path().string(), HealthOptions{}, run.health,
                                          run.error) &&
          run.error.empty())
        run.error = "the analysis failed";
    }
  };
  std::thread helper(work);
  work();
  helper.join();
}

// Runs one cell: N healthy and N faulty jobs, prints its row and the findings of the jobs that
// missed, and checks the targets.
void measure(Rule rule, const Length& length) {
  const int n = length.jobs;
  // Every cell its own seeds: the four rules' healthy jobs are 4N different jobs, not one set.
  const std::uint64_t base = 1000 * (static_cast<std::uint64_t>(rule) + 1) +
                             100 * static_cast<std::uint64_t>(length.seconds > 60   ? 4
                                                              : length.seconds > 10 ? 3
                                                              : length.seconds > 2  ? 2
                                                                                    : 1);
  std::vector<Run> runs(static_cast<std::size_t>(2 * n));
  for (int i = 0; i < n; ++i) {
    runs[static_cast<std::size_t>(2 * i)].seed = base + static_cast<std::uint64_t>(i);
    Run& faulty = runs[static_cast<std::size_t>(2 * i + 1)];
    faulty.seed = base + 50 + static_cast<std::uint64_t>(i);
    faulty.faulty = true;
  }
  run_jobs(rule, length, runs);
  int false_alarms = 0, hits = 0, found = 0, errors = 0, warnings = 0, other_severity = 0;
  std::string misses;
  for (const Run& run : runs) {
    ASSERT_EQ(run.error, "") << "seed " << run.seed;
    const auto& findings = run.health.findings;
    if (!run.faulty) {
      if (!findings.empty()) {
        ++false_alarms;
        misses += "\n  healthy seed " + std::to_string(run.seed) + ":" + describe(run.health);
      }
      continue;
    }
    auto is_expected = [&](const Finding& f) {
      return f.kind == rule_name(rule) && f.subject == run.expected;
    };
    const bool hit = rule == Rule::slow_rank
                         ? !findings.empty() && is_expected(findings.front())
                         : findings.size() == 1 && is_expected(findings.front());
    hits += hit;
    if (!hit)
      misses += "\n  faulty seed " + std::to_string(run.seed) + " (expected " + run.expected +
                "):" + describe(run.health);
    if (auto f = std::find_if(findings.begin(), findings.end(), is_expected); f != findings.end()) {
      ++found;
      errors += f->severity == Severity::error;
      warnings += f->severity == Severity::warning;
      other_severity += f->severity != Severity::error && f->severity != Severity::warning;
    }
  }
  char row[256];
  std::snprintf(row, sizeof row,
                "[evidence] %-17s | %-4s | false alarms %d/%d | power %d/%d | severities: "
                "%d error, %d warning, %d other (of %d found)\n",
                rule_name(rule), length.name, false_alarms, n, hits, n, errors, warnings,
                other_severity, found);
  std::fputs(row, stdout);
  if (!misses.empty()) std::printf("[evidence]   misses:%s\n", misses.c_str());
  std::fflush(stdout);
  ::testing::Test::RecordProperty("false_alarms", false_alarms);
  ::testing::Test::RecordProperty("power", hits);
  ::testing::Test::RecordProperty("jobs", n);
  ::testing::Test::RecordProperty("errors", errors);

  EXPECT_EQ(false_alarms, 0) << row << "(the jobs that missed are printed above)";
  EXPECT_GE(hits, n - 1) << row << "(the jobs that missed are printed above)";
  // The evidence is overwhelming in every cell, so the severity follows the fault's cost: a
  // rank or host 3 ms late at an all-reduce every 50 ms costs the job 6% of its time (an
  // error), at one a second 0.3% (a warning). A network finding's cost is not measured: its
  // evidence alone makes it an error.
  const HealthOptions defaults;
  const bool network = rule == Rule::slow_link || rule == Rule::slow_host_network;
  const bool costly = kFaultUs / 1000 / length.period_ms >= defaults.error_cost_share;
  EXPECT_EQ(network || costly ? errors : warnings, found)
      << row << "(the jobs that missed are printed above)";
}

}  // namespace

#define COMMTAP_EVIDENCE_CELL(RuleName, rule, LengthName, length) \
  TEST(FindingEvidence, RuleName##At##LengthName) {               \
    measure(rule, length);                                        \
  }
#define COMMTAP_EVIDENCE_ROW(RuleName, rule)       \
  COMMTAP_EVIDENCE_CELL(RuleName, rule, 2s, k2s)   \
  COMMTAP_EVIDENCE_CELL(RuleName, rule, 10s, k10s) \
  COMMTAP_EVIDENCE_CELL(RuleName, rule, 60s, k60s) \
  COMMTAP_EVIDENCE_CELL(RuleName, rule, 1h, k1h)

COMMTAP_EVIDENCE_ROW(SlowRank, Rule::slow_rank)
COMMTAP_EVIDENCE_ROW(SlowHost, Rule::slow_host)
COMMTAP_EVIDENCE_ROW(SlowLink, Rule::slow_link)
COMMTAP_EVIDENCE_ROW(SlowHostNetwork, Rule::slow_host_network)

// The analyzer benchmark's job (bench/synthetic_job.cpp): 10,000 all-reduces one a millisecond,
// 5 us of jitter, rank 7 2 ms late at every one, no messages, no aggregates. Ten seconds of a
// rank 2 ms late at every collective is as plain a straggler as there is: an error.
TEST(FindingEvidence, SyntheticStragglerIsAnError) {
  const JobHealth health =
      analyze(commtap::fixtures::straggler_job(16, 10'000, 2), HealthOptions{});
  commtap::testing::expect_exactly(health, {{"slow_rank", "rank 7 (node0)"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_EQ(health.findings[0].severity, Severity::error) << describe(health);
}
