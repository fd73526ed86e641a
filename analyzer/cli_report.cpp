// `commtap report`: the analysis as one self-contained HTML page.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/analyzer.hpp"
#include "analyzer/cli.hpp"
#include "analyzer/output_files.hpp"
#include "analyzer/statistics.hpp"
#include "analyzer/untrusted_input.hpp"

namespace commtap::analyzer::cli {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '<' ? "&lt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

// The slowest call sites over the whole job, from the aggregates, as an HTML table.
std::string slowest_sites(const JobDatabase& job, std::string& error) {
  auto result = job.query(
      "SELECT a.function, coalesce(demangle(s.symbol), '?') AS caller, "
      "coalesce(s.file || ':' || s.line, '') AS source, a.size_class AS bytes_class, "
      "sum(a.calls) AS calls, round(sum(a.total_ns) / 1e6, 3) AS total_ms, "
      "round(sum(a.total_ns) / 1e3 / sum(a.calls), 1) AS mean_us, "
      "round(max(a.max_ns) / 1e3, 1) AS worst_us FROM aggregates a LEFT JOIN call_sites s "
      "ON s.rank = a.rank AND s.site = a.site AND s.frame = 0 "
      "GROUP BY 1, 2, 3, 4 ORDER BY sum(a.total_ns) DESC LIMIT 15",
      error);
  if (!result || result->rows.empty()) return "<p>No aggregates.</p>";
  std::string table = "<table id='slowest-sites'><tr>";
  for (const std::string& c : result->columns) table += "<th>" + c + "</th>";
  table += "</tr>";
  for (const auto& row : result->rows) {
    table += "<tr>";
    for (const auto& cell : row) table += "<td>" + escape(cell.value_or("")) + "</td>";
    table += "</tr>";
  }
  return table + "</table>";
}

// The call sites (function and calling function) with the most MPI time, and their share of
// the ranks' time per window of the job's clock (COMMTAP_INTERVAL, wider in long jobs: at most
// kMostWindows). An aggregates row holds the calls completed since the rank's previous write (a
// heartbeat row at the same time), which is not always an interval (the first covers the time
// since MPI_Init, the last part of an interval): a row goes to the window that holds the middle
// of the time it covers, and a window's share divides by the time its rows cover.
constexpr std::size_t kSitesDrawn = 8;
constexpr double kMostWindows = 300;

void read_site_series(const JobDatabase& job, const JobHealth& health, ReportInputs& inputs,
                      std::string& error) {
  const auto start_ns = health.details.value("start_ns", std::int64_t{0});
  const double interval_s = std::max(0.01, health.details.value("interval_s", 1.0));
  const double length_s = static_cast<double>(health.now_ns - start_ns) / 1e9;
  inputs.bucket_s = interval_s * std::max(1.0, std::ceil(length_s / interval_s / kMostWindows));
  const std::string start = std::to_string(start_ns);
  const std::string bucket = std::to_string(std::llround(inputs.bucket_s * 1e9));
  auto result = job.query(
      "WITH w0 AS (SELECT h.rank, h.wall_ns, coalesce(lag(h.wall_ns) OVER (PARTITION BY h.rank "
      "ORDER BY h.wall_ns), r.start_ns) AS previous FROM heartbeats h JOIN ranks r USING (rank)), "
      "writes AS (SELECT rank, wall_ns, wall_ns - previous AS covered, max(0, (previous + "
      "(wall_ns - previous) / 2 - " +
          start + ") / " + bucket +
          ") AS bucket FROM w0) "
          "SELECT NULL, bucket, sum(covered), max(wall_ns) FROM writes GROUP BY 2 UNION ALL "
          "SELECT a.function || ' from ' || coalesce(demangle(s.symbol), '?'), w.bucket, "
          "sum(a.total_ns), 0 FROM aggregates a JOIN writes w ON w.rank = a.rank AND w.wall_ns = "
          "a.wall_ns LEFT JOIN call_sites s ON s.rank = a.rank AND s.site = a.site AND s.frame = 0 "
          "GROUP BY 1, 2",
      error);
  if (!result) return;
  std::map<std::size_t, double> covered;  // bucket -> ns of all ranks' time
  std::map<std::string, std::map<std::size_t, double>> busy;
  std::map<std::string, double> totals;
  std::size_t buckets = 0;
  for (const auto& row : result->rows) {
    if (!row[1] || !row[2] || !row[3]) continue;
    const auto b = static_cast<std::size_t>(std::stoll(*row[1]));
    const double ns = std::stod(*row[2]);
    buckets = std::max(buckets, b + 1);
    if (!row[0]) {
      covered[b] += ns;
      inputs.end_s =
          std::max(inputs.end_s, static_cast<double>(std::stoll(*row[3]) - start_ns) / 1e9);
      continue;
    }
    busy[*row[0]][b] += ns;
    totals[*row[0]] += ns;
  }
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [label, total] : totals) order.emplace_back(-total, label);
  std::sort(order.begin(), order.end());
  for (std::size_t i = 0; i < order.size() && i < kSitesDrawn; ++i) {
    CallSiteSeries series{order[i].second, {}};
    for (std::size_t b = 0; b < buckets; ++b) {
      const double time = covered.count(b) ? covered[b] : 0.0;
      series.share.push_back(time > 0 ? busy[order[i].second][b] / time : -1.0);
    }
    inputs.sites.push_back(std::move(series));
  }
}

}  // namespace

Subcommand add_report_command(CLI::App& app) {
  struct Options {
    HealthOptions health_options;
    std::string report_path, report_output = "report.html";
  };
  auto o = std::make_shared<Options>();
  CLI::App* report = app.add_subcommand(
      "report",
      "Write one self-contained HTML page: findings, link matrices, lateness per rank and "
      "window, call sites over time");
  add_health_options(report, o->health_options);
  report->add_option("job", o->report_path, "Job directory or database file")->required();
  report->add_option("-o,--output", o->report_output, "HTML file to write")->capture_default_str();
  return {report, [o]() -> int {
            auto& [health_options, report_path, report_output] = *o;
            JobHealth health;
            std::string error;
            if (!analyze_job(report_path, health_options, health, error)) {
              print_error(error);
              return kExitError;
            }
            for (const std::string& line : health.skipped) print_warning(line);
            ReportInputs inputs;
            inputs.slowest_sites_table = "<p>No aggregates.</p>";
            std::vector<std::string> inputs_read;
            {
              const Deadline deadline(job_time_limit(report_path, health_options.job_timeout_s));
              try {
                if (auto job = JobDatabase::open(report_path, error)) {
                  inputs_read = job->sources();
                  inputs.slowest_sites_table = slowest_sites(*job, error);
                  read_site_series(*job, health, inputs, error);
                }
              } catch (const std::exception& e) {  // the charts go; the findings stay
                print_warning(report_path + ": call sites left out of the report: " + e.what());
              }
            }
            const std::string html = health_html(health, inputs);
            auto out = OutputFile::create(report_output, mode_for_outputs_of(inputs_read), error);
            if (!out || !out->write(html.data(), html.size()) || !out->commit(error)) {
              print_error(error.empty() ? "cannot write " + report_output : error);
              return kExitError;
            }
            std::fprintf(stderr, "commtap: wrote %s (%s)\n", clean_text(report_output).c_str(),
                         count_text(health.findings.size(), "finding").c_str());
            return 0;
          }};
}

}  // namespace commtap::analyzer::cli
