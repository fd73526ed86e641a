// `commtap analyze`: findings with their evidence, for people, scripts and cron.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "analyzer/output_files.hpp"
#include "analyzer/untrusted_input.hpp"
#include "cli/cli.hpp"
#include "render/prometheus.hpp"
#include "render/text_json.hpp"

namespace commtap::cli {

using namespace commtap::analyzer;
using namespace commtap::render;

void add_health_options(CLI::App* command, HealthOptions& options) {
  // Which part of the job: in the command's main group.
  command
      ->add_option("--since", options.since_s,
                   "Look only at the last this many seconds of data (0: all)")
      ->capture_default_str();
  command
      ->add_option("--at", options.at_s,
                   "Analyze the job as it stood this many seconds after it started: what a cron "
                   "analysis saw then (0: now)")
      ->capture_default_str();
  // How the files are read: the findings are the same whatever these are.
  const std::string reading = "Reading the jobs";
  command
      ->add_option("--threads", options.threads,
                   "Threads that read a job's files (0: one per core); the findings are the same "
                   "whatever the number")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group(reading);
  command
      ->add_flag("--read-all", options.read_all,
                 "With --since, read every row and filter by time afterwards: the same "
                 "findings, slower (for comparisons)")
      ->group(reading);
  add_input_options(command, options.job_timeout_s, "--job-timeout",
                    "Seconds to read and analyze one job before it counts as unreadable (0: 30 s "
                    "and 2 s per MiB of its files)",
                    reading);
  // The detectors' thresholds, last: their defaults are what tests/unit/analyzer/evidence_test
  // checks against false alarms and misses.
  const std::string tuning = "Detector tuning (the defaults are tested for false alarms)";
  auto tune = [&](CLI::Option* option) { option->capture_default_str()->group(tuning); };
  tune(command->add_option("--hang-after", options.hang_after_s,
                           "Seconds in one collective before ranks count as stuck"));
  tune(command->add_option("--stale-after", options.stale_after_s,
                           "Seconds without a heartbeat before a rank counts as lost (0: three "
                           "COMMTAP_INTERVALs + 1 s)"));
  tune(command->add_option("--window", options.window_s, "Persistence window, seconds"));
  tune(command->add_option("--persistence", options.persistence,
                           "Fraction of windows a slow rank must be flagged in"));
  tune(command->add_option("--min-instances", options.min_instances,
                           "Aligned instances a window needs to count"));
  tune(command->add_option("--min-lateness-ms", options.min_lateness_ms,
                           "Slow rank: least median lateness"));
  tune(command->add_option("--lateness-factor", options.lateness_factor,
                           "Slow rank: median lateness over the ranks' lower quartile"));
  tune(command->add_option("--last-fraction", options.last_fraction,
                           "Slow rank: how often its host must be last to arrive"));
  tune(command->add_option("--false-alarm-rate", options.false_alarm_rate,
                           "Chance that a healthy job shows a finding's evidence, at most (an "
                           "error: 1000 times less)"));
  tune(command->add_option("--error-cost", options.error_cost_share,
                           "Slow rank or host: share of the job's time it costs for an error"));
  tune(command->add_option("--link-factor", options.link_factor,
                           "Slow link: median latency over the baseline"));
  tune(command->add_option("--min-link-delay-us", options.min_link_delay_us,
                           "Slow link: least excess latency"));
  tune(command->add_option("--degradation-factor", options.degradation_factor,
                           "Degradation: recent time per call over the job's baseline"));
  tune(command->add_option("--min-degradation-us", options.min_degradation_us,
                           "Degradation: least excess per call"));
  tune(command->add_option("--degradation-windows", options.degradation_windows,
                           "Degradation: latest windows that must all be slow"));
}

Subcommand add_analyze_command(CLI::App& app) {
  struct Options {
    HealthOptions health_options;
    std::vector<std::string> analyze_paths;
    bool analyze_json = false;
    std::string store, fail_on = "error", prometheus;
  };
  auto o = std::make_shared<Options>();
  CLI::App* analyze = app.add_subcommand(
      "analyze", "Find hung ranks, lost ranks, slow hosts and ranks, slow links and degradation");
  analyze
      ->add_option("jobs", o->analyze_paths,
                   "Job directories, database files, or directories of job directories")
      ->required();
  // The common options first (the main group lists them in this order), detector tuning last.
  analyze->add_flag("--json", o->analyze_json, "JSON output (schema in docs/analyzer.md)");
  add_health_options(analyze, o->health_options);
  analyze->add_option("--store", o->store,
                      "Record findings in this SQLite database (first/last seen, active)");
  analyze->add_option("--prometheus", o->prometheus,
                      "Also write the findings and per-job figures here in Prometheus' text "
                      "format, atomically (for node_exporter's textfile collector)");
  analyze
      ->add_option("--fail-on", o->fail_on,
                   "Exit 1 when a finding is at least this severe (info, warning, error, "
                   "critical)")
      ->capture_default_str();
  analyze->footer(
      "Exit status: 0 healthy (no finding at or above --fail-on), 1 findings, 2 error (bad "
      "options, an unreadable job, an output not written); a finding wins over an error.\n"
      "Example: commtap analyze traces/run1 --since 600 --fail-on warning");
  return {analyze, [o]() -> int {
            auto& [health_options, analyze_paths, analyze_json, store, fail_on, prometheus] = *o;
            using Clock = std::chrono::steady_clock;
            const auto run_start = Clock::now();
            Severity threshold = Severity::error;
            if (!parse_severity(fail_on, threshold)) {
              std::fprintf(stderr,
                           "commtap analyze: --fail-on %s: expected info, warning, error or "
                           "critical\n",
                           fail_on.c_str());
              return kExitError;
            }
            // Each job is analyzed alone (analyze_job): an unreadable, hostile or slow one costs
            // its own line and metric, and every other job is still printed, stored and alerted on.
            std::vector<UnreadableInput> unreadable;
            const std::vector<std::string> jobs = find_jobs(analyze_paths, unreadable);
            std::vector<JobHealth> results;
            std::vector<double> seconds;
            for (const std::string& path : jobs) {
              JobHealth health;
              std::string error;
              const auto job_start = Clock::now();
              if (analyze_job(path, health_options, health, error)) {
                for (const std::string& line : health.skipped) print_warning(line);
                results.push_back(std::move(health));
                seconds.push_back(std::chrono::duration<double>(Clock::now() - job_start).count());
              } else {
                unreadable.push_back({clean_text(path), clean_text(error)});
              }
            }
            for (const UnreadableInput& input : unreadable)
              print_error(input.why.rfind(input.path, 0) == 0 ? input.why
                                                              : input.path + ": " + input.why);
            bool output_failed = false;
            if (!store.empty()) weigh_against_other_jobs(store, results);
            std::cout << (analyze_json ? dump_json(health_json(results, unreadable))
                                       : health_text(results));
            std::cout.flush();
            if (!store.empty()) {
              std::string error;
              if (!store_findings(store, results, error)) {
                print_error("cannot store findings: " + error);
                output_failed = true;
              }
            }
            if (!prometheus.empty()) {
              AnalysisRun run;
              for (const UnreadableInput& input : unreadable) run.unreadable.push_back(input.path);
              run.seconds = std::chrono::duration<double>(Clock::now() - run_start).count();
              run.finished_unix_s =
                  std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                      .count();
              run.jobs = results;
              run.analysis_seconds = seconds;
              std::string error;
              if (!write_file_atomically(prometheus, prometheus_text(run), kPrometheusFileMode,
                                         error)) {
                print_error(error);
                output_failed = true;
              }
            }
            // A finding is never hidden behind another job's bad input: exit 1 wins over 2.
            for (const JobHealth& job : results)
              for (const Finding& f : job.findings)
                if (f.severity >= threshold) return 1;
            return unreadable.empty() && !output_failed ? 0 : kExitError;
          }};
}

}  // namespace commtap::cli
