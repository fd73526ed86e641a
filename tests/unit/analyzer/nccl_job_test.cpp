// The analyzer on NCCL jobs that never called MPI_Init (torchrun, srun): no clock estimates (the
// ranks' clocks are skewed by up to 2 s and drift), communicators without a members list, and
// progress counts of enqueued and completed collectives instead of in-call heartbeats. The rank
// files are written through the monitor's own writer, as the library writes them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "analyzer/health.hpp"
#include "analyzer/model/job_model.hpp"
#include "analyzer/store/evidence_json.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "monitor/monitor.hpp"
#include "render/export_perfetto.hpp"
#include "render/text_json.hpp"
#include "tests/unit/analyzer/health_checks.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using commtap::analyzer::analyze_job;
using commtap::analyzer::evidence_json;
using commtap::analyzer::Finding;
using commtap::analyzer::HealthOptions;
using commtap::analyzer::Job;
using commtap::analyzer::JobHealth;
using nlohmann::json;

namespace {

using commtap::testing::TempDir;

constexpr std::uint64_t kStartWall = 1'790'000'000'000'000'000ull;
// Rank 0's monotonic clock at the job's start; far enough from 0 for the negative skews.
constexpr double kMonotonicStart = 100e9;
constexpr std::int64_t kWorld = 0x5eed'0001;  // an id from ncclUniqueId bytes

// An NCCL data-parallel job: an all-reduce every `period_ms` on one communicator of every rank
// (or, `chain`, one on each of the communicators {0,1}, {1,2}, {2,3}: rank 3 shares none with
// rank 0). Times are true seconds since the start; each rank records them on its own clock.
struct NcclJob {
  int ranks = 4;
  int ranks_per_host = 2;
  double seconds = 30;  // one writer window a second
  double period_ms = 50;
  std::uint64_t seed = 7;
  double jitter_us = 40;  // exponential enqueue jitter per rank and step
  std::function<double(int rank)> late_ms = [](int) { return 0.0; };
  // Rank r's clock reads true time x (1 + drift) + skew: 0, +37 ms, -120 ms, +2 s.
  std::vector<double> skew_ms = {0, 37, -120, 2000};
  std::vector<double> drift_ppm = {0, 0, 0, 5};
  // Kernels end this long after the last rank enqueued, each rank a little later than the one
  // before it (the order NCCL's ring releases them) and with its own completion jitter.
  double kernel_us = 200, release_step_us = 1, release_jitter_us = 5;
  // A release order a network fault sets: rank r's kernel ends this much later at true time t.
  std::function<double(int rank, double t)> released_late_us = [](int, double) { return 0.0; };
  bool chain = false;
  std::uint64_t sample = 1;  // COMMTAP_SAMPLE: the instances recorded
  bool exits_known = true;   // false: no GPU events (every exit NULL)
  // Hang: collective `hang_seq` of the world communicator never completes; the ranks in
  // `never_enqueue` never enqueue it (empty: all did, and the kernel hangs). Nothing after it.
  std::uint64_t hang_seq = 0;
  std::vector<int> never_enqueue;
  int stopped_rank = -1;               // SIGSTOPped at the hang: writes nothing after it
  bool stopped_ends_with_job = false;  // ... but the job's end, after SIGCONT, writes its last
  std::vector<int> aborting;           // call ncclCommAbort (call_totals) at the end
  std::string ended_by = "exit";
  std::map<int, std::string> ended_by_rank;  // overrides ended_by
  std::vector<double> window_phase_ms;       // per rank: its windows end this much later

  double local_ns(int r, double true_s) const {
    return kMonotonicStart + skew_ms[static_cast<std::size_t>(r)] * 1e6 +
           true_s * 1e9 * (1 + drift_ppm[static_cast<std::size_t>(r)] * 1e-6);
  }
  // Rank 0's clock minus rank r's at rank r's time `local`: what the analyzer must recover.
  double true_offset_ns(int r, double local) const {
    const double true_ns = (local - kMonotonicStart - skew_ms[static_cast<std::size_t>(r)] * 1e6) /
                           (1 + drift_ppm[static_cast<std::size_t>(r)] * 1e-6);
    return kMonotonicStart + true_ns - local;
  }
  std::vector<std::pair<std::int64_t, std::vector<int>>> comms() const {
    if (!chain) {
      std::vector<int> all;
      for (int r = 0; r < ranks; ++r) all.push_back(r);
      return {{kWorld, all}};
    }
    std::vector<std::pair<std::int64_t, std::vector<int>>> out;
    for (int r = 0; r + 1 < ranks; ++r) out.push_back({kWorld + 1 + r, {r, r + 1}});
    return out;
  }

  std::string write(const fs::path& directory) const {
    std::mt19937_64 random(seed);
    std::exponential_distribution<double> jitter(1.0 / jitter_us);
    std::uniform_real_distribution<double> release(0, release_jitter_us);
    const int windows = static_cast<int>(seconds);
    std::vector<std::vector<commtap::monitor::Snapshot>> per_rank(
        static_cast<std::size_t>(ranks), std::vector<commtap::monitor::Snapshot>(windows));
    // Per rank and communicator, every collective's true enqueue and completion (s; completion
    // infinite where it never completes).
    struct Times {
      std::uint64_t seq;
      double enter, exit;
    };
    std::map<std::pair<int, std::int64_t>, std::vector<Times>> times;
    const auto all_comms = comms();
    double hang_s = -1;
    const int steps = static_cast<int>(seconds * 1000 / period_ms);
    for (int step = 0; step < steps && hang_s < 0; ++step) {
      const double t = step * period_ms / 1000;
      const std::uint64_t seq = static_cast<std::uint64_t>(step) + 1;
      for (const auto& [id, members] : all_comms) {
        const bool hangs = id == kWorld && seq == hang_seq;
        std::map<int, double> arrival;
        double latest = 0;
        for (int r : members) {
          arrival[r] = t + (jitter(random) + late_ms(r) * 1e3) / 1e6;
          latest = std::max(latest, arrival[r]);
        }
        for (int r : members) {
          if (hangs && std::count(never_enqueue.begin(), never_enqueue.end(), r)) continue;
          const double exit = hangs ? HUGE_VAL
                                    : latest + (kernel_us + r * release_step_us + release(random) +
                                                released_late_us(r, t)) /
                                                   1e6;
          times[{r, id}].push_back({seq, arrival[r], exit});
          if (!commtap::monitor::is_sampled(id, seq, sample)) continue;
          commtap::monitor::InstanceRecord record;
          record.comm_id = id;
          record.seq = seq;
          record.bytes = 1 << 20;
          record.function = 0;
          record.site = 1;
          record.enter_ns = static_cast<std::uint64_t>(local_ns(r, arrival[r]));
          record.exit_ns =
              exits_known && !hangs ? static_cast<std::uint64_t>(local_ns(r, exit)) : 0;
          per_rank[static_cast<std::size_t>(r)]
                  [static_cast<std::size_t>(std::min(windows - 1, static_cast<int>(latest + 0.01)))]
                      .instances.push_back(record);
        }
        if (hangs) hang_s = t;
      }
    }
    for (int r = 0; r < ranks; ++r) {
      const bool stopped = r == stopped_rank && hang_s >= 0;
      const int last_window = stopped ? static_cast<int>(hang_s) : windows - 1;
      auto& snapshots = per_rank[static_cast<std::size_t>(r)];
      std::vector<int> written;  // the windows it wrote
      for (int w = 0; w <= last_window; ++w) written.push_back(w);
      if (stopped && stopped_ends_with_job) {
        written.push_back(windows - 1);
        snapshots[static_cast<std::size_t>(windows - 1)].instances.clear();
        snapshots[static_cast<std::size_t>(last_window + 1)] =
            std::move(snapshots[static_cast<std::size_t>(windows - 1)]);
      }
      snapshots.resize(written.size());
      for (std::size_t i = 0; i < written.size(); ++i) {
        const int w = written[i];
        commtap::monitor::Snapshot& s = snapshots[i];
        const double end = w + 1.0;
        const double phase_s = static_cast<std::size_t>(r) < window_phase_ms.size()
                                   ? window_phase_ms[static_cast<std::size_t>(r)] / 1e3
                                   : 0.0;
        s.wall_ns = kStartWall + static_cast<std::uint64_t>((end + phase_s) * 1e9);
        s.wall_minus_monotonic_ns =
            static_cast<std::int64_t>(kStartWall) - static_cast<std::int64_t>(local_ns(r, 0));
        s.function_names = {"ncclAllReduce"};
        s.stalled_ns = 0;
        if (w == 0) {
          for (const auto& [id, members] : all_comms) {
            const auto at = std::find(members.begin(), members.end(), r);
            if (at == members.end()) continue;
            commtap::monitor::CommunicatorRow row;
            row.id = id;
            row.created_by = "ncclCommInitRank";
            row.size = static_cast<int>(members.size());
            row.comm_rank = static_cast<int>(at - members.begin());
            s.communicators.push_back(row);  // no members: NCCL cannot tell
          }
          commtap::monitor::CallSite site;
          site.id = 1;
          site.frames = {{0x401000, "/usr/bin/python3", "train_step", 16}};
          s.new_sites = {site};
        }
        // Enqueues take microseconds on every rank, whoever waits on the GPU afterwards.
        const auto calls = static_cast<std::uint64_t>(1000 / period_ms);
        s.aggregates = {{{kWorld, 0, 1, 1 << 20}, calls, calls * 10'000, 9'000, 11'000}};
        for (const auto& [id, members] : all_comms) {
          auto found = times.find({r, id});
          if (found == times.end()) continue;
          std::uint64_t entered = 0, completed = 0;
          for (const Times& c : found->second) {
            if (c.enter < end) entered = c.seq;
            if (c.exit < end && exits_known) completed = c.seq;  // else never known
          }
          s.progress.push_back({id, entered, completed});
        }
        if (i + 1 == written.size() && std::count(aborting.begin(), aborting.end(), r))
          s.functions = {{"ncclCommAbort", "nccl_communicator", {1, 5'000'000, 0, 0, 0}}};
      }
      commtap::monitor::RankFacts facts;
      facts.job_id = "nccl-synthetic";
      facts.rank = r;
      facts.world_size = ranks;
      facts.host = "h" + std::to_string(r / ranks_per_host);
      facts.node = r / ranks_per_host;
      facts.local_rank = r % ranks_per_host;
      facts.mpi_library = "none";
      facts.command_line = "/usr/bin/python3 train.py";
      facts.start_ns = kStartWall;
      facts.clock = {};  // no estimate: no MPI to measure it with
      facts.ended_by = stopped && !stopped_ends_with_job ? "running"
                       : ended_by_rank.count(r) != 0     ? ended_by_rank.at(r)
                                                         : ended_by;
      const std::string error = commtap::monitor::write_rank_database(
          (directory / ("rank-" + std::to_string(r) + ".db")).string(), facts,
          {{"COMMTAP_INTERVAL", "1000"}, {"COMMTAP_SAMPLE", std::to_string(sample)}}, snapshots);
      if (!error.empty()) return "rank " + std::to_string(r) + ": " + error;
    }
    return "";
  }
};

using commtap::testing::analyze;
using commtap::testing::describe;
using commtap::testing::expect_exactly;
using commtap::testing::test_options;

// The job as the analyzer models it (its clocks and communicators).
Job load(const fs::path& dir, const HealthOptions& options = {}) {
  Job job;
  job.path = dir.string();
  std::string error;
  EXPECT_TRUE(commtap::analyzer::job_files(dir.string(), true, job.files, error)) << error;
  EXPECT_TRUE(commtap::analyzer::load_facts(job, options, error)) << error;
  return job;
}

// Every estimate of ranks 1-3 holds its offset within its stated bound.
void expect_estimates_hold(const Job& job, const NcclJob& nccl, const std::string& what) {
  for (int r = 1; r < 4; ++r)
    for (const auto& e : job.ranks.at(r).clocks) {
      const double truth = nccl.true_offset_ns(r, static_cast<double>(e.at_ns));
      EXPECT_LE(std::abs(static_cast<double>(e.offset.offset_ns) - truth),
                static_cast<double>(e.offset.error_ns))
          << what << ": rank " << r << " at " << e.at_ns << ": " << e.offset.offset_ns << " vs "
          << truth;
    }
}

}  // namespace

// Offsets of 0, +37 ms, -120 ms and +2 s (one rank drifting 5 ppm) are recovered from the
// all-reduces' completion times within each estimate's stated bound, which is microseconds.
TEST(NcclJob, ClocksAreAlignedByCollectiveCompletionsWithinTheirBound) {
  const NcclJob nccl;
  TempDir dir;
  ASSERT_EQ(nccl.write(dir.path()), "");
  const Job job = load(dir.path());
  ASSERT_EQ(job.ranks.size(), 4u);
  EXPECT_EQ(job.clock_method.collective_ranks, 3);
  EXPECT_EQ(job.clock_method.mpi_ranks, 0);
  EXPECT_TRUE(job.clock_method.unaligned.empty());
  EXPECT_GT(job.clock_method.error_ns, 0);
  EXPECT_LT(job.clock_method.error_ns, 50e3);   // tens of microseconds at most
  EXPECT_TRUE(job.ranks.at(0).clocks.empty());  // the reference
  expect_estimates_hold(job, nccl, "world");
  for (int r = 1; r < 4; ++r) {
    ASSERT_GT(job.ranks.at(r).clocks.size(), 5u) << "rank " << r;  // piecewise: drift is followed
    // Between estimates too: a true instant reads the same on every rank once aligned.
    for (double t = 2; t < 28; t += 1.37) {
      const auto local = static_cast<std::uint64_t>(nccl.local_ns(r, t));
      const double aligned = static_cast<double>(job.ranks.at(r).aligned(local));
      EXPECT_NEAR(aligned, nccl.local_ns(0, t), job.clock_method.error_ns) << "rank " << r;
    }
  }
  // Each rank's monotonic clock is tied to the wall clock through the reference's: within the
  // spacing of the collectives that bound it.
  for (int r = 0; r < 4; ++r) {
    const double wall_at_start =
        nccl.local_ns(r, 0) + static_cast<double>(job.ranks.at(r).wall_minus_monotonic);
    EXPECT_NEAR(wall_at_start, static_cast<double>(kStartWall), 0.1e9) << "rank " << r;
  }
  // So is each rank as of 10 s into the job (--at), whose rows after it are not read: its last
  // collective's enter, which no row cuts, is bounded by its file's last write, not by 10 s.
  HealthOptions at_10_s;
  at_10_s.at_s = 10;
  const Job early = load(dir.path(), at_10_s);
  for (int r = 0; r < 4; ++r) {
    const double wall_at_start =
        nccl.local_ns(r, 0) + static_cast<double>(early.ranks.at(r).wall_minus_monotonic);
    EXPECT_NEAR(wall_at_start, static_cast<double>(kStartWall), 0.1e9) << "rank " << r;
  }
  // The communicator's members, from every rank's own row.
  ASSERT_TRUE(job.comms.count(kWorld));
  EXPECT_EQ(job.comms.at(kWorld).members, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(job.comms.at(kWorld).nccl);
}

// A slow link into rank 2 from second 12 on ends its kernels later than the others' (the ring's
// last steps cross the link), by 0-4 ms from one instance to the next: the median of its
// differences moves by milliseconds, and so does the exit spread that bounds the estimates. The
// offset did not move: the estimates during the fault take the bound of those before it, widened
// by 10 ppm of drift. A delay the same in every instance moves the estimates without widening
// them; the jump, faster than any clock drifts, widens every bound over both offsets instead.
TEST(NcclJob, ClocksHoldWhileANetworkFaultSetsTheReleaseOrder) {
  for (const bool varies : {true, false}) {
    NcclJob nccl;
    nccl.released_late_us = [varies](int r, double t) {
      return r == 2 && t >= 12 ? (varies ? 4000.0 * std::fmod(t * 7.31, 1.0) : 4000.0) : 0.0;
    };
    TempDir dir;
    ASSERT_EQ(nccl.write(dir.path()), "");
    const Job job = load(dir.path());
    EXPECT_EQ(job.clock_method.collective_ranks, 3);
    if (varies)
      EXPECT_LT(job.clock_method.error_ns, 400e3);  // 10 ppm over 18 s and the quiet bound
    else
      EXPECT_GT(job.clock_method.error_ns, 4e6);
    expect_estimates_hold(job, nccl, varies ? "varying" : "constant");
  }
}

// Rank 3 shares no communicator with rank 0: it is aligned through rank 2, aligned through
// rank 1, and its bound adds theirs.
TEST(NcclJob, ClocksAreAlignedThroughAChainOfCommunicators) {
  NcclJob nccl;
  nccl.chain = true;
  TempDir dir;
  ASSERT_EQ(nccl.write(dir.path()), "");
  const Job job = load(dir.path());
  EXPECT_EQ(job.clock_method.collective_ranks, 3);
  expect_estimates_hold(job, nccl, "chain");
  EXPECT_EQ(job.comms.at(kWorld + 3).members, (std::vector<int>{2, 3}));
}

// A short job, or a communicator used rarely: 6 all-reduces, 5 s apart. Under 8 shared
// instances, a rank is still aligned from what it has (3 at least), by their median, where the
// wall clock would leave it milliseconds off; its bound holds.
TEST(NcclJob, ClocksAreAlignedFromAFewCompletionsWhereThatIsAllThereIs) {
  NcclJob nccl;
  nccl.period_ms = 5000;
  TempDir dir;
  ASSERT_EQ(nccl.write(dir.path()), "");
  const Job job = load(dir.path());
  EXPECT_EQ(job.clock_method.collective_ranks, 3) << job.clock_method.describe();
  EXPECT_TRUE(job.clock_method.unaligned.empty()) << job.clock_method.describe();
  EXPECT_LT(job.clock_method.error_ns, 1e6);
  expect_estimates_hold(job, nccl, "few");
}

// Ranks on one machine read one clock: where a rank's estimates agree with the offset of a rank
// aligned before it on its host, it takes that offset exactly (rank 1 rank 0's, rank 3 rank
// 2's). Where they disagree (the clocks of one host skewed, as in the test above), they stand.
TEST(NcclJob, RanksOnOneHostShareItsClock) {
  NcclJob nccl;
  nccl.skew_ms = {0, 0, -120, -120};
  nccl.drift_ppm = {0, 0, 3, 3};
  TempDir dir;
  ASSERT_EQ(nccl.write(dir.path()), "");
  const Job job = load(dir.path());
  EXPECT_EQ(job.clock_method.collective_ranks, 1);
  EXPECT_EQ(job.clock_method.host_ranks, 2);
  EXPECT_TRUE(job.ranks.at(1).clocks.empty());
  EXPECT_EQ(job.ranks.at(1).aligned(123'456'789'000), 123'456'789'000);
  ASSERT_FALSE(job.ranks.at(3).clocks.empty());
  EXPECT_EQ(job.ranks.at(3).clocks.size(), job.ranks.at(2).clocks.size());
  EXPECT_EQ(job.ranks.at(3).clocks.front().offset.offset_ns,
            job.ranks.at(2).clocks.front().offset.offset_ns);
  EXPECT_NE(job.clock_method.describe().find("2 of them on the clock of an aligned rank's host"),
            std::string::npos)
      << job.clock_method.describe();
}

// Without completion times (no GPU events) nothing aligns the clocks, and the job says so.
TEST(NcclJob, WithoutCompletionTimesTheClocksAreNotAligned) {
  NcclJob nccl;
  nccl.exits_known = false;
  const JobHealth health = analyze(nccl);
  EXPECT_EQ(health.evidence.clocks.method, "none");
  expect_exactly(health, {});
}

// The healthy job: no finding, whatever the skew; the JSON says how the clocks were aligned.
TEST(NcclJob, AHealthyJobWithSkewedClocksHasNoFinding) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    NcclJob nccl;
    nccl.seed = seed;
    nccl.sample = seed == 3 ? 4 : 1;
    const JobHealth health = analyze(nccl);
    EXPECT_GT(health.instances, seed == 3 ? 100u : 500u);
    expect_exactly(health, {});
    const json out = commtap::render::health_json({health}, {});
    const std::string clocks = out["jobs"][0]["clocks"];
    EXPECT_EQ(clocks.rfind("collective completions (error <= ", 0), 0u) << clocks;
    EXPECT_GT(out["jobs"][0]["clock_error_us"].get<double>(), 0);
  }
}

// A rank that enqueues 5 ms late in every all-reduce is the slow rank: the others wait for it
// on the GPU (their all-reduces take 5 ms longer from enqueue to completion), though every
// rank's NCCL calls take the same microseconds.
TEST(NcclJob, ARankThatEnqueuesLateIsTheSlowRank) {
  NcclJob nccl;
  // 8 ms late at an all-reduce every 50 ms: 16% of the job's time, an error.
  nccl.late_ms = [](int rank) { return rank == 2 ? 8.0 : 0.0; };
  const JobHealth health = analyze(nccl);
  expect_exactly(health, {{"slow_rank", "rank 2 (h1)"}});
  ASSERT_FALSE(health.findings.empty());
  const Finding& f = health.findings[0];
  EXPECT_NEAR(evidence_json(f.evidence)["median_lateness_ns"].get<double>(), 8e6, 1.6e6)
      << describe(health);
  EXPECT_LT(evidence_json(f.evidence)["collective_ns"].get<double>(),
            0.2 * evidence_json(f.evidence)["others_collective_ns"].get<double>())
      << describe(health);
  EXPECT_EQ(f.severity, commtap::analyzer::Severity::error);
  // The windows are on the job's wall clock: the first starts at the job's start.
  ASSERT_TRUE(health.evidence.lateness.has_value());
  EXPECT_NEAR(health.evidence.lateness->first_s, 0, 0.2);
}

// Rank 2 never enqueues all-reduce #101; ranks 0, 1 and 3 did and their kernels wait: the hang
// names rank 2, though every heartbeat says 'computing' (the hosts wait outside NCCL).
TEST(NcclJob, AHangNamesTheRankThatNeverEnqueued) {
  NcclJob nccl;
  nccl.hang_seq = 101;
  nccl.never_enqueue = {2};
  nccl.ended_by = "running";
  const JobHealth health = analyze(nccl);
  expect_exactly(health, {{"hang", "rank 2 (h1)"}});
  ASSERT_FALSE(health.findings.empty());
  const Finding& f = health.findings[0];
  EXPECT_EQ(evidence_json(f.evidence)["culprits"], json::array({2}));
  EXPECT_EQ(evidence_json(f.evidence)["stuck_ranks"], json::array({0, 1, 3}));
  EXPECT_EQ(evidence_json(f.evidence)["seq"], 101);
  EXPECT_NE(f.summary.find("last entered #100"), std::string::npos) << f.summary;
  // Shorter than --hang-after: not yet.
  HealthOptions patient = test_options();
  patient.hang_after_s = 60;
  expect_exactly(analyze(nccl, patient), {});
}

// The waiting ranks' watchdog aborted the communicator afterwards: a consequence, in the
// evidence of the hang, which stays the finding.
TEST(NcclJob, AnAbortAfterAHangIsItsConsequence) {
  NcclJob nccl;
  nccl.hang_seq = 101;
  nccl.never_enqueue = {2};
  nccl.aborting = {0, 1, 3};
  nccl.ended_by = "SIGTERM";
  const JobHealth health = analyze(nccl);
  expect_exactly(health, {{"hang", "rank 2 (h1)"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_EQ(evidence_json(health.findings[0].evidence)["aborted"], json::array({0, 1, 3}));
  EXPECT_NE(health.findings[0].summary.find("ncclCommAbort (a consequence"), std::string::npos)
      << describe(health);
  // Alone (no hang seen), an abort is said, as a warning.
  NcclJob healthy;
  healthy.aborting = {1};
  const JobHealth alone = analyze(healthy);
  expect_exactly(alone, {{"comm_aborted", "rank 1 (h0)"}});
  ASSERT_FALSE(alone.findings.empty());
  EXPECT_EQ(alone.findings[0].severity, commtap::analyzer::Severity::warning);
}

// The abort count is a total without a time: replayed (--at) before the aborting rank's trace
// ended, the abort (in its last window) had not happened yet.
TEST(NcclJob, AnAbortIsNotSeenBeforeTheAbortingRanksEnd) {
  NcclJob nccl;
  nccl.aborting = {1};
  nccl.window_phase_ms = {300, 0, 300, 300};  // the others are heard after it: alive
  HealthOptions options = test_options();
  options.at_s = 10.5;
  expect_exactly(analyze(nccl, options), {});
  options.at_s = 40;
  expect_exactly(analyze(nccl, options), {{"comm_aborted", "rank 1 (h0)"}});
}

// A job stopped by its batch system: the SIGTERM ends ranks 0-2 first, and rank 3, seeing its
// peers gone (NCCL's remote error), aborts its communicator and exits. The abort is the end's
// consequence, not a finding.
TEST(NcclJob, AnAbortAfterPeersWereEndedBySignalsIsNotAFinding) {
  NcclJob nccl;
  nccl.aborting = {3};
  nccl.ended_by = "SIGTERM";
  nccl.ended_by_rank = {{3, "exit"}};
  expect_exactly(analyze(nccl), {});
}

// A rank stopped (SIGSTOP) before it enqueued: lost, and named by the hang as today.
TEST(NcclJob, AStoppedRankIsLostAndTheHangsCause) {
  NcclJob nccl;
  nccl.hang_seq = 101;
  nccl.never_enqueue = {2};
  nccl.stopped_rank = 2;
  nccl.ended_by = "running";
  const JobHealth health = analyze(nccl);
  expect_exactly(health, {{"hang", "rank 2 (h1)"}, {"rank_lost", "rank 2 (h1)"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_NE(health.findings[0].summary.find("no heartbeat for"), std::string::npos)
      << describe(health);
}

// The same stopped rank, then the job stopped by its batch system: SIGCONT and SIGTERM have it
// write its last window with the others'. The analysis after the job says what the ones while
// it ran said: silent for 20 s while the others went on.
TEST(NcclJob, ARankStoppedUntilTheJobWasKilledIsLostAfterTheJob) {
  NcclJob nccl;
  nccl.hang_seq = 101;
  nccl.never_enqueue = {2};
  nccl.stopped_rank = 2;
  nccl.stopped_ends_with_job = true;
  nccl.ended_by = "SIGTERM";
  const JobHealth health = analyze(nccl);
  expect_exactly(health, {{"hang", "rank 2 (h1)"}, {"rank_lost", "rank 2 (h1)"}});
  for (const Finding& f : health.findings) {
    if (f.kind != "rank_lost") continue;
    EXPECT_NE(f.summary.find("before SIGTERM ended it, while other ranks went on"),
              std::string::npos)
        << f.summary;
    EXPECT_GT(evidence_json(f.evidence)["silent_ns"].get<double>(), 20e9) << f.summary;
  }
  EXPECT_FALSE(health.running);
}

// Every rank enqueued #101 and its kernel never finished anywhere: the communicator hangs.
TEST(NcclJob, AKernelThatNeverFinishesIsACommunicationHang) {
  NcclJob nccl;
  nccl.hang_seq = 101;
  nccl.ended_by = "running";
  const JobHealth health = analyze(nccl);
  expect_exactly(health, {{"communication_hang", "comm " + std::to_string(kWorld)}});
  // Without completion times (no GPU events) a finished job's last collective reads as
  // unfinished on every rank: that is no hang.
  NcclJob unknown;
  unknown.exits_known = false;
  expect_exactly(analyze(unknown), {});
}

// The export puts every rank on rank 0's clock too: nobody's all-reduce ends before the last
// rank enqueued it, on clocks that were up to 2 s apart.
TEST(NcclJob, TheExportIsOnTheAlignedClocks) {
  const NcclJob nccl;
  TempDir dir;
  ASSERT_EQ(nccl.write(dir.path()), "");
  const fs::path file = dir.path() / "trace.json";
  std::FILE* out = std::fopen(file.c_str(), "w");
  ASSERT_NE(out, nullptr);
  commtap::render::PerfettoStats stats;
  std::string error;
  commtap::render::PerfettoOptions options;
  options.findings = false;
  EXPECT_TRUE(commtap::render::export_perfetto(dir.path().string(), options, out, stats, error))
      << error;
  std::fclose(out);
  std::ifstream in(file);
  const json trace = json::parse(in);
  std::map<std::uint64_t, std::pair<double, double>> instances;  // seq -> last enter, first exit
  for (const json& e : trace["traceEvents"]) {
    if (e.value("cat", "") != "collective") continue;
    auto [it, added] =
        instances.try_emplace(e["args"]["seq"].get<std::uint64_t>(), -HUGE_VAL, HUGE_VAL);
    it->second.first = std::max(it->second.first, e["ts"].get<double>());
    it->second.second = std::min(it->second.second, e["ts"].get<double>() + e["dur"].get<double>());
  }
  EXPECT_EQ(instances.size(), 600u);
  double worst_us = -HUGE_VAL;
  for (const auto& [seq, times] : instances)
    worst_us = std::max(worst_us, times.first - times.second);
  EXPECT_LT(worst_us, 0) << "an all-reduce ended before its last enqueue";
}
