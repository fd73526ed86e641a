// `commtap report`: the analysis as one self-contained HTML page.
#include <cstdio>
#include <memory>

#include "analyzer/analyzer.hpp"
#include "analyzer/cli.hpp"

namespace commtap::analyzer::cli {

Subcommand add_report_command(CLI::App& app) {
  struct Options {
    HealthOptions health_options;
    std::string report_path, report_output = "report.html";
  };
  auto o = std::make_shared<Options>();
  CLI::App* report = app.add_subcommand(
      "report", "Write one self-contained HTML page with the link matrix, lateness and findings");
  add_health_options(report, o->health_options);
  report->add_option("job", o->report_path, "Job directory or database file")->required();
  report->add_option("-o,--output", o->report_output, "HTML file to write")->capture_default_str();
  return {
      report, [o]() -> int {
        auto& [health_options, report_path, report_output] = *o;
        JobHealth health;
        std::string error;
        if (!analyze_job(report_path, health_options, health, error)) {
          std::fprintf(stderr, "commtap: %s\n", error.c_str());
          return kExitError;
        }
        // The slowest call sites over the whole job, from the aggregates.
        std::string sites = "<p>No aggregates.</p>";
        if (auto job = JobDatabase::open(report_path, error)) {
          auto result = job->query(
              "SELECT a.function, coalesce(demangle(s.symbol), '?') AS caller, "
              "coalesce(s.file || ':' || s.line, '') AS source, a.size_class AS bytes_class, "
              "sum(a.calls) AS calls, round(sum(a.total_ns) / 1e6, 3) AS total_ms, "
              "round(sum(a.total_ns) / 1e3 / sum(a.calls), 1) AS mean_us, "
              "round(max(a.max_ns) / 1e3, 1) AS worst_us FROM aggregates a LEFT JOIN call_sites s "
              "ON s.rank = a.rank AND s.site = a.site AND s.frame = 0 "
              "GROUP BY 1, 2, 3, 4 ORDER BY sum(a.total_ns) DESC LIMIT 15",
              error);
          if (result && !result->rows.empty()) {
            sites = "<table><tr>";
            for (const std::string& c : result->columns) sites += "<th>" + c + "</th>";
            sites += "</tr>";
            for (const auto& row : result->rows) {
              sites += "<tr>";
              for (const auto& cell : row) {
                std::string text = cell.value_or("");
                std::string escaped;
                for (char c : text)
                  escaped += c == '<' ? "&lt;" : c == '&' ? "&amp;" : std::string(1, c);
                sites += "<td>" + escaped + "</td>";
              }
              sites += "</tr>";
            }
            sites += "</table>";
          }
        }
        const std::string temporary = report_output + ".tmp";
        FILE* out = std::fopen(temporary.c_str(), "w");
        const std::string html = health_html(health, sites);
        if (out == nullptr || std::fwrite(html.data(), 1, html.size(), out) != html.size() ||
            std::fclose(out) != 0 || std::rename(temporary.c_str(), report_output.c_str()) != 0) {
          std::fprintf(stderr, "commtap: cannot write %s\n", report_output.c_str());
          return kExitError;
        }
        std::fprintf(stderr, "commtap: wrote %s (%zu findings)\n", report_output.c_str(),
                     health.findings.size());
        return 0;
      }};
}

}  // namespace commtap::analyzer::cli
