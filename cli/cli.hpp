// The `commtap` command's subcommands, one file each (cli_<name>.cpp). Each declares its options
// on the application and returns what runs it once the command line is parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
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

// The part of the job to look at (--since, --at), how to read it, and the detectors' thresholds
// (grouped last) as options of `command` (analyze and report share them).
void add_health_options(CLI::App* command, analyzer::HealthOptions& options);

// Options of every command that reads job directories: `--follow-symlinks` (see
// untrusted_input.hpp) and a time limit per job under the name `timeout_flag`, in `group`.
void add_input_options(CLI::App* command, double& timeout_s, const std::string& timeout_flag,
                       const std::string& timeout_help, const std::string& group = "Options");

// "commtap: <message>" (or "commtap: warning: ...") on stderr, with the message's control
// characters escaped and invalid UTF-8 replaced (it names files of untrusted directories).
void print_error(const std::string& message);
void print_warning(const std::string& message);

// JSON for stdout: indented, invalid UTF-8 replaced rather than thrown on.
std::string dump_json(const nlohmann::json& value);

// ---- Help for a terminal (cli_help.cpp) ----
// The width help is wrapped to: $COLUMNS or the terminal's, within 60..100.
std::size_t terminal_width();
// `text` as lines of at most `width` characters, each indented by `indent` spaces.
std::string wrap_text(const std::string& text, std::size_t width, std::size_t indent);
// A setting's description for an option's help: its first sentence, cut to about `limit`
// characters at a clause boundary; a flag's leading "1 " dropped ("1 turns on" -> "Turns on").
std::string summarize(const std::string& description, bool flag, std::size_t limit);
// The name in `names` nearest to a misspelt `word` ("analyse" -> "analyze"), or "" if none is
// near.
std::string nearest_name(const std::string& word, const std::vector<std::string>& names);

// CLI11's formatter with option descriptions wrapped to the terminal and, where given, a usage
// line of the command's own (`commtap run [OPTIONS] [--] <command>...`).
class HelpFormatter : public CLI::Formatter {
 public:
  HelpFormatter() { column_width(34); }
  explicit HelpFormatter(std::string usage_line) : usage_line_(std::move(usage_line)) {
    column_width(34);
  }
  std::string make_option_desc(const CLI::Option* option) const override;
  std::string make_usage(const CLI::App* app, std::string name) const override;
  std::string make_footer(const CLI::App* app) const override;
  std::string make_subcommand(const CLI::App* sub) const override;

 private:
  std::string usage_line_;
};

}  // namespace commtap::cli
