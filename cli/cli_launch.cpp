// `commtap run`, `commtap calibrate` and `commtap settings`: the subcommands that start the
// library or a launcher. They share one look at the command line before CLI11's: `--library`
// names the libcommtap.so whose settings become run's flags (and that settings describes), and
// everything after `--` is the launcher command.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "cli/launch.hpp"
#include "monitor/trace_schema.hpp"
#include "settings/settings.hpp"

namespace commtap::cli {

using namespace commtap::analyzer;

namespace fs = std::filesystem;

namespace {

// Settings as the library describes them.
struct Setting {
  std::string variable, field, kind, default_text, description;
  long min = 0, max = 0;
  // `commtap run` sets a flag to 1 by naming it; "auto", a flag's default where it has one, is
  // left by not naming it.
  bool is_flag() const { return kind == "flag" || kind == "flag or auto"; }
  std::string flag() const {
    std::string name = field;
    std::replace(name.begin(), name.end(), '_', '-');
    return "--" + name;
  }
};

// Every module's settings, from the table this command is linked with (settings/all.def): no
// library needs to be loaded to learn them.
std::vector<Setting> load_settings() {
  std::vector<Setting> settings;
  for (const SettingSpec& spec : setting_specs()) {
    Setting s{spec.variable, spec.field, "", spec.default_text, spec.description};
    s.kind = spec.kind == SettingKind::flag           ? "flag"
             : spec.kind == SettingKind::flag_or_auto ? "flag or auto"
             : spec.kind == SettingKind::integer      ? "integer"
                                                      : "text";
    if (spec.kind == SettingKind::integer) {
      s.min = spec.min;
      s.max = spec.max;
    }
    settings.push_back(std::move(s));
  }
  return settings;
}

std::string require_library(const std::string& explicit_path) {
  const std::string library = find_library(explicit_path);
  if (library.empty()) {
    std::fprintf(stderr,
                 "commtap: cannot find libcommtap.so (give --library PATH or set "
                 "COMMTAP_LIBRARY)\n");
    std::exit(kExitError);
  }
  return library;
}

// The job id the library will use, so that `commtap run` can say where the trace went; passed on
// explicitly so that the library cannot choose another.
std::string choose_job_id(std::map<std::string, std::string>& variables) {
  std::string explicit_id;
  if (auto it = variables.find("COMMTAP_JOB_ID"); it != variables.end())
    explicit_id = it->second;
  else if (const char* value = std::getenv("COMMTAP_JOB_ID"))
    explicit_id = value;
  const std::string id = monitor::choose_job_id(explicit_id);
  variables["COMMTAP_JOB_ID"] = id;
  return id;
}

// After `commtap run`: where the trace went, or that no rank of this run recorded anything (a
// program that never called MPI_Init nor made an NCCL communicator, COMMTAP_DISABLE=1, or a
// directory no rank could write). Files older than the run are someone else's.
void report_rank_files(const std::string& directory, fs::file_time_type started) {
  std::error_code ec;
  std::size_t files = 0;
  if (fs::is_directory(directory, ec))
    for (const auto& entry : fs::directory_iterator(directory, ec)) {
      const auto written = fs::last_write_time(entry.path(), ec);
      files += entry.path().extension() == ".db" && !ec && written >= started ? 1 : 0;
    }
  if (files > 0) {
    std::fprintf(stderr, "commtap: trace database: %s (%zu rank files)\n", directory.c_str(),
                 files);
    return;
  }
  std::fprintf(stderr,
               "commtap: no rank recorded anything into %s: the program made no MPI_Init and no "
               "NCCL communicator under commtap (or COMMTAP_DISABLE was set, or the directory "
               "could not be written, or the loader did not preload the library on the nodes, "
               "saying \"cannot be preloaded\": see the messages above)\n",
               directory.c_str());
}

// `commtap settings [NAME...] [--full]`: each setting's variable, flag, kind and default, then its
// description wrapped to the terminal: the first sentence, or all of it for the named settings
// (COMMTAP_SAMPLE, SAMPLE, sample or --sample) and with --full.
int print_settings(const std::vector<Setting>& settings, const std::vector<std::string>& names,
                   bool full) {
  auto normal = [](std::string name) {
    if (name.rfind("--", 0) == 0) name = name.substr(2);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) {
      return c == '-' ? '_' : static_cast<char>(std::toupper(c));
    });
    return name.rfind("COMMTAP_", 0) == 0 ? name : "COMMTAP_" + name;
  };
  std::vector<const Setting*> chosen;
  int status = 0;
  for (const std::string& name : names) {
    auto it = std::find_if(settings.begin(), settings.end(),
                           [&](const Setting& s) { return s.variable == normal(name); });
    if (it != settings.end()) {
      chosen.push_back(&*it);
      continue;
    }
    std::vector<std::string> variables;
    for (const Setting& s : settings) variables.push_back(s.variable);
    const std::string near = nearest_name(normal(name), variables);
    std::fprintf(stderr, "commtap settings: no setting %s%s%s\n", name.c_str(),
                 near.empty() ? "" : ": did you mean ", near.empty() ? "" : near.c_str());
    status = kExitError;
  }
  if (names.empty())
    for (const Setting& s : settings) chosen.push_back(&s);
  const std::size_t width = terminal_width();
  for (const Setting* s : chosen) {
    std::cout << s->variable << "  (" << s->flag() << ", " << s->kind;
    if (s->kind == "integer") std::cout << " " << s->min << ".." << s->max;
    std::cout << ", default " << (s->default_text.empty() ? "empty" : s->default_text) << ")\n"
              << wrap_text(full || !names.empty() ? s->description
                                                  : summarize(s->description, false, 2 * width),
                           width, 4)
              << "\n";
  }
  if (names.empty() && !full)
    std::cout << "\nThe whole descriptions: commtap settings NAME, commtap settings --full, or "
                 "docs/settings.md.\n";
  return status;
}

// What the three subcommands share: options given on the command line, and the settings.
struct LaunchState {
  std::string library_path;
  std::vector<Setting> settings;
  std::map<std::string, std::string> flag_values;
  std::vector<std::string> command_after_dashes;
  bool settings_as_json = false, settings_as_markdown = false, settings_full = false;
  std::vector<std::string> settings_names;
  std::string model_output = "commtap-model.json";
  long long choices_up_to = 4 << 20;
  int choice_rounds = 5;
  bool calibrate_yield = false;
};

}  // namespace

std::vector<Subcommand> add_launch_commands(CLI::App& app, int& argc, char** argv) {
  auto state = std::make_shared<LaunchState>();
  // ---- run ----
  CLI::App* run = app.add_subcommand(
      "run", "Run a launcher command (e.g. mpiexec -n 4 ./app) with libcommtap.so preloaded");
  run->formatter(std::make_shared<HelpFormatter>("commtap run [OPTIONS] [--] <command>..."));
  run->add_option("--library", state->library_path,
                  "libcommtap.so to preload (default: $COMMTAP_LIBRARY, else the one installed "
                  "with this commtap)");
  // Everything from the first word that is not a commtap option (or after --) is the command.
  run->prefix_command();
  run->footer(
      "Each option sets the COMMTAP_* variable named after it for the job (unset: the default "
      "or the environment's); `commtap settings NAME` prints a setting's whole description.\n"
      "Example: commtap run --dir traces/run1 -- mpiexec -n 4 ./app");
  // ---- calibrate ----
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "Measure the all-reduce cost model on the machines a launcher command runs on (e.g. "
      "mpiexec -n 4 -ppn 2 -hosts a,b) and write it for COMMTAP_MODEL");
  calibrate->add_option("-o,--output", state->model_output, "Model file to write")
      ->capture_default_str();
  calibrate
      ->add_option("--choices-up-to", state->choices_up_to,
                   "Also time the library's all-reduce against each of commtap's from 8 B up to "
                   "this many bytes (x4) and store the measured choices; 0: the formulas only")
      ->capture_default_str()
      ->check(CLI::Range(0LL, 1LL << 31));
  calibrate->add_option("--rounds", state->choice_rounds, "Interleaved rounds per measured size")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  calibrate->add_flag("--yield", state->calibrate_yield,
                      "Measure in yield mode, as jobs run with COMMTAP_YIELD=1 (oversubscribed)");
  calibrate->prefix_command();
  calibrate->formatter(
      std::make_shared<HelpFormatter>("commtap calibrate [OPTIONS] [--] <launcher command>..."));
  const bool wants_run =
      argc > 1 && (std::string(argv[1]) == "run" || std::string(argv[1]) == "calibrate");
  state->settings = load_settings();
  for (const Setting& setting : state->settings) {
    // Two lines of help each: the description's first sentence and the variable; the whole
    // description is `commtap settings NAME`'s.
    const std::size_t room = std::max<std::size_t>(50, 112 - setting.variable.size());
    const std::string help =
        summarize(setting.description, setting.is_flag(), room) + " (" + setting.variable + ")";
    CLI::Option* option = nullptr;
    if (setting.is_flag()) {
      option = run->add_flag_callback(
          setting.flag(),
          [state, variable = setting.variable] { state->flag_values[variable] = "1"; }, help);
    } else {
      option = run->add_option_function<std::string>(
          setting.flag(),
          [state, variable = setting.variable](const std::string& value) {
            state->flag_values[variable] = value;
          },
          help);
      option->type_name(setting.kind == "integer" ? "N" : "TEXT");
      // The range in the error, not in the help's option column.
      if (setting.kind == "integer")
        option->check(CLI::Validator(
            [min = setting.min, max = setting.max](std::string& value) -> std::string {
              char* end = nullptr;
              errno = 0;
              const long long n = std::strtoll(value.c_str(), &end, 10);
              if (value.empty() || *end != '\0' || errno != 0 || n < min || n > max)
                return "expected an integer in " + std::to_string(min) + ".." + std::to_string(max);
              return "";
            },
            ""));
    }
    // commtap's own tests' settings work as flags but are not listed.
    if (setting.field.rfind("test_", 0) == 0) option->group("");
  }

  // ---- settings ----
  CLI::App* settings_command =
      app.add_subcommand("settings", "List the COMMTAP_* settings the library understands");
  settings_command->add_option(
      "names", state->settings_names,
      "Settings to describe in full, as COMMTAP_X, X or --x (default: all, in short)");
  settings_command->add_flag("--full", state->settings_full, "Every setting's whole description");
  settings_command->add_flag("--json", state->settings_as_json, "As JSON");
  settings_command->add_flag("--markdown", state->settings_as_markdown, "As a Markdown table");

  // `commtap run [settings] -- command...`: the command is split off here, before CLI11 sees it
  // (without --, prefix_command() takes everything from the first non-option word).
  if (wants_run) {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) != "--") continue;
      state->command_after_dashes.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }

  return {
      {run,
       [state, run]() -> int {
         std::vector<std::string> command = run->remaining();
         command.insert(command.end(), state->command_after_dashes.begin(),
                        state->command_after_dashes.end());
         if (command.empty()) {
           std::fprintf(stderr,
                        "commtap run: no command given (commtap run [settings] -- mpiexec ...)\n");
           return kExitError;
         }
         const std::string library = require_library(state->library_path);
         const std::string job_id = choose_job_id(state->flag_values);
         // Less a second: file times come from a coarser clock than now().
         const auto started = fs::file_time_type::clock::now() - std::chrono::seconds(1);
         // NCCL loads the same library as its profiler plugin (kernel times, per-peer
         // transfers); a plugin the user chose, or "none", is left alone.
         if (const char* plugin = std::getenv("NCCL_PROFILER_PLUGIN"); !plugin || !*plugin)
           state->flag_values.try_emplace("NCCL_PROFILER_PLUGIN", library);
         // Said before the job starts. A preload that would stop the program from starting
         // is dropped: the job runs, unrecorded, rather than not at all.
         std::string preload = library;
         const PreloadCheck check = check_preload(library, command);
         switch (check.outcome) {
           case PreloadCheck::Outcome::loads:
             break;
           case PreloadCheck::Outcome::ignored:
             std::fprintf(stderr,
                          "commtap run: the dynamic loader will not preload %s into %s, so "
                          "nothing of it is recorded (it runs as it would without commtap): %s\n",
                          library.c_str(), check.program.c_str(), check.said.c_str());
             break;
           case PreloadCheck::Outcome::fatal:
             std::fprintf(stderr,
                          "commtap run: %s cannot start with %s preloaded (%s): running it "
                          "without commtap\n",
                          check.program.c_str(), library.c_str(), check.said.c_str());
             preload.clear();
             if (state->flag_values["NCCL_PROFILER_PLUGIN"] == library)
               state->flag_values.erase("NCCL_PROFILER_PLUGIN");
             break;
           case PreloadCheck::Outcome::static_program:
             std::fprintf(stderr,
                          "commtap run: %s is statically linked, so no library can be preloaded "
                          "into it: only the dynamically linked programs it starts are recorded\n",
                          check.program.c_str());
             break;
         }
         bool launched = false;
         const int status = run_preloaded(preload, state->flag_values, command, &launched);
         // "cannot run ./app" was said; that nothing was recorded goes without saying.
         if (!launched) return status;
         std::string directory = "commtap-" + job_id;
         if (auto it = state->flag_values.find("COMMTAP_DIR"); it != state->flag_values.end())
           directory = it->second;
         else if (const char* dir = std::getenv("COMMTAP_DIR"); dir && *dir)
           directory = dir;
         report_rank_files(directory, started);
         return status;
       }},
      {calibrate,
       [state, calibrate]() -> int {
         std::vector<std::string> command = calibrate->remaining();
         command.insert(command.end(), state->command_after_dashes.begin(),
                        state->command_after_dashes.end());
         const std::string program = find_calibrate_program();
         if (command.empty() || program.empty()) {
           std::fprintf(stderr, "commtap calibrate: %s\n",
                        command.empty()
                            ? "no launcher given (commtap calibrate -- mpiexec -n 4 ...)"
                            : "commtap-calibrate is not installed next to commtap");
           return kExitError;
         }
         std::error_code ec;
         const fs::path output = fs::absolute(state->model_output, ec);
         command.push_back(program);
         command.push_back(output.string());
         command.push_back(std::to_string(state->choices_up_to));
         command.push_back(std::to_string(state->choice_rounds));
         command.push_back(state->calibrate_yield ? "1" : "0");
         const int status = run_preloaded("", {}, command);
         if (status != 0 || !fs::exists(output, ec)) {
           std::fprintf(stderr, "commtap calibrate: the measurement failed (exit %d)\n", status);
           return kExitError;
         }
         return 0;
       }},
      {settings_command,
       [state]() -> int {
         if (state->settings_as_json) {
           std::cout << settings_json() << "\n";
         } else if (state->settings_as_markdown) {
           std::cout << settings_markdown_table();
         } else {
           return print_settings(state->settings, state->settings_names, state->settings_full);
         }
         return 0;
       }},
  };
}

}  // namespace commtap::cli
