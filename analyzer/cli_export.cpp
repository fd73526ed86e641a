// `commtap export`: a job in another tool's format. Perfetto / chrome://tracing JSON for now.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "analyzer/cli.hpp"
#include "analyzer/export_perfetto.hpp"
#include "analyzer/statistics.hpp"

namespace commtap::analyzer::cli {

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
  command->add_flag("!--no-findings", o->perfetto.findings,
                    "Leave out the analyzer's findings (found with its default thresholds)");
  return {command, [o]() -> int {
            const bool to_stdout = o->output == "-";
            const std::string temporary = o->output + ".tmp." + std::to_string(::getpid());
            std::FILE* out = to_stdout ? stdout : std::fopen(temporary.c_str(), "w");
            if (out == nullptr) {
              std::fprintf(stderr, "commtap: cannot write %s\n", temporary.c_str());
              return kExitError;
            }
            PerfettoStats stats;
            std::string error;
            const bool ok = export_perfetto(o->job_path, o->perfetto, out, stats, error);
            if (to_stdout) {
              std::fflush(stdout);
            } else if (std::fclose(out) != 0 || !ok ||
                       std::rename(temporary.c_str(), o->output.c_str()) != 0) {
              std::remove(temporary.c_str());
              std::fprintf(stderr, "commtap: %s\n",
                           ok ? ("cannot write " + o->output).c_str() : error.c_str());
              return kExitError;
            }
            if (!ok) {
              std::fprintf(stderr, "commtap: %s\n", error.c_str());
              return kExitError;
            }
            std::string what = count_text(stats.slices, "slice") + ", " +
                               count_text(stats.flows, "message") + ", " +
                               count_text(stats.instants, "instant") + " on " +
                               count_text(static_cast<std::uint64_t>(stats.tracks), "track");
            if (stats.keep_one_in > 1)
              what += " (1 in " + with_commas(stats.keep_one_in) + " kept)";
            std::fprintf(stderr, "commtap: wrote %s: %s\n",
                         to_stdout ? "the trace" : o->output.c_str(), what.c_str());
            return 0;
          }};
}

}  // namespace commtap::analyzer::cli
