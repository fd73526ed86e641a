// The health analyzer on synthetic jobs written through the monitor's own writer: each fault
// must produce exactly its finding (kind and subject) and nothing else, and clean jobs with
// jitter none.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "analyzer/analyzer.hpp"
#include "analyzer/health.hpp"
#include "avoid_list/avoid_list.hpp"
#include "monitor/monitor.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
namespace monitor = commtap::monitor;
using commtap::analyzer::analyze_job;
using commtap::analyzer::Finding;
using commtap::analyzer::HealthOptions;
using commtap::analyzer::JobHealth;
using commtap::analyzer::Severity;

namespace {

using commtap::testing::TempDir;

constexpr std::uint64_t kStartWall = 1'790'000'000'000'000'000ull;
constexpr std::uint64_t kMono0 = 1'000'000'000ull;  // every rank's monotonic clock at start
constexpr std::uint32_t kAllreduce = 0, kIsend = 1, kIrecv = 2;

// A data-parallel job: `ranks` ranks on `hosts` hosts (in blocks), an all-reduce on
// MPI_COMM_WORLD every `period_ms`, and every 4th step each rank sends one message to each rank
// on another host. Faults are functions of (rank or host pair, time).
struct SyntheticJob {
  int ranks = 8;
  int hosts = 4;
  double seconds = 30;
  double period_ms = 50;
  std::uint64_t seed = 1;
  double jitter_us = 40;  // exponential arrival jitter, per rank and step
  std::function<double(int rank, double t)> late_us = [](int, double) { return 0.0; };
  std::function<double(int from_host, int to_host, double t)> link_us = [](int, int, double) {
    return 0.0;
  };
  std::function<double(double t)> call_us = [](double) { return 100.0; };  // aggregates
  // A second kind of call (MPI_Isend of this size class, as often as the all-reduce) in the
  // windows where it returns a class >= 0: a program that moves to another phase.
  std::function<std::int64_t(double t)> isend_class = [](double) { return std::int64_t{-1}; };
  // Milliseconds per second a rank also waits in MPI_Irecv completions (aggregates).
  std::function<double(int rank)> receive_wait_ms = [](int) { return 0.0; };
  // Collectives each step calls right after its first (an all-reduce per gradient bucket, an
  // all-reduce after an all-to-all): everyone arrives at them together, within the jitter.
  int followers = 0;
  // Hang: from `hang_at` s on, every rank but `hang_culprit` waits in the next all-reduce.
  double hang_at = -1;
  int hang_culprit = -1;
  // ... except `hang_ahead`, which left that all-reduce (the culprit's part was in before it
  // stopped) and waits in the one after it.
  int hang_ahead = -1;
  // ... except `hang_waiting`, which never arrived either: it is blocked in MPI_Irecv since
  // `hang_at` (a pipeline stage waiting for the culprit).
  int hang_waiting = -1;
  // Crash: `crash_rank` writes nothing after `crash_at` s; the others compute on.
  double crash_at = -1;
  int crash_rank = -1;
  // What ended the ranks, where not MPI_Finalize (or still running, in a hang or crash): a
  // signal that killed the job at its end (a batch system's time limit).
  std::string killed_by;

  // The trace writer's windows: COMMTAP_INTERVAL as the job's settings say, and how much of a
  // second the last window (written at MPI_Finalize) covers. The rows are a second apart
  // whatever the setting: a setting below 1000 is a writer that fell behind (a busy node).
  std::string interval_ms = "1000";
  double last_window_s = 1;

  // The job's own messages between hosts (every 4th step); false: a collective-only job.
  bool messages = true;
  // Which directed host pairs exchange them at time t.
  std::function<bool(int from_host, int to_host, double t)> sends = [](int, int, double) {
    return true;
  };
  // Link probes every `probe_every_s` (0: none), by each host's first rank: latency and
  // throughput of every directed host pair at time t.
  double probe_every_s = 0;
  std::function<double(int from_host, int to_host, double t)> probe_mb_per_s =
      [](int, int, double) { return 1000.0; };
  std::function<double(int from_host, int to_host, double t)> probe_latency_us =
      [](int, int, double) { return 30.0; };
  // The slowest of a round's round trips (half of it, us); 0: as the fastest.
  std::function<double(int from_host, int to_host, double t)> probe_slowest_latency_us =
      [](int, int, double) { return 0.0; };
  // The longest one-way leg of a round's small messages (us, version 9); unset: not recorded.
  std::function<double(int from_host, int to_host, double t)> probe_slowest_one_way_us;
  // Where set, each direction's one-way time instead (the latency is then half their sum).
  std::function<double(int from_host, int to_host, double t)> probe_one_way_us;

  // TCP connections between hosts (the tcp_links table, a row a second; false: none): each rank
  // holds one to every rank on another host and sends `tcp_segments_per_s` data segments a second
  // over it. Of
  // those a share is lost (and resent), and a share resent though it had arrived (reported back
  // as duplicates: a tail-loss probe that fired before the acknowledgement came).
  bool tcp = false;
  double tcp_segments_per_s = 400;
  std::function<double(int from_host, int to_host, double t)> tcp_lost_share =
      [](int, int, double) { return 0.0; };
  std::function<double(int from_host, int to_host, double t)> tcp_duplicate_share =
      [](int, int, double) { return 0.0; };

  // How far each host's clock offset estimate is off (us): a Cristian estimate over a link that
  // is slower one way than the other is off by half the difference.
  std::function<double(int host)> clock_error_us = [](int) { return 0.0; };

  // Share of each second a host's process was held off the CPU (heartbeats' stalled_ns).
  std::function<double(int host, double t)> stall_share = [](int, double) { return 0.004; };

  // Which job and machines: host h is named host_prefix + h.
  std::string job_id = "synthetic";
  std::string host_prefix = "h";
  std::string command_line = "/opt/app/train --steps 600";

  int host_of(int rank) const { return rank / (ranks / hosts); }

  void write(const fs::path& directory) const {
    std::mt19937_64 random(seed);
    std::exponential_distribution<double> jitter(1.0 / std::max(1e-9, jitter_us));
    const int windows = static_cast<int>(seconds);
    std::vector<std::vector<monitor::Snapshot>> per_rank(static_cast<std::size_t>(ranks),
                                                         std::vector<monitor::Snapshot>(windows));
    auto window_of = [&](double t) { return std::min(windows - 1, static_cast<int>(t)); };
    const int steps = static_cast<int>(seconds * 1000 / period_ms);
    std::uint64_t last_seq = 0, next_seq = 1;
    for (int step = 0; step < steps; ++step) {
      const double t = step * period_ms / 1000;
      if (hang_at >= 0 && t >= hang_at) break;
      const std::uint64_t seq = next_seq++;
      std::vector<double> arrival(static_cast<std::size_t>(ranks));
      double latest = 0;
      for (int r = 0; r < ranks; ++r) {
        arrival[static_cast<std::size_t>(r)] = t * 1e9 + jitter(random) * 1e3 + late_us(r, t) * 1e3;
        latest = std::max(latest, arrival[static_cast<std::size_t>(r)]);
      }
      // Rank r's record of an all-reduce it entered at `enter` and everyone left after `last`.
      auto record_allreduce = [&](int r, std::uint64_t instance, std::uint32_t site, double enter,
                                  double last) {
        monitor::InstanceRecord record;
        record.comm_id = 1;
        record.seq = instance;
        record.bytes = 1024;
        record.function = kAllreduce;
        record.site = site;
        record.enter_ns = kMono0 + static_cast<std::uint64_t>(enter);
        record.exit_ns = kMono0 + static_cast<std::uint64_t>(last + 20e3);
        per_rank[static_cast<std::size_t>(r)][static_cast<std::size_t>(window_of(t))]
            .instances.push_back(record);
      };
      const bool everyone = !(crash_at >= 0 && t >= crash_at);
      for (int r = 0; r < ranks; ++r) {
        if (!everyone && r == crash_rank) continue;
        if (!everyone) continue;  // without the crashed rank nobody completes an all-reduce
        record_allreduce(r, seq, 1, arrival[static_cast<std::size_t>(r)], latest);
      }
      if (everyone) last_seq = seq;
      for (int f = 0; f < followers && everyone; ++f) {
        const double start = latest + 20e3 + f * 200e3;  // 200 us per follower
        const std::uint64_t follower_seq = next_seq++;
        double follower_latest = 0;
        std::vector<double> follower_arrival(static_cast<std::size_t>(ranks));
        for (double& a : follower_arrival) {
          a = start + jitter(random) * 1e3;
          follower_latest = std::max(follower_latest, a);
        }
        for (int r = 0; r < ranks; ++r)
          record_allreduce(r, follower_seq, 2, follower_arrival[static_cast<std::size_t>(r)],
                           follower_latest);
        last_seq = follower_seq;
      }
      if (step % 4 != 0 || !everyone || !messages) continue;
      for (int from = 0; from < ranks; ++from)
        for (int to = 0; to < ranks; ++to) {
          if (host_of(from) == host_of(to) || !sends(host_of(from), host_of(to), t)) continue;
          const double send = latest + 30e3 + jitter(random) * 1e3;
          const double posted = latest + 25e3;
          const double latency =
              40e3 + jitter(random) * 1e3 + link_us(host_of(from), host_of(to), t) * 1e3;
          monitor::InstanceRecord s;
          s.comm_id = 1;
          s.seq = static_cast<std::uint64_t>(step / 4 + 1);
          s.bytes = 65536;
          s.tag = 7;
          s.site = 1;
          s.function = kIsend;
          s.kind = monitor::RecordKind::send;
          s.root = to;
          s.enter_ns = kMono0 + static_cast<std::uint64_t>(send);
          s.exit_ns = kMono0 + static_cast<std::uint64_t>(send + latency);
          monitor::InstanceRecord r = s;
          r.kind = monitor::RecordKind::recv;
          r.function = kIrecv;
          r.root = from;
          r.enter_ns = kMono0 + static_cast<std::uint64_t>(posted);
          r.exit_ns = kMono0 + static_cast<std::uint64_t>(send + latency);
          per_rank[static_cast<std::size_t>(from)][static_cast<std::size_t>(window_of(t))]
              .instances.push_back(s);
          per_rank[static_cast<std::size_t>(to)][static_cast<std::size_t>(window_of(t))]
              .instances.push_back(r);
        }
    }
    for (double t = probe_every_s; probe_every_s > 0 && t < seconds; t += probe_every_s)
      for (int from = 0; from < hosts; ++from)
        for (int to = 0; to < hosts; ++to) {
          if (from == to) continue;
          const auto at = kMono0 + static_cast<std::uint64_t>(t * 1e9);
          const std::string from_host = host_prefix + std::to_string(from),
                            to_host = host_prefix + std::to_string(to);
          const double noise = 1 + jitter(random) / std::max(1e-9, jitter_us) * 0.1;
          auto& rows = per_rank[static_cast<std::size_t>(from * (ranks / hosts))]
                               [static_cast<std::size_t>(window_of(t))]
                                   .probes;
          // The fastest round trip's four times, on each host's own (true) clock.
          const double forth =
              (probe_one_way_us ? probe_one_way_us(from, to, t) : probe_latency_us(from, to, t)) *
              noise * 1e3;
          const double back =
              (probe_one_way_us ? probe_one_way_us(to, from, t) : probe_latency_us(from, to, t)) *
              noise * 1e3;
          const auto received = at + static_cast<std::uint64_t>(forth);
          rows.push_back({at, from, to, from_host, to_host, 1,
                          static_cast<std::uint64_t>((forth + back) / 2), at, received,
                          received + 1000, received + 1000 + static_cast<std::uint64_t>(back),
                          static_cast<std::uint64_t>(probe_slowest_latency_us(from, to, t) * 1e3)});
          if (probe_slowest_one_way_us)
            rows.back().slowest_oneway_ns =
                static_cast<std::uint64_t>(probe_slowest_one_way_us(from, to, t) * 1e3);
          rows.push_back(
              {at, from, to, from_host, to_host, 262144,
               static_cast<std::uint64_t>(262144 / (probe_mb_per_s(from, to, t) / noise) * 1e3)});
        }
    for (int r = 0; r < ranks; ++r) {
      monitor::RankFacts facts;
      facts.job_id = job_id;
      facts.command_line = command_line;
      facts.rank = r;
      facts.world_size = ranks;
      facts.host = host_prefix + std::to_string(host_of(r));
      facts.node = host_of(r);
      facts.start_ns = kStartWall;
      const bool crashed = r == crash_rank && crash_at >= 0;
      facts.ended_by = crashed || hang_at >= 0 ? "running" : "finalize";
      if (!killed_by.empty() && !crashed) facts.ended_by = killed_by;
      auto& windows_of_rank = per_rank[static_cast<std::size_t>(r)];
      const int last_window = crashed ? static_cast<int>(crash_at) : windows - 1;
      windows_of_rank.resize(static_cast<std::size_t>(last_window + 1));
      double stalled_ns = 0;
      std::vector<monitor::TcpLinkRow> connections(static_cast<std::size_t>(hosts));
      for (int w = 0; w <= last_window; ++w) {
        monitor::Snapshot& s = windows_of_rank[static_cast<std::size_t>(w)];
        stalled_ns += std::max(0.0, stall_share(host_of(r), w)) * 1e9;
        s.stalled_ns = static_cast<std::uint64_t>(stalled_ns);
        // The part of a second this window covers: its calls and waits scale with it.
        const double part = w == windows - 1 ? last_window_s : 1.0;
        s.wall_ns = kStartWall + static_cast<std::uint64_t>((w + part) * 1e9);
        s.wall_minus_monotonic_ns = static_cast<std::int64_t>(kStartWall - kMono0);
        s.function_names = {"MPI_Allreduce", "MPI_Isend", "MPI_Irecv"};
        if (w == 0) {
          s.clock_estimates = {
              {kMono0, {static_cast<std::int64_t>(clock_error_us(host_of(r)) * 1e3), 0}}};
          monitor::CommunicatorRow world;
          world.id = 1;
          world.created_by = "MPI_COMM_WORLD";
          world.size = ranks;
          world.comm_rank = r;
          if (r == 0)
            for (int m = 0; m < ranks; ++m) world.members += (m ? "," : "") + std::to_string(m);
          s.communicators = {world};
          monitor::CallSite site;
          site.id = 1;
          site.frames = {{0x401000, "/opt/app/train", "train_step", 16}};
          s.new_sites = {site};
        }
        const double calls = part * 1000.0 / period_ms;
        s.aggregates = {{{1, kAllreduce, 1, 1024},
                         static_cast<std::uint64_t>(calls),
                         static_cast<std::uint64_t>(calls * call_us(w) * 1e3),
                         static_cast<std::uint64_t>(call_us(w) * 900),
                         static_cast<std::uint64_t>(call_us(w) * 1100)}};
        if (const std::int64_t size_class = isend_class(w); size_class >= 0)
          s.aggregates.push_back({{1, kIsend, 1, static_cast<std::uint64_t>(size_class)},
                                  static_cast<std::uint64_t>(calls),
                                  static_cast<std::uint64_t>(calls * 50e3),
                                  50'000,
                                  50'000});
        if (const double wait_ms = receive_wait_ms(r); wait_ms > 0)
          s.aggregates.push_back({{1, kIrecv, 1, 1024},
                                  static_cast<std::uint64_t>(calls),
                                  static_cast<std::uint64_t>(part * wait_ms * 1e6),
                                  static_cast<std::uint64_t>(wait_ms * 1e6 / calls),
                                  static_cast<std::uint64_t>(wait_ms * 1e6 / calls)});
        std::uint64_t entered = last_seq, completed = last_seq;
        const bool hanging = hang_at >= 0 && w + 1 > hang_at;
        if (hanging && r == hang_waiting) {
          monitor::ActivitySnapshot busy;
          busy.function = kIrecv + 1;
          busy.comm_id = 1;
          busy.since_ns = kMono0 + static_cast<std::uint64_t>(hang_at * 1e9);
          s.busy = {busy};
        } else if (hanging && r != hang_culprit) {
          const std::uint64_t ahead = r == hang_ahead ? 1 : 0;
          entered = last_seq + 1 + ahead;
          completed = last_seq + ahead;
          monitor::ActivitySnapshot busy;
          busy.function = kAllreduce + 1;
          busy.comm_id = 1;
          busy.seq = last_seq + 1 + ahead;
          busy.since_ns = kMono0 + static_cast<std::uint64_t>(hang_at * 1e9);
          s.busy = {busy};
        }
        s.progress = {{1, entered, completed}};
        for (int peer_host = 0; tcp && peer_host < hosts; ++peer_host) {
          if (peer_host == host_of(r)) continue;
          monitor::TcpLinkRow& c = connections[static_cast<std::size_t>(peer_host)];
          c.local = "10.0.0." + std::to_string(host_of(r) + 1);
          c.peer = "10.0.0." + std::to_string(peer_host + 1);
          c.connections = static_cast<std::uint64_t>(ranks / hosts);
          auto draw = [&](double mean) {
            return mean > 0 ? std::poisson_distribution<std::uint64_t>(mean)(random) : 0;
          };
          const std::uint64_t segments = draw(tcp_segments_per_s * part * (ranks / hosts));
          const std::uint64_t lost = draw(segments * tcp_lost_share(host_of(r), peer_host, w));
          const std::uint64_t duplicates =
              draw(segments * tcp_duplicate_share(host_of(r), peer_host, w));
          c.data_segs_out += segments + lost + duplicates;
          c.bytes_acked += segments * 1448;
          c.retrans_segs += lost + duplicates;
          c.dsack_dups =
              std::max<std::int64_t>(c.dsack_dups, 0) + static_cast<std::int64_t>(duplicates);
          c.rtt_us = c.min_rtt_us = 60;
          s.tcp_links.push_back(c);
        }
      }
      const std::string error = monitor::write_rank_database(
          (directory / ("rank-" + std::to_string(r) + ".db")).string(), facts,
          {{"COMMTAP_INTERVAL", interval_ms}, {"COMMTAP_TCP_INTERVAL", tcp ? "1" : "0"}},
          windows_of_rank);
      ASSERT_EQ(error, "") << "rank " << r;
    }
  }
};

HealthOptions test_options() {
  HealthOptions options;
  options.window_s = 5;
  options.degradation_windows = 2;
  return options;
}

JobHealth analyze(const SyntheticJob& job, HealthOptions options = test_options()) {
  TempDir dir;
  job.write(dir.path());
  JobHealth health;
  std::string error;
  EXPECT_TRUE(analyze_job(dir.path().string(), options, health, error)) << error;
  return health;
}

std::string describe(const JobHealth& health) {
  std::string out;
  for (const Finding& f : health.findings)
    out += "\n  " + f.kind + " | " + f.subject + " | " + f.summary;
  return out.empty() ? " none" : out;
}

void expect_exactly(const JobHealth& health,
                    const std::vector<std::pair<std::string, std::string>>& expected) {
  std::vector<std::pair<std::string, std::string>> got;
  for (const Finding& f : health.findings) got.emplace_back(f.kind, f.subject);
  EXPECT_EQ(got, expected) << "findings:" << describe(health);
}

}  // namespace

TEST(Health, CleanJobsWithJitterHaveNoFindings) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    SyntheticJob job;
    job.seed = seed;
    job.jitter_us = 60;
    const JobHealth health = analyze(job);
    EXPECT_GT(health.instances, 500u);
    EXPECT_GT(health.messages, 1000u);
    expect_exactly(health, {});
  }
}

TEST(Health, OneSlowRankIsNamedNotItsHost) {
  SyntheticJob job;
  job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
  // The others wait for it in MPI: 3 ms in each of 20 all-reduces a second.
  job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 60.0; };
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"slow_rank", "rank 5 (h2)"}});
  EXPECT_NE(health.findings.at(0).summary.find("3."), std::string::npos) << describe(health);
  EXPECT_EQ(health.findings.at(0).severity,
            commtap::analyzer::Severity::error);  // in all 6 windows of 5 s
}

// Few collectives show the program's own imbalance (its rank 0 reading input, say) as well as a
// faulty machine: no finding; a few windows only: a warning, not an error that pages someone.
TEST(Health, SlowRankFindingsNeedEvidence) {
  SyntheticJob job;
  job.late_us = [](int rank, double) { return rank == 0 ? 3000.0 : 0.0; };
  job.receive_wait_ms = [](int rank) { return rank == 0 ? 0.0 : 60.0; };
  job.seconds = 2;  // 40 all-reduces
  HealthOptions options = test_options();
  options.min_instances = 4;
  expect_exactly(analyze(job, options), {});
  options.min_evidence_instances = 20;  // the same job with the bar lowered: found
  expect_exactly(analyze(job, options), {{"slow_rank", "rank 0 (h0)"}});
  job.seconds = 9;  // 2 windows of 5 s
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"slow_rank", "rank 0 (h0)"}});
  EXPECT_EQ(health.findings.at(0).severity, commtap::analyzer::Severity::warning)
      << describe(health);
  // Few sampled instances (a sparse COMMTAP_SAMPLE), but late in every window: 40 all-reduces
  // in 20 s, 10 in each of 4 windows, are persistence enough for an error.
  job.seconds = 20;
  job.period_ms = 500;
  const JobHealth sparse = analyze(job);
  expect_exactly(sparse, {{"slow_rank", "rank 0 (h0)"}});
  EXPECT_EQ(sparse.findings.at(0).severity, commtap::analyzer::Severity::error) << describe(sparse);
}

// A rank that arrives late because it waits for messages (a slow sender upstream) spends more
// of its time inside MPI than the others: that is not a slow rank.
TEST(Health, ARankLateFromWaitingInMpiIsNotCalledSlow) {
  SyntheticJob job;
  job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
  job.receive_wait_ms = [](int rank) { return rank == 5 ? 300.0 : 0.0; };
  expect_exactly(analyze(job), {});
  // Equal shares: nobody waits for it either (late clocks, say); not called slow.
  job.receive_wait_ms = [](int) { return 0.0; };
  expect_exactly(analyze(job), {});
  // The others waiting for it instead: slow.
  job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 300.0; };
  expect_exactly(analyze(job), {{"slow_rank", "rank 5 (h2)"}});
}

// The share of time inside MPI is over the time the trace writer's rows cover, not a whole
// COMMTAP_INTERVAL per row: a writer that fell behind on a busy node writes rows further apart
// (here a second for a 500 ms interval), and the last row, written at MPI_Finalize, covers part
// of an interval. Dividing by intervals said "inside MPI 0% vs 120% for the others".
TEST(Health, MpiTimeShareIsOverTheTimeTheRowsCover) {
  SyntheticJob job;
  job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
  job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 600.0; };
  job.interval_ms = "500";
  job.last_window_s = 0.3;
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"slow_rank", "rank 5 (h2)"}});
  ASSERT_FALSE(health.findings.empty());
  const auto& evidence = health.findings[0].evidence;
  // 600 ms of receive waits and 20 all-reduces of 100 us per second: 0.602.
  EXPECT_NEAR(evidence["others_mpi_time_share"].get<double>(), 0.602, 0.01) << describe(health);
  EXPECT_NEAR(evidence["mpi_time_share"].get<double>(), 0.002, 0.001) << describe(health);
  EXPECT_NE(health.findings[0].summary.find("inside MPI 0% of the time vs 60% for the others"),
            std::string::npos)
      << describe(health);
  // Nonblocking operations count from post to completion, so a receive and a send in flight
  // together add up to more MPI time than a row covers: still at most all of the time.
  job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 1500.0; };
  const JobHealth overlapping = analyze(job);
  expect_exactly(overlapping, {{"slow_rank", "rank 5 (h2)"}});
  ASSERT_FALSE(overlapping.findings.empty());
  EXPECT_NEAR(overlapping.findings[0].evidence["others_mpi_time_share"].get<double>(), 1.0, 1e-9)
      << describe(overlapping);
}

// --at replays the job as a cron analysis saw it then.
TEST(Health, AtReplaysTheJobAsItStoodThen) {
  SyntheticJob job;
  job.hang_at = 20;
  job.hang_culprit = 6;
  TempDir dir;
  job.write(dir.path());
  HealthOptions options = test_options();
  std::string error;
  JobHealth health;
  options.at_s = 15;
  ASSERT_TRUE(analyze_job(dir.path().string(), options, health, error)) << error;
  expect_exactly(health, {});
  EXPECT_TRUE(health.running);
  options.at_s = 26;
  ASSERT_TRUE(analyze_job(dir.path().string(), options, health, error)) << error;
  expect_exactly(health, {{"hang", "rank 6 (h3)"}});
}

// A job killed while it hung (its time limit, a user's scancel): the analysis after the job
// judges the ranks as they stood at their last heartbeats before the signal.
TEST(Health, AJobKilledWhileItHungIsAHangAfterTheJob) {
  SyntheticJob job;
  job.hang_at = 20;
  job.hang_culprit = 6;
  job.killed_by = "SIGTERM";
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"hang", "rank 6 (h3)"}});
  EXPECT_FALSE(health.running);
  ASSERT_FALSE(health.findings.empty());
  EXPECT_NE(health.findings[0].summary.find("until SIGTERM ended the job"), std::string::npos)
      << describe(health);
  SyntheticJob healthy;  // killed while it ran well
  healthy.killed_by = "SIGTERM";
  expect_exactly(analyze(healthy), {});
}

TEST(Health, ASlowHostIsNamedAsTheHost) {
  SyntheticJob job;
  job.late_us = [&](int rank, double) { return rank / 2 == 1 ? 3000.0 : 0.0; };
  job.receive_wait_ms = [](int rank) { return rank / 2 == 1 ? 0.0 : 60.0; };
  expect_exactly(analyze(job), {{"slow_host", "host h1"}});
}

// A step's first collective shows who computed slowly; the ones called right after it find
// everyone together. A slow host must be named whatever their number, and a clean job with
// them stays clean.
TEST(Health, CollectivesRightAfterAnotherDoNotHideASlowHost) {
  for (int followers : {1, 3}) {
    SyntheticJob job;
    job.followers = followers;
    job.late_us = [&](int rank, double) { return rank / 2 == 1 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank / 2 == 1 ? 0.0 : 60.0; };
    expect_exactly(analyze(job), {{"slow_host", "host h1"}});
    SyntheticJob clean;
    clean.followers = followers;
    clean.jitter_us = 60;
    expect_exactly(analyze(clean), {});
  }
}

TEST(Health, ASlowDirectedLinkIsNamedWithItsDirection) {
  SyntheticJob job;
  job.link_us = [](int from, int to, double) { return from == 0 && to == 2 ? 2000.0 : 0.0; };
  expect_exactly(analyze(job), {{"slow_link", "link h0 -> h2"}});
}

// A busy CPU delays a rank's messages as a slow link does; the link probes of the same window,
// fine round after round, say it is not the network.
TEST(Health, SlowMessagesOnALinkTheProbesFindFineAreNoFinding) {
  SyntheticJob job;
  job.link_us = [](int from, int to, double) { return from == 0 && to == 2 ? 2000.0 : 0.0; };
  job.probe_every_s = 5;
  // Default options: a 10 s window holds two probe rounds.
  expect_exactly(analyze(job, HealthOptions{}), {});
  // Probes that agree keep it (the message-based subject, with its direction).
  job.probe_latency_us = [](int from, int to, double) {
    return (from == 0 && to == 2) || (from == 2 && to == 0) ? 1030.0 : 30.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 -> h2"}});
}

// A host that became slow late in a long job: its clean windows before do not outvote the slow
// ones since; and the all-reduce that everyone now waits longer in is its consequence, not a
// second finding.
TEST(Health, AHostThatBecameSlowLateInTheJobIsNamedAlone) {
  SyntheticJob job;
  job.seconds = 60;
  job.late_us = [](int rank, double t) { return rank / 2 == 1 && t >= 40 ? 3000.0 : 0.0; };
  job.receive_wait_ms = [](int rank) { return rank / 2 == 1 ? 0.0 : 60.0; };
  job.call_us = [](double t) { return t < 40 ? 100.0 : 3100.0; };
  expect_exactly(analyze(job), {{"slow_host", "host h1"}});
}

// A link slow one way only (h0 -> h1, 3 ms) also puts h1's clock estimate off by half that (its
// exchanges with rank 0 on h0 took 3 ms longer one way): every message into h1 then reads 1.5 ms
// short and every one out of it 1.5 ms long, as if all of h1's links were slow. The messages'
// fastest readings both ways, through the other hosts, put h1's clock back: one link is named.
TEST(Health, ALinkSlowOneWayIsNotTheHostWhoseClockItSkewed) {
  SyntheticJob job;
  job.link_us = [](int from, int to, double) { return from == 0 && to == 1 ? 3000.0 : 0.0; };
  job.clock_error_us = [](int host) { return host == 1 ? -1500.0 : 0.0; };
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"slow_link", "link h0 -> h1"}});
  ASSERT_FALSE(health.evidence.clocks.corrections_us.empty());
  EXPECT_NEAR(health.evidence.clocks.corrections_us.at("h1"), 1500, 100);
  // A host whose clock estimate is merely off, with every link healthy: no finding, and the
  // correction undoes the error.
  job.link_us = [](int, int, double) { return 0.0; };
  job.clock_error_us = [](int host) { return host == 2 ? 800.0 : 0.0; };
  const JobHealth skewed = analyze(job);
  expect_exactly(skewed, {});
  EXPECT_NEAR(skewed.evidence.clocks.corrections_us.at("h2"), -800, 100);
}

// With two or three hosts no third way corrects a clock estimate, and one taken on a busy node
// can be milliseconds off (a 5 ms round trip, NetPIPE under load): every message one way then
// reads slow and every one back reads early. The round trip, which no clock error touches, is
// what a slow link must slow too.
TEST(Health, AClockErrorIsNotASlowLinkWithoutASlowRoundTrip) {
  for (int hosts : {2, 3}) {
    SyntheticJob job;
    job.hosts = hosts;
    job.ranks = 2 * hosts;
    job.clock_error_us = [](int host) { return host == 1 ? 2500.0 : 0.0; };
    expect_exactly(analyze(job), {});
    // A real one-way delay with the clock right is still one way ...
    job.clock_error_us = [](int) { return 0.0; };
    job.link_us = [](int from, int to, double) { return from == 0 && to == 1 ? 3000.0 : 0.0; };
    expect_exactly(analyze(job), {{"slow_link", "link h0 -> h1"}});
    // ... and one that skewed the estimate (half of it, the Cristian error) reads slow both
    // ways, and host h1's other link slow one way: the round trips say it is this pair's (not
    // which way), and that the other is h1's clock.
    job.clock_error_us = [](int host) { return host == 1 ? -1500.0 : 0.0; };
    if (hosts == 3) {  // with two, both ways read slow and nothing is the baseline
      const JobHealth health = analyze(job);
      expect_exactly(health, {{"slow_link", "link h0 <-> h1"}});
      EXPECT_FALSE(health.evidence.messages.slow_one_way_by_clock_only.empty());
    }
  }
}

// A pipeline whose second stage's host lost CPU (a throttled cgroup): the first stage waits for
// it and arrives at the collectives as late, taking turns being last; the messages into the
// stalled host complete late, like a slow link's. The stall counters name the host, and its
// links are not blamed.
TEST(Health, AHostHeldOffTheCpuIsTheSlowHostNotItsLinks) {
  SyntheticJob job;
  job.late_us = [](int rank, double t) { return t >= 10 && rank >= 4 ? 4000.0 : 0.0; };
  job.link_us = [](int, int to, double t) { return t >= 10 && to == 3 ? 3000.0 : 0.0; };
  job.sends = [](int from, int to, double) { return from / 2 == to / 2; };  // within a pipeline
  // Time inside MPI: the other pipeline waits for both stages, the first stage for the second
  // (clearly less than the others, as a slow rank's), the stalled stage least.
  job.receive_wait_ms = [](int rank) { return rank < 4 ? 950.0 : rank < 6 ? 700.0 : 300.0; };
  job.stall_share = [](int host, double t) {
    return t >= 10 && host == 3 ? 0.15 : 0.003 + 0.002 * host;
  };
  const JobHealth health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_host", "host h3"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_NEAR(health.findings[0].evidence.value("stall_share", 0.0), 0.15, 0.01);
  EXPECT_FALSE(health.evidence.explained_by_stalls.empty());
  // Without the counters (every host alike) the same job reads as a slow link.
  job.stall_share = [](int, double) { return 0.004; };
  const JobHealth without = analyze(job, HealthOptions{});
  EXPECT_TRUE(std::any_of(without.findings.begin(), without.findings.end(), [](const Finding& f) {
    return f.kind == "slow_link";
  })) << describe(without);
}

// A pipeline's messages go between the two stages of a replica only: a slow host network on h2
// slows its pair with h3 both ways, which says as much about h3. The probes, which measure every
// pair, name h2, and the messages' slow pair is part of that finding.
TEST(Health, AHostWhoseMessagesGoToOnePeerIsJudgedByTheProbes) {
  SyntheticJob job;
  job.probe_every_s = 5;
  job.sends = [](int from, int to, double) { return from / 2 == to / 2; };
  job.link_us = [](int from, int to, double t) {
    return t >= 8 && (from == 2 || to == 2) ? 4000.0 : 0.0;
  };
  job.probe_latency_us = [](int from, int to, double t) {
    return t >= 8 && (from == 2 || to == 2) ? 4030.0 : 30.0;
  };
  const JobHealth health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_host_network", "host h2"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_TRUE(health.findings[0].evidence.contains("message_links")) << describe(health);
  // Without probes the messages alone cannot tell h2 from h3: the pair is named.
  job.probe_every_s = 0;
  const JobHealth unprobed = analyze(job, HealthOptions{});
  for (const Finding& f : unprobed.findings) EXPECT_EQ(f.kind, "slow_link") << describe(unprobed);
}

// A slow link inside a pipeline replica: the second stage waits for the late activations and
// the first stage for the second's answer, so both arrive late at the collectives; the link
// explains both, and neither host is a slow host.
TEST(Health, BothStagesBehindASlowLinkAreExplainedByIt) {
  SyntheticJob job;
  job.sends = [](int from, int to, double) { return from / 2 == to / 2; };
  job.link_us = [](int from, int to, double t) {
    return t >= 8 && from == 0 && to == 1 ? 3000.0 : 0.0;
  };
  job.late_us = [](int rank, double t) { return t >= 8 && rank < 4 ? 3000.0 : 0.0; };
  job.receive_wait_ms = [](int rank) { return rank < 4 ? 500.0 : 950.0; };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 -> h1"}});
}

// Every host waits its turn for the CPU now and then on a busy machine: stalls alike on all hosts,
// or small ones on one, are nobody's fault.
TEST(Health, StallsAlikeOnEveryHostAreNoFinding) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SyntheticJob job;
    job.seed = seed;
    job.stall_share = [seed](int host, double t) {
      return 0.08 + 0.04 * std::sin(host * 1.7 + t * 0.3 + static_cast<double>(seed));
    };
    expect_exactly(analyze(job, HealthOptions{}), {});
    job.stall_share = [](int host, double) { return host == 2 ? 0.03 : 0.01; };
    expect_exactly(analyze(job, HealthOptions{}), {});
  }
}

TEST(Health, AHostWithSlowLinksBothWaysIsTheHostsNetwork) {
  SyntheticJob job;
  job.link_us = [](int from, int to, double) { return from == 3 || to == 3 ? 2000.0 : 0.0; };
  expect_exactly(analyze(job), {{"slow_host_network", "host h3"}});
}

// Link probes: a collective-only job (no messages of its own to time) with probes every 5 s.
SyntheticJob probed_job() {
  SyntheticJob job;
  job.messages = false;
  job.probe_every_s = 5;
  return job;
}

// A link that drops packets delivers most messages on time and a few after a retransmission
// timeout: at 200 ms, the medians stay healthy. About `share` of a lossy pair's messages stall,
// spread over the job.
double retransmitted_us(bool lossy, double t, int from, int to, double share = 0.025) {
  const double draw = std::fmod(t * 7.31 + from * 0.377 + to * 0.613, 1.0);
  return lossy && draw < share ? 200'000.0 : 0.0;
}

TEST(Health, AHostThatDropsPacketsIsNamedByItsStalledTransfers) {
  SyntheticJob job;
  job.link_us = [](int from, int to, double t) {
    return retransmitted_us(from == 1 || to == 1, t, from, to);
  };
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"slow_host_network", "host h1"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_EQ(health.findings[0].evidence.value("source", ""), "stalls");
  EXPECT_GE(health.findings[0].evidence.value("moments", 0), 3);
}

TEST(Health, ALinkThatDropsPacketsOneWayIsNamedWithItsDirection) {
  SyntheticJob job;
  job.link_us = [](int from, int to, double t) {
    return retransmitted_us(from == 0 && to == 1, t, from, to, 0.08);
  };
  expect_exactly(analyze(job), {{"slow_link", "link h0 -> h1"}});
}

// A job of collectives only: the probes' transfers stall now and then on one host's pairs.
TEST(Health, ProbesThatStallOnOneHostsPairsNameTheHost) {
  SyntheticJob job = probed_job();
  job.probe_every_s = 1;
  job.probe_mb_per_s = [](int from, int to, double t) {
    const bool lossy = (from == 2 || to == 2) && std::fmod(t * 0.7 + from + to, 3.0) < 0.75;
    return lossy ? 1.0 : 1000.0;  // 256 KiB in 262 ms instead of 0.26 ms
  };
  expect_exactly(analyze(job), {{"slow_host_network", "host h2"}});
  // The same stalls in the slowest of each round's round trips only: the fastest is healthy.
  SyntheticJob pings = probed_job();
  pings.probe_every_s = 1;
  pings.probe_slowest_latency_us = [](int from, int to, double t) {
    const bool lossy = (from == 2 || to == 2) && std::fmod(t * 0.7 + from + to, 3.0) < 0.75;
    return lossy ? 200'000.0 : 0.0;
  };
  expect_exactly(analyze(pings), {{"slow_host_network", "host h2"}});
}

// Probes that split each round trip into its one-way legs (version 9) tell the direction that
// lost the packets: one way on one pair is that link, both ways on one host's pairs the host.
TEST(Health, ProbesOneWayLegsNameTheDirectionThatStalled) {
  auto stalled = [](double t, int pair) { return std::fmod(t * 0.7 + pair, 3.0) < 0.75; };
  SyntheticJob link = probed_job();
  link.probe_every_s = 1;
  link.probe_slowest_one_way_us = [&](int from, int to, double t) {
    return from == 0 && to == 1 && stalled(t, 0) ? 200'000.0 : 60.0;
  };
  expect_exactly(analyze(link), {{"slow_link", "link h0 -> h1"}});
  SyntheticJob both = link;
  both.probe_slowest_one_way_us = [&](int from, int to, double t) {
    return std::min(from, to) == 0 && std::max(from, to) == 1 && stalled(t, from) ? 200'000.0
                                                                                  : 60.0;
  };
  expect_exactly(analyze(both), {{"slow_link", "link h0 <-> h1"}});
  // A host whose pairs stall both ways, with a stall now and then on a pair of one of its peers
  // (a peer still held by it): the host with the most, not the first by name that passes.
  SyntheticJob host = link;
  host.probe_slowest_one_way_us = [&](int from, int to, double t) {
    const auto [a, b] = std::minmax(from, to);
    const bool lossy = (a == 1 && b == 2 && stalled(t, from)) ||
                       (a == 2 && b == 3 && stalled(t, 0) && t > 25) ||
                       (a == 0 && b == 1 && from == 0 && stalled(t, 1) && t > 27);
    return lossy ? 200'000.0 : 60.0;
  };
  expect_exactly(analyze(host), {{"slow_host_network", "host h2"}});
}

// The kernel's TCP counters (tcp_links) in a job of collectives only, whose messages commtap
// never sees: a link that loses 0.5% of its segments, one that loses both ways, and a host whose
// incoming links all lose, from 8 s on.
TEST(Health, LostTcpSegmentsNameTheLinkOrHostThatLoses) {
  SyntheticJob job;
  job.messages = false;
  job.tcp = true;
  job.tcp_lost_share = [](int from, int to, double t) {
    return from == 1 && to == 2 && t >= 8 ? 0.005 : 0.0;
  };
  JobHealth health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_link", "link h1 -> h2"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_EQ(health.findings[0].evidence.value("source", ""), "tcp");
  EXPECT_NEAR(health.findings[0].evidence.value("share", 0.0), 0.005, 0.002);
  job.tcp_lost_share = [](int from, int to, double t) {
    return std::min(from, to) == 1 && std::max(from, to) == 3 && t >= 8 ? 0.01 : 0.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h1 <-> h3"}});
  job.tcp_lost_share = [](int, int to, double t) { return to == 2 && t >= 8 ? 0.005 : 0.0; };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_host_network", "host h2"}});
  // Lost both ways, on a host held off the CPU meanwhile: the kernel counts the losses whether
  // or not the process runs, so the stall explains none of them.
  job.tcp_lost_share = [](int from, int to, double t) {
    return (from == 2 || to == 2) && t >= 8 ? 0.02 : 0.0;
  };
  job.stall_share = [](int host, double t) { return host == 2 && t >= 8 ? 0.2 : 0.004; };
  health = analyze(job, HealthOptions{});
  ASSERT_FALSE(health.findings.empty()) << describe(health);
  EXPECT_EQ(health.findings[0].kind, "slow_host_network");
  EXPECT_EQ(health.findings[0].subject, "host h2");
}

// What is not a lossy link: resends the receiver reported as duplicates (on every link, and a
// lot of them on one), a loss rate every link shares, one burst, and a link that lost early in a
// long job and has not since.
TEST(Health, DuplicateResendsOneBurstOrOldLossesAreNoFinding) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    SyntheticJob job;
    job.seed = seed;
    job.messages = false;
    job.tcp = true;
    job.tcp_duplicate_share = [](int from, int to, double) {
      return from == 0 && to == 3 ? 0.01 : 0.002;
    };
    job.tcp_lost_share = [](int, int, double) { return 0.0005; };
    expect_exactly(analyze(job, HealthOptions{}), {});
  }
  SyntheticJob burst;
  burst.messages = false;
  burst.tcp = true;
  burst.tcp_lost_share = [](int from, int to, double t) {
    return from == 1 && to == 2 && static_cast<int>(t) == 12 ? 0.05 : 0.0;
  };
  expect_exactly(analyze(burst, HealthOptions{}), {});
  SyntheticJob early = burst;
  early.seconds = 120;
  early.tcp_lost_share = [](int from, int to, double t) {
    return from == 1 && to == 2 && t < 30 ? 0.01 : 0.0;
  };
  expect_exactly(analyze(early, HealthOptions{}), {});
  // Within the counted 6 windows but not in the latest 3: let go.
  early.tcp_lost_share = [](int from, int to, double t) {
    return from == 1 && to == 2 && t >= 60 && t < 85 ? 0.01 : 0.0;
  };
  expect_exactly(analyze(early, HealthOptions{}), {});
  // Every link loses 0.3% (the whole fabric, or the machine itself): no link stands out.
  SyntheticJob everywhere = burst;
  everywhere.tcp_lost_share = [](int, int, double) { return 0.003; };
  expect_exactly(analyze(everywhere, HealthOptions{}), {});
}

// Two hosts: two directed links, too few for a baseline; the floors decide, and a link that loses
// both ways is named as such.
TEST(Health, LostTcpSegmentsOnTwoHosts) {
  SyntheticJob job;
  job.ranks = 4;
  job.hosts = 2;
  job.messages = false;
  job.tcp = true;
  job.tcp_lost_share = [](int, int, double t) { return t >= 8 ? 0.004 : 0.0; };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 <-> h1"}});
  job.tcp_lost_share = [](int from, int, double t) { return from == 1 && t >= 8 ? 0.004 : 0.0; };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h1 -> h0"}});
  job.tcp_lost_share = [](int, int, double) { return 0.0002; };
  expect_exactly(analyze(job, HealthOptions{}), {});
}

// Stalls that say nothing about a network: every message into one host delayed at the same
// moment (its process paused once), and a receiver that completes its receives late now and
// then (it posts them early and computes): only what it receives, never what it sends.
TEST(Health, StallsAtOneMomentOrOnlyIntoOneHostAreNoFinding) {
  SyntheticJob once;
  once.link_us = [](int, int to, double t) {
    return to == 2 && t >= 12 && t < 12.3 ? 200'000.0 : 0.0;
  };
  expect_exactly(analyze(once), {});
  SyntheticJob receiver;
  receiver.link_us = [](int from, int to, double t) {
    return retransmitted_us(to == 2, t, from, to);
  };
  expect_exactly(analyze(receiver), {});
}

TEST(Health, ProbesOfACleanJobFindNothing) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    SyntheticJob job = probed_job();
    job.seed = seed;
    expect_exactly(analyze(job, HealthOptions{}), {});
  }
}

TEST(Health, ProbesFindARateLimitedHostInACollectiveOnlyJob) {
  SyntheticJob job = probed_job();
  // 20 Mbit/s both ways, against ~1 GB/s between the others: latency is unchanged.
  job.probe_mb_per_s = [](int from, int to, double) { return from == 2 || to == 2 ? 2.5 : 1000.0; };
  const JobHealth health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_host_network", "host h2"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_EQ(health.findings[0].severity, commtap::analyzer::Severity::error);
  EXPECT_NEAR(health.findings[0].evidence.value("mb_per_s", 0.0), 2.5, 0.5);
}

TEST(Health, ProbesFindASlowDirectedLinkAndALatencyFault) {
  SyntheticJob job = probed_job();
  job.probe_mb_per_s = [](int from, int to, double) { return from == 0 && to == 1 ? 3.0 : 1000.0; };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 -> h1"}});
  job = probed_job();
  job.probe_latency_us = [](int from, int to, double) {
    return (from == 1 && to == 3) || (from == 3 && to == 1) ? 2030.0 : 30.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h1 <-> h3"}});
}

// One probe round names nothing; a host needs its pairs slow in two rounds, a link in three, and
// each time the same measure: a busy node's descheduled leader slows one pair's latency in one
// round and its throughput in the next.
TEST(Health, ProbeFindingsNeedTheSameMeasureSlowInSeveralRounds) {
  SyntheticJob job = probed_job();
  job.probe_mb_per_s = [](int from, int to, double) { return from == 2 || to == 2 ? 2.5 : 1000.0; };
  job.seconds = 8;  // rounds at 5 s
  expect_exactly(analyze(job, HealthOptions{}), {});
  job.seconds = 12;  // 5 and 10 s
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_host_network", "host h2"}});

  job = probed_job();
  job.probe_mb_per_s = [](int from, int to, double) { return from == 0 && to == 1 ? 3.0 : 1000.0; };
  job.seconds = 12;
  expect_exactly(analyze(job, HealthOptions{}), {});
  job.seconds = 17;  // 5, 10 and 15 s
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 -> h1"}});

  job = probed_job();
  job.seconds = 22;  // four rounds: latency slow in two of them, throughput in the other two
  job.probe_latency_us = [](int from, int to, double t) {
    return (from == 0 && to == 3) && static_cast<int>(t) % 10 == 5 ? 600.0 : 30.0;
  };
  job.probe_mb_per_s = [](int from, int to, double t) {
    return (from == 0 && to == 3) && static_cast<int>(t) % 10 == 0 ? 100.0 : 1000.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {});

  // A round trip slow only when h2 starts it, in every round: h2 or h1 answers late (CPU), the
  // link is as fast both ways. The same latency both ways is the link.
  job = probed_job();
  job.probe_latency_us = [](int from, int to, double) {
    return from == 2 && to == 1 ? 1030.0 : 30.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {});
  job.probe_latency_us = [](int from, int to, double) {
    return (from == 2 && to == 1) || (from == 1 && to == 2) ? 1030.0 : 30.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h1 <-> h2"}});
}

TEST(Health, ALinkNamedByMessagesAndProbesIsOneFindingWithItsDirection) {
  SyntheticJob job;
  job.probe_every_s = 5;
  job.link_us = [](int from, int to, double) { return from == 0 && to == 2 ? 2000.0 : 0.0; };
  // A probe's latency is half a round trip: both directions look slow.
  job.probe_latency_us = [](int from, int to, double) {
    return (from == 0 && to == 2) || (from == 2 && to == 0) ? 1030.0 : 30.0;
  };
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"slow_link", "link h0 -> h2"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_EQ(health.findings[0].evidence["also"].value("source", ""), "probes");
}

// A link slow one way slows both directions' probe round trips; on a busy node a third pair of
// the host crossing the line in two rounds then makes the host look slow to the probes. The
// messages, which measured the host's other pairs fine, say it is the link.
TEST(Health, ProbesOfAHostWhoseMessagesShowOneSlowLinkNameTheLink) {
  SyntheticJob job;
  job.seconds = 20;  // probe rounds at 5, 10 and 15 s
  job.probe_every_s = 5;
  job.link_us = [](int from, int to, double) { return from == 0 && to == 1 ? 3000.0 : 0.0; };
  job.probe_latency_us = [](int from, int to, double t) {
    const bool link = (from == 0 && to == 1) || (from == 1 && to == 0);
    const bool noise = ((from == 1 && to == 2) || (from == 2 && to == 1)) && t >= 10;
    return link || noise ? 1530.0 : 30.0;
  };
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"slow_link", "link h0 -> h1"}});
  ASSERT_FALSE(health.evidence.probes.host_is_a_link.empty());
}

// Both ways by the probes, one way by the job's messages (whose own finding waits for the
// hosts' other links, unmeasured lately): the messages' direction.
TEST(Health, ALinkTheProbesFindBothWaysTakesTheMessagesDirection) {
  SyntheticJob job;
  job.probe_every_s = 5;
  job.link_us = [](int from, int to, double) { return from == 1 && to == 0 ? 3000.0 : 0.0; };
  job.sends = [](int from, int to, double t) { return t < 20 || (from != 2 && to != 2); };
  job.probe_latency_us = [](int from, int to, double) {
    return (from == 0 && to == 1) || (from == 1 && to == 0) ? 1530.0 : 30.0;
  };
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"slow_link", "link h1 -> h0"}});
}

// A job of collectives only, a link slow one way: the probes' round trips cannot say which
// way, and the link put the far host's clock estimate off by half the delay. With four hosts
// the probes' four times through the third hosts put the clock back, and the one-way times name
// the direction; with three the round trip names the pair only.
TEST(Health, ProbesTellTheDirectionOfALinkSlowOneWay) {
  SyntheticJob job = probed_job();
  job.probe_one_way_us = [](int from, int to, double) {
    return from == 0 && to == 1 ? 3030.0 : 30.0;
  };
  job.clock_error_us = [](int host) { return host == 1 ? -1500.0 : 0.0; };
  const JobHealth health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_link", "link h0 -> h1"}});
  EXPECT_NEAR(health.evidence.clocks.corrections_us.at("h1"), 1500, 100);
  job.hosts = 3;
  job.ranks = 6;
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 <-> h1"}});
  job.clock_error_us = [](int) { return 0.0; };  // an estimate made before the fault began
  expect_exactly(analyze(job, HealthOptions{}), {{"slow_link", "link h0 -> h1"}});
}

// Files of older schema versions are read, with what they lack empty: version 5 had probes
// without their four times (no clock correction or direction from them), version 4 no probes.
TEST(Health, OlderTraceVersionsAreReadWithWhatTheyHold) {
  SyntheticJob job = probed_job();
  job.probe_one_way_us = [](int from, int to, double) {
    return from == 0 && to == 1 ? 3030.0 : 30.0;
  };
  job.clock_error_us = [](int host) { return host == 1 ? -1500.0 : 0.0; };
  auto analyze_as = [&](const std::string& downgrade) {
    TempDir dir;
    job.write(dir.path());
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      sqlite3* db = nullptr;
      EXPECT_EQ(sqlite3_open(entry.path().c_str(), &db), SQLITE_OK);
      char* message = nullptr;
      EXPECT_EQ(sqlite3_exec(db, downgrade.c_str(), nullptr, nullptr, &message), SQLITE_OK)
          << (message ? message : "");
      sqlite3_free(message);
      sqlite3_close(db);
    }
    JobHealth health;
    std::string error;
    const bool read = analyze_job(dir.path().string(), HealthOptions{}, health, error);
    // The merged job database (commtap query, merge) reads it too, with the columns it has.
    std::string merge_error;
    auto merged = commtap::analyzer::JobDatabase::open(dir.path().string(), merge_error);
    EXPECT_EQ(static_cast<bool>(merged), read) << merge_error;
    if (merged) {
      auto rows = merged->query("SELECT count(*), count(sent_ns) FROM probes", merge_error);
      EXPECT_TRUE(rows) << merge_error;
    }
    return std::make_pair(read ? health : JobHealth{}, error);
  };
  const auto [v5, error5] = analyze_as(
      "ALTER TABLE probes DROP COLUMN sent_ns; ALTER TABLE probes DROP COLUMN peer_received_ns;"
      "ALTER TABLE probes DROP COLUMN peer_replied_ns; ALTER TABLE probes DROP COLUMN "
      "received_ns; PRAGMA user_version = 5");
  EXPECT_EQ(error5, "");
  expect_exactly(v5, {{"slow_link", "link h0 <-> h1"}});  // half a round trip: no direction
  const auto [v4, error4] = analyze_as("DROP TABLE probes; PRAGMA user_version = 4");
  EXPECT_EQ(error4, "");
  expect_exactly(v4, {});  // a collective-only job without probes: nothing to see links by
  const auto [v3, error3] = analyze_as("PRAGMA user_version = 3");
  EXPECT_NE(error3.find("schema version 3"), std::string::npos) << error3;
}

TEST(Health, AProbedLinkThatRecoveredIsNotFlagged) {
  // Slow in the first of 5 rounds only: the recent rounds decide.
  SyntheticJob job = probed_job();
  job.probe_mb_per_s = [](int from, int to, double t) {
    return (from == 2 || to == 2) && t < 6 ? 2.5 : 1000.0;
  };
  expect_exactly(analyze(job, HealthOptions{}), {});
}

TEST(Health, AHangNamesTheRankThatNeverArrived) {
  SyntheticJob job;
  job.hang_at = 20;
  job.hang_culprit = 6;
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"hang", "rank 6 (h3)"}});
  EXPECT_EQ(health.findings.at(0).evidence["stuck_ranks"].size(), 7u);
  // Not yet a hang when the wait is shorter than --hang-after.
  HealthOptions patient = test_options();
  patient.hang_after_s = 60;
  expect_exactly(analyze(job, patient), {});
  // One rank got through and waits in the next all-reduce, for all the others: they are stuck
  // themselves, and only the one that never came is named.
  job.hang_ahead = 2;
  expect_exactly(analyze(job), {{"hang", "rank 6 (h3)"}});
  // Another rank never arrived either, blocked in a receive from the culprit all that time
  // (its pipeline partner): it waits, and the culprit, outside MPI, is named.
  job.hang_ahead = -1;
  job.hang_waiting = 2;
  const JobHealth waiting = analyze(job);
  expect_exactly(waiting, {{"hang", "rank 6 (h3)"}});
  ASSERT_FALSE(waiting.findings.empty());
  EXPECT_EQ(waiting.findings[0].evidence["waiting_in_calls"], nlohmann::json::array({2}));
}

TEST(Health, ACrashedRankIsLost) {
  SyntheticJob job;
  job.crash_at = 18;
  job.crash_rank = 3;
  expect_exactly(analyze(job), {{"rank_lost", "rank 3 (h1)"}});
}

TEST(Health, GradualDegradationOfEveryRankIsFlagged) {
  SyntheticJob job;
  job.call_us = [](double t) { return t < 20 ? 100.0 : 100.0 + (t - 19) * 150.0; };
  const JobHealth health = analyze(job);
  expect_exactly(health, {{"degradation", "MPI_Allreduce from train_step (1024 B class)"}});
}

// osu_bw's shape: its 4-byte acknowledgement waits longer and longer because the program moved
// on to larger messages, not because anything degraded.
TEST(Health, SlowerCallsInANewPhaseOfTheProgramAreNoDegradation) {
  SyntheticJob job;
  job.call_us = [](double t) { return t < 20 ? 100.0 : 100.0 + (t - 19) * 150.0; };
  job.isend_class = [](double t) { return t < 20 ? std::int64_t{-1} : std::int64_t{65536}; };
  expect_exactly(analyze(job), {});
  // The same new calls from the start: the mix is steady, and the slowdown is reported.
  job.isend_class = [](double) { return std::int64_t{65536}; };
  expect_exactly(analyze(job), {{"degradation", "MPI_Allreduce from train_step (1024 B class)"}});
}

TEST(Health, CorruptAndEmptyInputsAreErrorsNamingTheFile) {
  TempDir dir;
  JobHealth health;
  std::string error;
  EXPECT_FALSE(analyze_job(dir.path().string(), HealthOptions{}, health, error));
  EXPECT_NE(error.find(dir.path().string()), std::string::npos) << error;

  const fs::path garbage = dir.path() / "rank-0.db";
  std::ofstream(garbage) << "this is not a database, just some bytes\n";
  error.clear();
  EXPECT_FALSE(analyze_job(dir.path().string(), HealthOptions{}, health, error));
  EXPECT_NE(error.find("rank-0.db"), std::string::npos) << error;

  fs::remove(garbage);
  sqlite3* db = nullptr;
  sqlite3_open(garbage.c_str(), &db);
  sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  error.clear();
  EXPECT_FALSE(analyze_job(dir.path().string(), HealthOptions{}, health, error));
  EXPECT_NE(error.find("schema version"), std::string::npos) << error;
}

TEST(Health, FindJobsScansAParentDirectory) {
  TempDir parent;
  SyntheticJob job;
  job.ranks = 2;
  job.hosts = 1;
  job.seconds = 3;
  fs::create_directories(parent.path() / "a");
  fs::create_directories(parent.path() / "b");
  fs::create_directories(parent.path() / "not-a-job");
  job.write(parent.path() / "a");
  job.write(parent.path() / "b");
  std::vector<commtap::analyzer::UnreadableInput> errors;
  const auto jobs = commtap::analyzer::find_jobs({parent.path().string()}, errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(fs::path(jobs[0]).filename(), "a");
  commtap::analyzer::find_jobs({(parent.path() / "missing").string()}, errors);
  EXPECT_EQ(errors.size(), 1u);
}

TEST(Health, StoredFindingsAreNotDuplicatedAndGoInactive) {
  TempDir dir;
  SyntheticJob job;
  job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
  job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 60.0; };
  const JobHealth health = analyze(job);
  ASSERT_EQ(health.findings.size(), 1u);
  const std::string store = (dir.path() / "findings.db").string();
  std::string error;
  JobHealth later = health;
  later.findings[0].first_seen_ns += 5'000'000'000ull;
  later.findings[0].last_seen_ns += 5'000'000'000ull;
  ASSERT_TRUE(commtap::analyzer::store_findings(store, {health}, error)) << error;
  ASSERT_TRUE(commtap::analyzer::store_findings(store, {later}, error)) << error;
  auto rows = [&](const char* sql) {
    sqlite3* db = nullptr;
    sqlite3_open(store.c_str(), &db);
    std::string out;
    sqlite3_exec(
        db, sql,
        [](void* o, int n, char** values, char**) {
          for (int i = 0; i < n; ++i)
            *static_cast<std::string*>(o) += std::string(values[i] ? values[i] : "NULL") + " ";
          return 0;
        },
        &out, nullptr);
    sqlite3_close(db);
    return out;
  };
  EXPECT_EQ(rows("SELECT count(*), active FROM findings"), "1 1 ");
  EXPECT_EQ(rows("SELECT first_seen_ns, last_seen_ns FROM findings"),
            std::to_string(health.findings[0].first_seen_ns) + " " +
                std::to_string(later.findings[0].last_seen_ns) + " ");
  JobHealth healed = health;
  healed.findings.clear();
  ASSERT_TRUE(commtap::analyzer::store_findings(store, {healed}, error)) << error;
  EXPECT_EQ(rows("SELECT count(*), active FROM findings"), "1 0 ");
}

// The store carries what later jobs' collectives route around: a link the probes find slow both
// ways is both directed links, each costing the whole round trip's excess (a probe's latency is
// half of it); the job's other findings add nothing.
TEST(Health, StoredFindingsCarryTheirAvoidList) {
  TempDir dir;
  SyntheticJob job = probed_job();
  job.probe_latency_us = [](int from, int to, double) {
    return (from == 1 && to == 3) || (from == 3 && to == 1) ? 2030.0 : 30.0;
  };
  const JobHealth health = analyze(job, HealthOptions{});
  expect_exactly(health, {{"slow_link", "link h1 <-> h3"}});
  const std::string store = (dir.path() / "findings.db").string();
  std::string error;
  ASSERT_TRUE(commtap::analyzer::store_findings(store, {health}, error)) << error;
  commtap::avoid_list::AvoidList list;
  ASSERT_TRUE(commtap::avoid_list::read_recent(store, 0, list, error)) << error;
  EXPECT_TRUE(list.hosts.empty());
  ASSERT_EQ(list.links.size(), 2u);
  EXPECT_EQ(list.links[0].from + ">" + list.links[0].to + " " + list.links[1].from + ">" +
                list.links[1].to,
            "h1>h3 h3>h1");
  for (const auto& link : list.links) {
    EXPECT_NEAR(link.extra_latency_s, 2 * 2000e-6, 0.5e-3);
    EXPECT_EQ(link.extra_latency_s, list.links[0].extra_latency_s);
  }
  // A job healed: its entries go with its active findings.
  JobHealth healed = health;
  healed.findings.clear();
  ASSERT_TRUE(commtap::analyzer::store_findings(store, {healed}, error)) << error;
  commtap::avoid_list::AvoidList after;
  ASSERT_TRUE(commtap::avoid_list::read_recent(store, 0, after, error)) << error;
  EXPECT_TRUE(after.empty());
}

// Rank 0 reading the input is late in every run of the program, on whatever host it lands; a
// faulty machine is late in every job placed on it, whichever rank it runs. With other jobs in
// the store the analyzer tells the two apart.
TEST(Health, LatenessThatFollowsTheRankAcrossJobsIsTheProgramsOwn) {
  TempDir dir;
  const std::string store = (dir.path() / "findings.db").string();
  auto run = [&](const std::string& job_id, const std::string& hosts, int late_rank) {
    SyntheticJob job;
    job.job_id = job_id;
    job.host_prefix = hosts;
    job.late_us = [=](int rank, double) { return rank == late_rank ? 3000.0 : 0.0; };
    job.receive_wait_ms = [=](int rank) { return rank == late_rank ? 0.0 : 60.0; };
    std::vector<JobHealth> jobs = {analyze(job)};
    commtap::analyzer::weigh_against_other_jobs(store, jobs);
    std::string error;
    EXPECT_TRUE(commtap::analyzer::store_findings(store, jobs, error)) << error;
    EXPECT_EQ(jobs[0].findings.size(), 1u) << describe(jobs[0]);
    return jobs[0].findings.empty() ? Finding{} : jobs[0].findings[0];
  };
  const Finding first = run("job-1", "a", 5);  // rank 5 on a2: nothing known yet
  EXPECT_EQ(first.severity, Severity::error);
  EXPECT_FALSE(first.evidence.contains("across_jobs"));
  const Finding moved = run("job-2", "b", 5);  // rank 5 again, on b2
  EXPECT_EQ(moved.kind, "slow_rank");
  EXPECT_EQ(moved.severity, Severity::warning) << moved.summary;
  EXPECT_EQ(moved.evidence["across_jobs"].value("same_rank_late_on_other_hosts", 0), 1);
  const Finding host = run("job-3", "a", 4);  // rank 4, on a2 where rank 5 was late
  EXPECT_EQ(host.severity, Severity::error) << host.summary;
  EXPECT_EQ(host.evidence["across_jobs"].value("same_host_late_with_other_ranks", 0), 1);
  // Another program's rank 5 says nothing about this one's.
  SyntheticJob other;
  other.job_id = "job-4";
  other.host_prefix = "c";
  other.command_line = "/usr/bin/solver";
  other.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
  other.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 60.0; };
  std::vector<JobHealth> jobs = {analyze(other)};
  commtap::analyzer::weigh_against_other_jobs(store, jobs);
  ASSERT_EQ(jobs[0].findings.size(), 1u);
  EXPECT_EQ(jobs[0].findings[0].severity, Severity::error);
}
