// The `commtap` command: run a job preloaded, calibrate, list the settings, query and merge trace
// databases, analyze their health, report it and export it to other tools. Each subcommand lives
// in cli_<name>.cpp.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "analyzer/trace/file_rows.hpp"
#include "cli/cli.hpp"
#include "cli/launch.hpp"

namespace cli = commtap::cli;

int main(int argc, char** argv) {
  CLI::App app{"commtap: preload MPI/NCCL jobs, record what they do, and query the trace"};
  // Set before the subcommands are added: they take their parent's formatter.
  app.formatter(std::make_shared<cli::HelpFormatter>());
  app.require_subcommand(1);
  app.set_version_flag("--version", "commtap 0.1.0");
  app.footer(
      "Run `commtap <command> --help` for a command's options; `commtap settings` lists the "
      "COMMTAP_* settings.");
  std::vector<cli::Subcommand> commands = cli::add_launch_commands(app, argc, argv);
  for (auto add : {cli::add_query_command, cli::add_merge_command, cli::add_analyze_command,
                   cli::add_report_command, cli::add_export_command})
    commands.push_back(add(app));
  // A word where the command belongs that names none ("analyse", "qeury"): say which was meant
  // rather than CLI11's "A subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
    const std::string word = argv[1];
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      const std::string near = cli::nearest_name(word, names);
      std::string all;
      for (const std::string& name : names) all += (all.empty() ? "" : ", ") + name;
      if (!near.empty())
        std::fprintf(stderr, "commtap: unknown command '%s': did you mean %s?\n", word.c_str(),
                     near.c_str());
      else
        std::fprintf(stderr, "commtap: unknown command '%s' (commands: %s)\n", word.c_str(),
                     all.c_str());
      std::fprintf(stderr, "Run commtap --help for more information.\n");
      return cli::kExitError;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : cli::kExitError;
  }
  for (const cli::Subcommand& c : commands)
    if (*c.command) {
      // Reading threads do better without SQLite's memory statistics; `query` keeps them, for
      // its memory limit (analyzer/trace/file_rows.hpp).
      if (c.command->get_name() != "query" && c.command->get_name() != "merge")
        commtap::analyzer::without_memory_statistics();
      return c.run();
    }
  return 0;
}
