// `commtap report`: the analysis as one self-contained HTML page.
#include <cstdio>
#include <memory>
#include <string>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/query/job_database.hpp"
#include "analyzer/store/output_files.hpp"
#include "analyzer/trace/report_inputs.hpp"
#include "analyzer/trace/untrusted_input.hpp"
#include "cli/cli.hpp"
#include "render/report_html.hpp"

namespace commtap::cli {

using namespace commtap::analyzer;
using namespace commtap::render;

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
  report->add_option("job", o->report_path, "Job directory or database file")->required();
  report->add_option("-o,--output", o->report_output, "HTML file to write")->capture_default_str();
  add_health_options(report, o->health_options);
  return {report, [o]() -> int {
            auto& [health_options, report_path, report_output] = *o;
            JobHealth health;
            ReportInputs inputs;
            std::string error;
            if (!analyze_job(report_path, health_options, health, error, &inputs)) {
              print_error(error);
              return kExitError;
            }
            for (const std::string& line : health.skipped) print_warning(line);
            if (!inputs.error.empty())  // the charts go; the findings stay
              print_warning(health.path + ": call sites left out of the report: " + inputs.error);
            const std::string html = health_html(health, inputs);
            auto out = OutputFile::create(report_output, mode_for_outputs_of(inputs.files), error);
            if (!out || !out->write(html.data(), html.size()) || !out->commit(error)) {
              print_error(error.empty() ? "cannot write " + report_output : error);
              return kExitError;
            }
            std::fprintf(stderr, "commtap: wrote %s (%s)\n", clean_text(report_output).c_str(),
                         count_text(health.findings.size(), "finding").c_str());
            return 0;
          }};
}

}  // namespace commtap::cli
