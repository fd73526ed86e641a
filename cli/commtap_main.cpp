// The `commtap` command: run a job preloaded, calibrate, list the settings, query and merge trace
// databases, analyze their health, report it and export it to other tools. Each subcommand lives
// in cli_<name>.cpp.
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli/launch.hpp"

namespace cli = commtap::cli;

int main(int argc, char** argv) {
  CLI::App app{"commtap: preload MPI/NCCL jobs, record what they do, and query the trace"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "commtap 0.1.0");
  std::vector<cli::Subcommand> commands = cli::add_launch_commands(app, argc, argv);
  for (auto add : {cli::add_query_command, cli::add_merge_command, cli::add_analyze_command,
                   cli::add_report_command, cli::add_export_command})
    commands.push_back(add(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : cli::kExitError;
  }
  for (const cli::Subcommand& c : commands)
    if (*c.command) return c.run();
  return 0;
}
