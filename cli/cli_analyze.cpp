// `commtap analyze`: findings with their evidence, for people, scripts and cron.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "analyzer/store/findings_store.hpp"
#include "analyzer/store/output_files.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"
#include "cli/cli.hpp"
#include "render/prometheus.hpp"
#include "render/text_json.hpp"

extern char** environ;

namespace commtap::cli {

using namespace commtap::analyzer;
using namespace commtap::render;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The order jobs are analyzed in: their owners take turns (the first job of each owner, then the
// second of each, ...; owners in the order their first jobs were found), each owner's jobs in the
// order found, so that under a run's deadline no user's many or slow jobs can keep another
// user's job from its turn.
std::vector<std::size_t> turns_by_owner(const std::vector<std::string>& jobs) {
  std::vector<std::pair<uid_t, std::vector<std::size_t>>> by_owner;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    struct stat info {};
    const uid_t owner = ::lstat(jobs[i].c_str(), &info) == 0 ? info.st_uid : static_cast<uid_t>(-1);
    auto found = std::find_if(by_owner.begin(), by_owner.end(),
                              [&](const auto& entry) { return entry.first == owner; });
    if (found == by_owner.end()) found = by_owner.insert(by_owner.end(), {owner, {}});
    found->second.push_back(i);
  }
  std::vector<std::size_t> order;
  for (std::size_t turn = 0; order.size() < jobs.size(); ++turn)
    for (const auto& [owner, indexes] : by_owner)
      if (turn < indexes.size()) order.push_back(indexes[turn]);
  return order;
}

// Runs `command` with `sh -c`, `input` on its stdin and its stdout and stderr on ours (stderr:
// commtap-cron's log), for at most `limit_s` seconds. Empty if it ran and exited 0, else why not.
std::string run_alert(const std::string& command, const std::string& input, double limit_s) {
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0)
    return std::string("cannot make a pipe: ") + std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);  // not the report
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, "/bin/sh", &actions, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  if (spawned != 0) {
    ::close(in[1]);
    return std::string("cannot start /bin/sh: ") + std::strerror(spawned);
  }
  // A command that does not read its input must not stop the run (no SIGPIPE: EPIPE instead).
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  for (std::size_t done = 0; done < input.size();) {
    const ssize_t n = ::write(in[1], input.data() + done, input.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(in[1]);
  ::sigaction(SIGPIPE, &previous, nullptr);
  const auto start = Clock::now();
  int status = 0;
  pid_t waited;
  while ((waited = ::waitpid(pid, &status, WNOHANG)) == 0 && seconds_since(start) < limit_s)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (waited == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return "still running after " + std::to_string(static_cast<int>(limit_s)) + " s, killed";
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                           : "killed by signal " + std::to_string(WTERMSIG(status));
}

}  // namespace

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
    std::string store, fail_on = "error", prometheus, alert;
    double deadline_s = 0, job_floor_s = 2;
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
  const std::string reading = "Reading the jobs";
  analyze
      ->add_option("--deadline", o->deadline_s,
                   "Seconds the whole run over all jobs may take (0: no limit): each job gets "
                   "its share of the time left, owners' jobs take turns, and jobs whose turn "
                   "comes too late are named unreadable")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->group(reading);
  analyze
      ->add_option("--job-floor", o->job_floor_s,
                   "With --deadline: the least seconds a job's share may be; no job starts "
                   "with less than this left")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->group(reading);
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
  analyze->add_option("--alert", o->alert,
                      "Run this with `sh -c` as soon as a job has a finding at --fail-on or "
                      "above, that job's JSON report on its stdin (its output goes to stderr)");
  analyze->footer(
      "Exit status: 0 healthy (no finding at or above --fail-on), 1 findings, 2 error (bad "
      "options, an unreadable job, an output not written); a finding wins over an error.\n"
      "Example: commtap analyze traces/run1 --since 600 --fail-on warning");
  return {
      analyze, [o]() -> int {
        auto& [health_options, analyze_paths, analyze_json, store, fail_on, prometheus, alert,
               deadline_s, job_floor_s] = *o;
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
        // Analyzed in turns by owner, within one deadline for the run; printed in the order
        // found. A file reached from several jobs (hard links) is read for the first only.
        struct Done {
          std::size_t index;
          JobHealth health;
          double seconds;
        };
        std::vector<Done> done;
        std::map<std::pair<dev_t, ino_t>, std::string> read_by;
        const std::vector<std::size_t> order = turns_by_owner(jobs);
        auto format_seconds = [](double seconds) {
          char text[32];
          std::snprintf(text, sizeof text, "%.0f", seconds);
          return std::string(text);
        };
        for (std::size_t turn = 0; turn < order.size(); ++turn) {
          const std::string& path = jobs[order[turn]];
          HealthOptions options = health_options;
          if (deadline_s > 0) {
            const double left = deadline_s - seconds_since(run_start);
            if (left < job_floor_s) {
              const std::size_t skipped = order.size() - turn;
              print_error("the run's deadline (--deadline " + format_seconds(deadline_s) +
                          " s) came before " + std::to_string(skipped) +
                          " job(s) had their turn; they are named unreadable");
              for (; turn < order.size(); ++turn)
                unreadable.push_back({clean_text(jobs[order[turn]]),
                                      "not analyzed: the run's deadline (--deadline " +
                                          format_seconds(deadline_s) + " s) came before its turn"});
              break;
            }
            const double jobs_left = static_cast<double>(order.size() - turn);
            options.run_share_s = std::min(left, std::max(job_floor_s, left / jobs_left));
          }
          std::vector<std::string> files;
          std::string error;
          if (job_files(path, true, files, error)) {
            std::vector<std::pair<dev_t, ino_t>> ids;
            for (const std::string& file : files) {
              const InputFile in = check_input_file(file);
              if (!in.why_not.empty()) continue;  // analyze_job says why
              const auto id = std::make_pair(in.device, in.inode);
              if (const auto found = read_by.find(id); found != read_by.end()) {
                error = file + " is the same file as one of " + found->second +
                        " (a hard link): each file is read once per run";
                break;
              }
              ids.push_back(id);
            }
            if (!error.empty()) {
              unreadable.push_back({clean_text(path), clean_text(error)});
              continue;
            }
            for (const auto& id : ids) read_by.emplace(id, path);
          }
          JobHealth health;
          error.clear();
          const auto job_start = Clock::now();
          if (!analyze_job(path, options, health, error)) {
            unreadable.push_back({clean_text(path), clean_text(error)});
            continue;
          }
          for (const std::string& line : health.skipped) print_warning(line);
          const double seconds = seconds_since(job_start);
          if (!store.empty()) {
            std::vector<JobHealth> one(1);
            one[0] = std::move(health);
            weigh_against_other_jobs(store, one);
            health = std::move(one[0]);
          }
          // The alert goes as soon as this job's finding is known, not after the slowest job.
          const bool alarming =
              std::any_of(health.findings.begin(), health.findings.end(),
                          [&](const Finding& f) { return f.severity >= threshold; });
          done.push_back({order[turn], std::move(health), seconds});
          if (alarming && !alert.empty()) {
            const std::string why =
                run_alert(alert, dump_json(health_json({done.back().health}, {})), 60);
            if (!why.empty())
              print_error("the alert command '" + alert + "' failed (" + why + ") for " +
                          done.back().health.path);
          }
        }
        std::sort(done.begin(), done.end(),
                  [](const Done& a, const Done& b) { return a.index < b.index; });
        std::vector<JobHealth> results;
        std::vector<double> seconds;
        for (Done& d : done) {
          results.push_back(std::move(d.health));
          seconds.push_back(d.seconds);
        }
        for (const UnreadableInput& input : unreadable)
          print_error(input.why.rfind(input.path, 0) == 0 ? input.why
                                                          : input.path + ": " + input.why);
        bool output_failed = false;
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
