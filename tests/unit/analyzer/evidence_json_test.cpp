// A finding's typed evidence as JSON (analyzer/store/evidence_json): the keys and number formats
// reports, exports and the findings store print, and the store's late ranks read back, also from
// a store written before it had them.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <memory>
#include <string>
#include <vector>

#include "analyzer/store/evidence_json.hpp"
#include "analyzer/store/findings_store.hpp"
#include "tests/fixtures/synthetic_job.hpp"
#include "tests/unit/analyzer/health_checks.hpp"
#include "tests/unit/temp_dir.hpp"

namespace {

using namespace commtap::analyzer;
using commtap::fixtures::SyntheticJob;
using commtap::testing::analyze;
using commtap::testing::describe;
using commtap::testing::TempDir;

// Counts print as integers, measures as floating point numbers, keys sorted.
TEST(EvidenceJson, EachRulePrintsItsKeysWithTheirNumberFormats) {
  FindingEvidence lost;
  lost.rule = LostPacketsEvidence{{"", "h1", "h2", true}, 1000, 3, 5, 0.003, 0.001};
  EXPECT_EQ(evidence_text(lost),
            "{\"baseline_share\":0.001,\"both_directions\":true,\"from\":\"h1\",\"lost\":3,"
            "\"resent\":5,\"segments\":1000,\"share\":0.003,\"source\":\"tcp\",\"to\":\"h2\"}");
  FindingEvidence stalled;
  StalledTransfersEvidence stalls{{"h3", "", "", false}, 7, 4, 2e8, 1e5, 1, 2};
  stalls.transfers.push_back({.from = "h3",
                              .to = "h1",
                              .at_ns = 5,
                              .ns = 2e7,
                              .baseline_ns = 1e5,
                              .sender = {6, 1e8, 1e9},
                              .receiver = {2, -1, 0},
                              .by_scheduler = true});
  stalled.rule = stalls;
  EXPECT_EQ(evidence_text(stalled),
            "{\"baseline_ns\":100000.0,\"by_scheduler\":2,\"host\":\"h3\",\"longest_ns\":"
            "200000000.0,\"moments\":4,\"probe_transfers\":0,\"probe_transfers_stalled\":0,"
            "\"source\":\"stalls\",\"stalls\":7,\"stalls_elsewhere\":1,\"steady\":false,"
            "\"transfers\":[{\"at_ns\":5,\"baseline_ns\":100000.0,\"by_scheduler\":true,"
            "\"from\":\"h3\",\"ns\":20000000.0,\"probe\":false,\"receiver\":{\"held_off_ns\":-1.0,"
            "\"interval_ns\":0.0,\"rank\":2,\"throttled_ns\":-1.0},\"sender\":{"
            "\"held_off_ns\":100000000.0,\"interval_ns\":1000000000.0,\"rank\":6,"
            "\"throttled_ns\":-1.0},\"to\":\"h1\"}]}");
  FindingEvidence aborted;
  aborted.rule = CommAbortedEvidence{{0, 2}, 3};
  EXPECT_EQ(evidence_text(aborted), "{\"calls\":3,\"ranks\":[0,2]}");
  EXPECT_EQ(evidence_text(FindingEvidence{}), "{}");
}

// A lateness finding's optional parts: the program's structure suspected, collective times
// without MPI, stall shares, and what the store adds from other jobs.
TEST(EvidenceJson, LatenessPrintsItsOptionalPartsOnlyWhereKnown) {
  LatenessEvidence late;
  late.who = {"h2", "train", {0}, std::nullopt};
  late.windows_flagged = 9;
  late.windows = 10;
  late.own_collective = 0.01;
  late.others_collective = 0.6;
  FindingEvidence evidence{late, nullptr, {}};
  nlohmann::json json = evidence_json(evidence);
  EXPECT_EQ(json.at("mpi_time_share"), 0.01);
  EXPECT_FALSE(json.contains("collective_ns"));
  EXPECT_FALSE(json.contains("program_structure_suspected"));
  EXPECT_FALSE(json.contains("stall_share"));
  EXPECT_FALSE(json.contains("across_jobs"));
  EXPECT_EQ(json.at("windows_flagged").dump(), "9");
  EXPECT_EQ(json.at("test").at("test"), "binomial tail bound (Chernoff)");

  late.collective_times = true;
  late.suspected = SuspectedStructure::call_sites;
  late.severity_if_the_machine = Severity::error;
  late.late_sites = {"comm 1 site 3"};
  late.stall_share = 0.2;
  late.others_stall_share = 0.0;
  late.who.across_jobs = AcrossJobs{2, 0};
  json = evidence_json(FindingEvidence{late, nullptr, {}});
  EXPECT_EQ(json.at("collective_ns"), 0.01);
  EXPECT_FALSE(json.contains("mpi_time_share"));
  EXPECT_EQ(json.at("program_structure_suspected"), "call sites");
  EXPECT_EQ(json.at("severity_if_the_machine"), "error");
  EXPECT_EQ(json.at("late_sites"), nlohmann::json::array({"comm 1 site 3"}));
  EXPECT_EQ(json.at("others_stall_share").dump(), "0.0");
  EXPECT_EQ(json.at("across_jobs").dump(),
            "{\"same_host_late_with_other_ranks\":0,\"same_rank_late_on_other_hosts\":2}");
  late.suspected = SuspectedStructure::rank_zero;
  json = evidence_json(FindingEvidence{late, nullptr, {}});
  EXPECT_EQ(json.at("program_structure_suspected"), "rank 0");
  EXPECT_FALSE(json.contains("late_sites"));
}

// What the pipeline adds: another rule's evidence merged in (nested), the links absorbed.
TEST(EvidenceJson, MergedEvidenceNestsUnderAlsoAndAbsorbedLinksUnderLinks) {
  FindingEvidence probes{ProbesAlsoEvidence{2e6, 10, 3e4, 1000}, nullptr, {}};
  FindingEvidence messages{MessageLinkEvidence{}, nullptr, {}};
  messages.also = std::make_shared<const FindingEvidence>(probes);
  FindingEvidence host{MessageHostEvidence{"h1", 1, 2, 3, {}}, nullptr, {}};
  host.also = std::make_shared<const FindingEvidence>(messages);
  host.absorbed_links = {"link h1 -> h2", "link h3 -> h1"};
  const nlohmann::json json = evidence_json(host);
  EXPECT_EQ(json.at("also").at("also").at("source"), "probes");
  EXPECT_EQ(json.at("also").at("also").at("latency_ns"), 2e6);
  EXPECT_EQ(json.at("links"), nlohmann::json::array({"link h1 -> h2", "link h3 -> h1"}));
  EXPECT_EQ(json.at("messages").dump(), "3");
}

// A store written before `late_ranks` holds its slow ranks in the evidence only: they are
// weighed all the same, and storing into it adds the table without losing them.
TEST(EvidenceJson, AStoreWrittenBeforeLateRanksIsWeighedAndKept) {
  TempDir dir;
  const std::string store = (dir.path() / "findings.db").string();
  auto late_job = [](const std::string& job_id, const std::string& hosts) {
    SyntheticJob job;
    job.job_id = job_id;
    job.host_prefix = hosts;
    job.late_us = [](int rank, double) { return rank == 5 ? 6000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 120.0; };
    return analyze(job);
  };
  const JobHealth earlier = late_job("job-1", "a");
  ASSERT_EQ(earlier.findings.size(), 1u) << describe(earlier);
  const SlowComputeSubject* who = slow_compute_subject(earlier.findings[0].evidence);
  ASSERT_NE(who, nullptr);
  ASSERT_FALSE(who->program.empty());
  // The previous version's schema and row.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(store.c_str(), &db), SQLITE_OK);
  const std::string row =
      "CREATE TABLE findings (job_id TEXT NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL, "
      "subject TEXT NOT NULL, severity TEXT NOT NULL, summary TEXT NOT NULL, evidence TEXT NOT "
      "NULL, first_seen_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL, active INTEGER NOT "
      "NULL, PRIMARY KEY (job_id, kind, subject));"
      "INSERT INTO findings VALUES ('job-1', 'p', 'slow_rank', 'rank 5 (a2)', 'error', 's', '" +
      evidence_text(earlier.findings[0].evidence) + "', 1, 2, 1);";
  ASSERT_EQ(sqlite3_exec(db, row.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  std::vector<JobHealth> jobs = {late_job("job-2", "b")};  // rank 5 again, on b2
  weigh_against_other_jobs(store, jobs);
  ASSERT_EQ(jobs[0].findings.size(), 1u) << describe(jobs[0]);
  const SlowComputeSubject* moved = slow_compute_subject(jobs[0].findings[0].evidence);
  ASSERT_NE(moved, nullptr);
  ASSERT_TRUE(moved->across_jobs.has_value());
  EXPECT_EQ(moved->across_jobs->same_rank_late_on_other_hosts, 1u);
  EXPECT_EQ(jobs[0].findings[0].severity, Severity::warning);

  // Stored: the new job's ranks in `late_ranks`, the old job's still read from its evidence.
  std::string error;
  ASSERT_TRUE(store_findings(store, jobs, error)) << error;
  ASSERT_EQ(sqlite3_open(store.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* count = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT job_id, rank FROM late_ranks", -1, &count, nullptr),
            SQLITE_OK);
  std::vector<std::string> rows;
  while (sqlite3_step(count) == SQLITE_ROW)
    rows.push_back(std::string(reinterpret_cast<const char*>(sqlite3_column_text(count, 0))) + " " +
                   std::to_string(sqlite3_column_int(count, 1)));
  sqlite3_finalize(count);
  sqlite3_close(db);
  EXPECT_EQ(rows, std::vector<std::string>{"job-2 5"});
  std::vector<JobHealth> third = {late_job("job-3", "c")};
  weigh_against_other_jobs(store, third);
  ASSERT_EQ(third[0].findings.size(), 1u) << describe(third[0]);
  const SlowComputeSubject* again = slow_compute_subject(third[0].findings[0].evidence);
  ASSERT_TRUE(again && again->across_jobs);
  EXPECT_EQ(again->across_jobs->same_rank_late_on_other_hosts, 2u);
}

}  // namespace
