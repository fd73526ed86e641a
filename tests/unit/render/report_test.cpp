// commtap report's page for analyses made up here, at sizes the real-job test (mpi.report)
// does not reach: the heat map of 1,000 ranks is binned into rows that fit, a job of one window
// is drawn as points and one of two as lines, and the page forbids every request.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "render/report_html.hpp"

using commtap::analyzer::JobHealth;
using commtap::analyzer::LatenessTable;
using commtap::analyzer::ReportInputs;
using commtap::analyzer::TcpLink;
using commtap::render::health_html;

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
