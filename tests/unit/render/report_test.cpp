// commtap report's page for analyses made up here, at sizes the real-job test (mpi.report)
// does not reach: the heat map of 1,000 ranks is binned into rows that fit, a job of one window
// is drawn as points and one of two as lines, and the page forbids every request.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "analyzer/query/job_database.hpp"
#include "analyzer/trace/report_inputs.hpp"
#include "monitor/monitor.hpp"
#include "render/report_html.hpp"
#include "tests/unit/temp_dir.hpp"

using commtap::analyzer::analyze_job;
using commtap::analyzer::HealthOptions;
using commtap::analyzer::JobDatabase;
using commtap::analyzer::JobHealth;
using commtap::analyzer::LatenessTable;
using commtap::analyzer::ReportInputs;
using commtap::analyzer::TcpLink;
using commtap::render::health_html;
using commtap::testing::TempDir;

namespace {

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The markup of <svg id='ID'> in `page`.
std::string svg_of(const std::string& page, const std::string& id) {
  const auto start = page.find("<svg id='" + id + "'");
  if (start == std::string::npos) return "";
  return page.substr(start, page.find("</svg>", start) + 6 - start);
}

// A job of `ranks` ranks analyzed in `windows` windows of 0.5 s; rank 7 (if any) 20 ms late.
JobHealth job_of(int ranks, int windows) {
  JobHealth job;
  job.job_id = "made-up";
  job.ranks = ranks;
  job.hosts = 1;
  job.now_ns = 1'790'000'000'000'000'000ull + static_cast<std::uint64_t>(windows) * 500'000'000;
  job.evidence.start_ns = 1'790'000'000'000'000'000ll;
  job.evidence.interval_s = 0.2;
  LatenessTable& lateness = job.evidence.lateness.emplace();
  lateness.window_s = 0.5;
  lateness.first_s = 0.0;
  lateness.last_s = windows * 0.5;
  for (int r = 0; r < ranks; ++r) {
    lateness.ranks.push_back(r);
    std::vector<std::optional<double>> row;
    for (int w = 0; w < windows; ++w) row.push_back(r == 7 ? 20.0 : 0.01 * (r % 3));
    lateness.ms.push_back(row);
  }
  return job;
}

ReportInputs sites_of(int windows) {
  ReportInputs inputs;
  inputs.bucket_s = 0.2;
  inputs.end_s = windows * 0.5;
  inputs.sites.push_back({"MPI_Allreduce from step(Model&, int)", {}});
  for (int b = 0; b < std::max(1, windows * 5 / 2); ++b) inputs.sites[0].share.push_back(0.5);
  return inputs;
}

}  // namespace

TEST(Report, AThousandRanksAreBinnedIntoRowsThatFit) {
  const std::string page = health_html(job_of(1000, 3), sites_of(3));
  const std::string heat = svg_of(page, "lateness-heatmap");
  ASSERT_FALSE(heat.empty());
  EXPECT_NE(heat.find("data-rows='200'"), std::string::npos);
  EXPECT_NE(heat.find("data-ranks-per-row='5'"), std::string::npos);
  EXPECT_EQ(occurrences(heat, "class='heat-cell'"), 200u * 3);
  EXPECT_NE(page.find("1,000 ranks do not fit: each row is 5 consecutive ranks"),
            std::string::npos);
  // The late rank's row (ranks 5-9) keeps its colour: a bin shows its latest rank.
  EXPECT_NE(heat.find("ranks 5-9, 0.00-0.50 s: 20.000 ms"), std::string::npos);
  // Lines of 1,000 ranks are a blur: the highest and the median rank stand for them.
  EXPECT_EQ(occurrences(svg_of(page, "lateness-chart"), "class='lateness-line'"), 2u);
}

TEST(Report, OneWindowIsDrawnAsPointsAndTwoAsLines) {
  const std::string one = svg_of(health_html(job_of(4, 1), sites_of(1)), "lateness-chart");
  EXPECT_EQ(occurrences(one, "class='point'"), 4u);
  EXPECT_EQ(occurrences(one, " L"), 0u);
  const std::string two = svg_of(health_html(job_of(4, 2), sites_of(2)), "lateness-chart");
  EXPECT_EQ(occurrences(two, "class='point'"), 8u);
  EXPECT_EQ(occurrences(two, "class='lateness-line' d='M"), 4u);
  EXPECT_EQ(occurrences(two, " L"), 4u);  // each rank's line joins its two windows
  // Both have a time axis in seconds and a value scale with more than the maximum.
  for (const std::string* chart : {&one, &two}) {
    EXPECT_NE(chart->find("time since the job's start (s)"), std::string::npos);
    EXPECT_GE(occurrences(*chart, "class='tick-label'"), 6u);
  }
}

TEST(Report, CallSitesAreDrawnWithTheirNamesEscaped) {
  ReportInputs inputs = sites_of(4);
  inputs.sites.push_back({"MPI_Send from f<int>(std::vector<int>&)", {0.1, -1, 0.2}});
  const std::string sites = svg_of(health_html(job_of(4, 4), inputs), "site-chart");
  EXPECT_EQ(occurrences(sites, "class='site-line'"), 2u);
  EXPECT_NE(sites.find("MPI_Send from f&lt;int&gt;(std::vector&lt;int&gt;&amp;)"),
            std::string::npos);
  // A window without rows breaks the line: the second site's line has two pieces.
  const auto second = sites.find("class='site-line'", sites.find("class='site-line'") + 1);
  ASSERT_NE(second, std::string::npos);
  const std::string path = sites.substr(second, sites.find("' fill=", second) - second);
  EXPECT_EQ(occurrences(path, "M"), 2u) << path;
  EXPECT_EQ(occurrences(path, "L"), 0u) << path;
}

TEST(Report, ThePageAllowsNoRequest) {
  const std::string page = health_html(job_of(4, 2), sites_of(2));
  EXPECT_NE(page.find("<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
                      "style-src 'unsafe-inline'; img-src data:\">"),
            std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http:"), std::string::npos);
  EXPECT_EQ(page.find("https:"), std::string::npos);
  EXPECT_EQ(page.find("src="), std::string::npos);
  EXPECT_EQ(page.find("href="), std::string::npos);
}

// The TCP matrix: a cell per directed pair with counts, its share of lost segments and data,
// the lossy one coloured darker than a clean one; none at all without tcp_links.
TEST(Report, TcpCountersAreDrawnAsAHostMatrix) {
  JobHealth job = job_of(2, 2);
  job.hosts = 2;
  job.evidence.hosts = {"h0", "h1"};
  EXPECT_EQ(svg_of(health_html(job, sites_of(2)), "link-tcp"), "");
  // from, to, segments, resent, lost, bytes
  job.evidence.tcp_links = {TcpLink{"h0", "h1", 4000, 25, 20, 5'000'000},
                            TcpLink{"h1", "h0", 4000, 3, 0, 7'000'000}};
  const std::string matrix = svg_of(health_html(job, sites_of(2)), "link-tcp");
  EXPECT_EQ(occurrences(matrix, "class='link-cell'"), 2u) << matrix;
  EXPECT_NE(matrix.find("0.50% lost"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("h0 -&gt; h1: 20 of 4000 segments lost (25 resent), 5.0 MB"),
            std::string::npos)
      << matrix;
  EXPECT_NE(matrix.find("0.00% lost"), std::string::npos) << matrix;
  EXPECT_NE(matrix.find("7.0 MB"), std::string::npos) << matrix;
}

// The report's call sites are summed file by file inside the analysis; the table must read as one
// query over the whole job reads it (the numbers formatted by SQLite, ties in its order). Three
// ranks share a call site and each has one of its own; two symbols demangle alike.
TEST(Report, CallSitesSummedPerFileReadAsOneQueryOverTheJob) {
  namespace monitor = commtap::monitor;
  TempDir dir;
  constexpr std::uint64_t kWall = 1'790'000'000'000'000'000ull;
  for (int r = 0; r < 3; ++r) {
    monitor::RankFacts facts;
    facts.job_id = "sums";
    facts.rank = r;
    facts.world_size = 3;
    facts.host = "h0";
    facts.start_ns = kWall;
    facts.ended_by = "finalize";
    std::vector<monitor::Snapshot> windows(6);
    for (std::size_t w = 0; w < windows.size(); ++w) {
      monitor::Snapshot& s = windows[w];
      s.function_names = {"MPI_Allreduce", "MPI_Send"};
      s.wall_ns = kWall + (w + 1) * 333'333'333ull;
      if (w == 0) {
        s.clock_estimates = {{1'000'000'000ull, {0, 0}}};
        monitor::CallSite shared{1,
                                 {{0x10, "app", r == 1 ? "_Z4stepi" : "step(int)", 0, "a.c", 7}}};
        monitor::CallSite own{2, {{0x20, "app", "rank_" + std::to_string(r), 0, "", 0}}};
        s.new_sites = {shared, own};
      }
      // Totals that round differently (1/3 us) and sites of equal time.
      s.aggregates = {
          {{0, 0, 1, 64}, 3, 1'000'000 + w * 333 + static_cast<std::uint64_t>(r), 1, 500'001},
          {{0, 1, 2, 8}, 1, 777'777, 777'777, 777'777},
          {{0, 1, 0, 0}, 0, 0, 0, 0}};
    }
    ASSERT_EQ(
        monitor::write_rank_database((dir.path() / ("rank-" + std::to_string(r) + ".db")).string(),
                                     facts, {}, windows),
        "");
  }
  JobHealth health;
  ReportInputs inputs;
  std::string error;
  ASSERT_TRUE(analyze_job(dir.path().string(), HealthOptions{}, health, error, &inputs)) << error;
  EXPECT_EQ(inputs.error, "");
  EXPECT_EQ(inputs.files.size(), 3u);
  auto job = JobDatabase::open(dir.path().string(), error);
  ASSERT_TRUE(job) << error;
  const auto whole = job->query(
      "SELECT a.function, coalesce(demangle(s.symbol), '?') AS caller, "
      "coalesce(s.file || ':' || s.line, '') AS source, a.size_class AS bytes_class, "
      "sum(a.calls) AS calls, round(sum(a.total_ns) / 1e6, 3) AS total_ms, "
      "round(sum(a.total_ns) / 1e3 / sum(a.calls), 1) AS mean_us, "
      "round(max(a.max_ns) / 1e3, 1) AS worst_us FROM aggregates a LEFT JOIN call_sites s "
      "ON s.rank = a.rank AND s.site = a.site AND s.frame = 0 "
      "GROUP BY 1, 2, 3, 4 ORDER BY sum(a.total_ns) DESC LIMIT 15",
      error);
  ASSERT_TRUE(whole) << error;
  EXPECT_EQ(inputs.slowest_sites.columns, whole->columns);
  EXPECT_EQ(inputs.slowest_sites.rows, whole->rows);
  ASSERT_EQ(inputs.slowest_sites.rows.size(), 5u);
  EXPECT_EQ(inputs.slowest_sites.rows[0][1], "step(int)");  // both spellings, one site
  EXPECT_EQ(inputs.slowest_sites.rows[0][4], "54");
  // One line per (function, caller): the shared site, the ranks' own of equal time by name, and
  // the unknown site that spent nothing.
  ASSERT_EQ(inputs.sites.size(), 5u);
  EXPECT_EQ(inputs.sites[0].label, "MPI_Allreduce from step(int)");
  EXPECT_EQ(inputs.sites[1].label, "MPI_Send from rank_0");
  EXPECT_EQ(inputs.sites[3].label, "MPI_Send from rank_2");
  EXPECT_EQ(inputs.sites[4].label, "MPI_Send from ?");
}
