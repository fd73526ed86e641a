// The `commtap` command's subcommands, one file each (cli_<name>.cpp). Each declares its options
// on the application and returns what runs it once the command line is parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "analyzer/health.hpp"

namespace commtap::cli {

inline constexpr int kExitError = 2;

struct Subcommand {
  CLI::App* command;
  std::function<int()> run;  // after parsing, if `command` was given: the exit status
};

// run, calibrate and settings: they look at the command line before CLI11 does (--library
// names the library whose settings become run's flags; everything after -- is the launcher
// command, removed from argc).
std::vector<Subcommand> add_launch_commands(CLI::App& app, int& argc, char** argv);
Subcommand add_query_command(CLI::App& app);
Subcommand add_merge_command(CLI::App& app);
Subcommand add_analyze_command(CLI::App& app);
Subcommand add_report_command(CLI::App& app);
Subcommand add_export_command(CLI::App& app);

// The detectors' thresholds as options of `command` (analyze and report share them).
void add_health_options(CLI::App* command, analyzer::HealthOptions& options);

// Options of every command that reads job directories: `--follow-symlinks` (see
// untrusted_input.hpp) and a time limit per job under the name `timeout_flag`.
void add_input_options(CLI::App* command, double& timeout_s, const std::string& timeout_flag,
                       const std::string& timeout_help);

// "commtap: <message>" (or "commtap: warning: ...") on stderr, with the message's control
// characters escaped and invalid UTF-8 replaced (it names files of untrusted directories).
void print_error(const std::string& message);
void print_warning(const std::string& message);

// JSON for stdout: indented, invalid UTF-8 replaced rather than thrown on.
std::string dump_json(const nlohmann::json& value);

}  // namespace commtap::cli
