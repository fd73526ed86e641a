// `commtap export`: a job in another tool's format. Perfetto / chrome://tracing JSON for now.
#include <cstdio>
#include <memory>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/store/output_files.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"
#include "cli/cli.hpp"
#include "render/export_perfetto.hpp"

namespace commtap::cli {

using namespace commtap::analyzer;
using namespace commtap::render;

Subcommand add_export_command(CLI::App& app) {
  struct Options {
    PerfettoOptions perfetto;
    std::string format = "perfetto", job_path, output = "trace.json";
  };
  auto o = std::make_shared<Options>();
  CLI::App* command = app.add_subcommand(
      "export", "Write a job as a timeline for ui.perfetto.dev and chrome://tracing");
  command->add_option("job", o->job_path, "Job directory or database file")->required();
  command->add_option("--format", o->format, "Output format (perfetto: Chrome trace-event JSON)")
      ->check(CLI::IsMember({"perfetto"}))
      ->capture_default_str();
  command->add_option("-o,--output", o->output, "File to write (- for stdout)")
      ->capture_default_str();
  command
      ->add_option("--since", o->perfetto.since_s,
                   "Keep what overlaps the timeline from this many seconds after the job's start")
      ->capture_default_str();
  command
      ->add_option("--until", o->perfetto.until_s,
                   "... up to this many seconds after the start (0: the end)")
      ->capture_default_str();
  command->add_option("--last", o->perfetto.last_s,
                      "Keep only the last this many seconds (instead of --since)");
  command
      ->add_option("--max-events", o->perfetto.max_events,
                   "At most about this many events: beyond it one collective instance, message "
                   "and heartbeat in k is kept, the same on every rank")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_flag_callback(
      "--no-findings", [o] { o->perfetto.findings = false; },
      "Leave out the analyzer's findings (found with its default thresholds)");
  add_input_options(command, o->perfetto.health.job_timeout_s, "--job-timeout",
                    "Seconds to read the job before giving up (0: 30 s and 2 s per MiB of its "
                    "files)");
  return {
      command, [o]() -> int {
        const bool to_stdout = o->output == "-";
        std::string error;
        std::vector<std::string> files;
        job_files(o->job_path, true, files, error);
        std::unique_ptr<OutputFile> file;
        if (!to_stdout) {
          file = OutputFile::create(o->output, mode_for_outputs_of(files), error);
          if (!file) {
            print_error(error);
            return kExitError;
          }
        }
        PerfettoStats stats;
        bool ok = false;
        {
          const Deadline deadline(job_time_limit(o->job_path, o->perfetto.health.job_timeout_s));
          try {
            ok = export_perfetto(o->job_path, o->perfetto, to_stdout ? stdout : file->stream(),
                                 stats, error);
          } catch (const std::exception& e) {
            error = o->job_path + ": cannot be exported: " + e.what();
          }
          if (!ok && Deadline::passed())
            error = o->job_path + ": not read within its time limit (--job-timeout): " + error;
        }
        if (!ok) {
          print_error(error);
          return kExitError;
        }
        if (to_stdout) {
          std::fflush(stdout);
        } else if (!file->commit(error)) {
          print_error(error);
          return kExitError;
        }
        std::string what = count_text(stats.slices, "slice") + ", " +
                           count_text(stats.flows, "message") + ", " +
                           count_text(stats.instants, "instant") + " on " +
                           count_text(static_cast<std::uint64_t>(stats.tracks), "track");
        if (stats.keep_one_in > 1) what += " (1 in " + with_commas(stats.keep_one_in) + " kept)";
        std::fprintf(stderr, "commtap: wrote %s: %s\n",
                     to_stdout ? "the trace" : clean_text(o->output).c_str(), what.c_str());
        return 0;
      }};
}

}  // namespace commtap::cli
