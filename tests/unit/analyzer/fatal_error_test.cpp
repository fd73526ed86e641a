// Fatal MPI errors (ranks.ended_by 'mpi_error', interpose/fatal_errors.hpp) in the analyzer: a
// peer's failure names the peer that went silent first as lost, however soon MPI aborted the job
// after it; the caller's own mistake is a finding of its own, and names no peer.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "monitor/trace_writer.hpp"
#include "tests/unit/analyzer/health_checks.hpp"

namespace {

using commtap::testing::analyze;
using commtap::testing::describe;
using commtap::testing::expect_exactly;

constexpr std::uint64_t kStartWall = 1'700'000'000'000'000'000ULL;  // 2023: in the past

// `ranks` ranks on hosts h0, h1, ... (one each) that wrote a window a second for `seconds`;
// then MPI aborted the job: the ranks in `errors` ended by a fatal MPI error, written `error_ms`
// after their last ordinary window, the others never wrote again (the launcher's SIGKILL), the
// crashed one `crashed_ms` before the others' last window.
struct AbortedJob {
  int ranks = 4;
  int seconds = 7;
  int crashed = 1;
  double crashed_ms = 20;
  double error_ms = 30;
  std::map<int, commtap::monitor::RankFacts::Error> errors;
  // The ranks neither crashed nor erring go on 2 s more (the launcher left them, waiting in a
  // collective) instead of being killed with the others.
  bool others_go_on = false;

  std::string write(const std::filesystem::path& directory) const {
    for (int r = 0; r < ranks; ++r) {
      const int own = others_go_on && r != crashed && !errors.count(r) ? seconds + 2 : seconds;
      std::vector<commtap::monitor::Snapshot> windows(static_cast<std::size_t>(own));
      for (int w = 0; w < own; ++w) {
        commtap::monitor::Snapshot& s = windows[static_cast<std::size_t>(w)];
        double at_ms = 1000.0 * (w + 1) + 3.0 * r;
        if (w + 1 == own && r == crashed) at_ms -= crashed_ms;
        if (w + 1 == own && errors.count(r)) at_ms += error_ms;
        s.wall_ns = kStartWall + static_cast<std::uint64_t>(at_ms * 1e6);
        s.function_names = {"MPI_Isend"};
        s.stalled_ns = 0;
      }
      commtap::monitor::RankFacts facts;
      facts.job_id = "aborted";
      facts.rank = r;
      facts.world_size = ranks;
      facts.host = "h" + std::to_string(r);
      facts.node = r;
      facts.mpi_library = "MPICH Version: 4.0.2";
      facts.command_line = "./halo";
      facts.start_ns = kStartWall;
      facts.ended_by = "running";
      if (auto e = errors.find(r); e != errors.end()) {
        facts.ended_by = "mpi_error";
        facts.error = e->second;
      }
      const std::string error = commtap::monitor::write_rank_database(
          (directory / ("rank-" + std::to_string(r) + ".db")).string(), facts,
          {{"COMMTAP_INTERVAL", "1000"}}, windows);
      if (!error.empty()) return error;
    }
    return "";
  }
};

commtap::monitor::RankFacts::Error endpoint_timeout(int peer, const char* function = "MPI_Isend") {
  return {.function = function,
          .comm_id = 0,
          .peer = peer,
          .error_class = "MPI_ERR_OTHER",
          .text =
              "Other MPI error, error stack:\ninternal_Isend(129): MPI_Isend(buf=0x55a8, "
              "count=1024, MPI_DOUBLE, 1, 0, comm=0x84000003) failed\nMPID_Isend(178)......: "
              "\nMPIDI_UCX_send(83)...:  returned failed request in UCX netmod(ucx_send.h 83 "
              "MPIDI_UCX_send Endpoint timeout)"};
}

}  // namespace

// sweep 32 G: rank 1 killed; rank 0's MPI_Isend to it failed 30 ms later (UCX's endpoint
// timeout) and MPI aborted the job, every trace stopping within 50 ms. Before the error was
// recorded, nothing was found.
TEST(FatalErrors, APeersFailureNamesThePeerThatWentSilentFirst) {
  AbortedJob job;
  job.errors = {{0, endpoint_timeout(1)}, {2, endpoint_timeout(1)}};
  const commtap::analyzer::JobHealth health = analyze(job);
  expect_exactly(health, {{"rank_lost", "rank 1 (h1)"}});
  ASSERT_FALSE(health.findings.empty());
  const std::string& summary = health.findings[0].summary;
  EXPECT_NE(summary.find("rank 0 (h0)'s MPI_Isend to it failed as a dead peer's do (MPI_ERR_OTHER: "
                         "returned failed request in UCX netmod(ucx_send.h 83 MPIDI_UCX_send "
                         "Endpoint timeout)), and 1 other rank's"),
            std::string::npos)
      << describe(health);
}

// A peer heard from after the error (it went on until the launcher killed it) is not the one
// that failed: the error is said as it is.
TEST(FatalErrors, APeerHeardAfterTheErrorIsNotLost) {
  AbortedJob job;
  job.crashed = -1;
  job.error_ms = -100;  // the error's window came before the peer's last
  job.errors = {{0, endpoint_timeout(1)}};
  expect_exactly(analyze(job), {{"mpi_error", "rank 0 (h0)"}});
}

// An invalid tag is the caller's mistake: its peer, killed by the launcher with the others right
// after, is not lost.
TEST(FatalErrors, TheCallersOwnMistakeNamesNoPeer) {
  AbortedJob job;
  job.crashed = -1;
  job.errors = {{1,
                 {.function = "MPI_Send",
                  .comm_id = 0,
                  .peer = 0,
                  .error_class = "MPI_ERR_TAG",
                  .text = "Invalid tag, error stack:\ninternal_Send(120): MPI_Send(buf=0x7ff, "
                          "count=1, MPI_INT, 3, -5, comm=0x84000003) failed\n"
                          "internal_Send(79).: Invalid tag, value is -5"}}};
  const commtap::analyzer::JobHealth health = analyze(job);
  expect_exactly(health, {{"mpi_error", "rank 1 (h1)"}});
  ASSERT_FALSE(health.findings.empty());
  EXPECT_NE(health.findings[0].summary.find(
                "MPI_Send with rank 0 (h0) failed (MPI_ERR_TAG: Invalid tag, value is -5)"),
            std::string::npos)
      << describe(health);
}

// sweep 33 (the crash run of the halo, the launcher leaving the others): ranks 0 and 3 failed in
// MPI_Allreduce, which has no one peer, 30 ms after rank 1 went; rank 2 waited on in it. Rank 1
// is the one member silent since before the errors once rank 2 has written its next window (1 s
// later at most), seconds before its heartbeat is missed. Where every other rank went silent too
// (the launcher killed them all), the collective's error cannot tell which went first: the errors
// are said as they are.
TEST(FatalErrors, ACollectivesFailureNamesItsOneMemberSilentSinceBefore) {
  AbortedJob job;
  job.others_go_on = true;
  job.errors = {{0, endpoint_timeout(-1, "MPI_Allreduce")},
                {3, endpoint_timeout(-1, "MPI_Allreduce")}};
  commtap::analyzer::HealthOptions options = commtap::testing::test_options();
  options.at_s = 8.5;  // live, 1.5 s after the errors
  const commtap::analyzer::JobHealth health = analyze(job, options);
  expect_exactly(health, {{"rank_lost", "rank 1 (h1)"}});
  // Right after the errors, before rank 2's next window: nothing yet, rather than the errors.
  options.at_s = 7.1;
  expect_exactly(analyze(job, options), {});

  job.others_go_on = false;
  expect_exactly(analyze(job), {{"mpi_error", "rank 0 (h0)"}, {"mpi_error", "rank 3 (h3)"}});
}
