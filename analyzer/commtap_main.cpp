// The `commtap` command: run a job preloaded, list the settings, query trace databases, analyze
// their health and report it.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "analyzer/analyzer.hpp"
#include "analyzer/health.hpp"
#include "analyzer/launch.hpp"
#include "monitor/trace_schema.hpp"

namespace fs = std::filesystem;
using namespace commtap::analyzer;

namespace {

constexpr int kExitError = 2;

// Settings as the library describes them.
struct Setting {
  std::string variable, field, kind, default_text, description;
  long min = 0, max = 0;
  std::string flag() const {
    std::string name = field;
    std::replace(name.begin(), name.end(), '_', '-');
    return "--" + name;
  }
};

std::vector<Setting> load_settings(const std::string& library) {
  std::string error;
  auto json = library_settings_json(library, error);
  if (!json) {
    std::fprintf(stderr, "commtap: cannot read the settings of %s: %s\n", library.c_str(),
                 error.c_str());
    std::exit(kExitError);
  }
  std::vector<Setting> settings;
  for (const auto& item : nlohmann::json::parse(*json)) {
    Setting s{item.at("variable"), item.at("field"), item.at("kind"), item.at("default"),
              item.at("description")};
    if (s.kind == "integer") {
      s.min = item.at("min");
      s.max = item.at("max");
    }
    settings.push_back(std::move(s));
  }
  return settings;
}

// --library may appear anywhere; it is needed before the other options can be declared.
std::string library_option(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--") break;
    if (std::string(argv[i]) == "--library") return argv[i + 1];
    if (std::string(argv[i]).rfind("--library=", 0) == 0) return std::string(argv[i]).substr(10);
  }
  return "";
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

std::string settings_markdown(const std::vector<Setting>& settings) {
  std::string out =
      "| Variable | `commtap run` flag | Kind | Default | Description |\n"
      "|---|---|---|---|---|\n";
  for (const Setting& s : settings) {
    std::string kind = s.kind;
    if (s.kind == "integer") kind += " " + std::to_string(s.min) + ".." + std::to_string(s.max);
    const std::string flag = s.kind == "flag" ? s.flag() : s.flag() + " VALUE";
    out += "| `" + s.variable + "` | `" + flag + "` | " + kind + " | " +
           (s.default_text.empty() ? "(empty)" : "`" + s.default_text + "`") + " | " +
           s.description + " |\n";
  }
  return out;
}

// The job id the library will use, so that `commtap run` can say where the trace went; passed on
// explicitly so that the library cannot choose another.
std::string choose_job_id(std::map<std::string, std::string>& variables) {
  std::string explicit_id;
  if (auto it = variables.find("COMMTAP_JOB_ID"); it != variables.end())
    explicit_id = it->second;
  else if (const char* value = std::getenv("COMMTAP_JOB_ID"))
    explicit_id = value;
  const std::string id = commtap::monitor::choose_job_id(explicit_id);
  variables["COMMTAP_JOB_ID"] = id;
  return id;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == kSettingsJsonCommand)
    return print_preloaded_settings_json();
  CLI::App app{"commtap: preload MPI/NCCL jobs, record what they do, and query the trace"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "commtap 0.1.0");
  std::string library_path;

  // ---- run ----
  CLI::App* run = app.add_subcommand(
      "run", "Run a launcher command (e.g. mpiexec -n 4 ./app) with libcommtap.so preloaded");
  run->add_option("--library", library_path, "libcommtap.so to preload");
  // Everything from the first word that is not a commtap option (or after --) is the command.
  run->prefix_command();
  run->footer("Usage: commtap run [settings] [--] <launcher command...>");
  std::map<std::string, std::string> flag_values;
  std::vector<Setting> settings;
  // ---- calibrate ----
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "Measure the all-reduce cost model on the machines a launcher command runs on (e.g. "
      "mpiexec -n 4 -ppn 2 -hosts a,b) and write it for COMMTAP_MODEL");
  std::string model_output = "commtap-model.json";
  calibrate->add_option("-o,--output", model_output, "Model file to write")->capture_default_str();
  long long choices_up_to = 4 << 20;
  int choice_rounds = 5;
  bool calibrate_yield = false;
  calibrate
      ->add_option("--choices-up-to", choices_up_to,
                   "Also time the library's all-reduce against each of commtap's from 8 B up to "
                   "this many bytes (x4) and store the measured choices; 0: the formulas only")
      ->capture_default_str()
      ->check(CLI::Range(0LL, 1LL << 31));
  calibrate->add_option("--rounds", choice_rounds, "Interleaved rounds per measured size")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  calibrate->add_flag("--yield", calibrate_yield,
                      "Measure in yield mode, as jobs run with COMMTAP_YIELD=1 (oversubscribed)");
  calibrate->prefix_command();
  calibrate->footer(
      "Usage: commtap calibrate [-o FILE] [--choices-up-to BYTES] [--rounds N] [--yield] [--] "
      "<launcher command...>");
  const bool wants_run =
      argc > 1 && (std::string(argv[1]) == "run" || std::string(argv[1]) == "calibrate");
  const bool wants_settings = argc > 1 && std::string(argv[1]) == "settings";
  if ((wants_run && std::string(argv[1]) == "run") || wants_settings) {
    const std::string chosen = require_library(library_option(argc, argv));
    settings = load_settings(chosen);
  }
  std::map<std::string, bool> flag_set;
  for (const Setting& s : settings) {
    if (s.kind == "flag") {
      run->add_flag_callback(
          s.flag(), [&flag_values, variable = s.variable] { flag_values[variable] = "1"; },
          s.description + " (" + s.variable + ")");
    } else {
      auto* option = run->add_option_function<std::string>(
          s.flag(),
          [&flag_values, variable = s.variable](const std::string& value) {
            flag_values[variable] = value;
          },
          s.description + " (" + s.variable + ")");
      if (s.kind == "integer") option->check(CLI::Range(s.min, s.max));
    }
  }

  // ---- settings ----
  CLI::App* settings_command =
      app.add_subcommand("settings", "List the COMMTAP_* settings the library understands");
  settings_command->add_option("--library", library_path, "libcommtap.so to describe");
  bool settings_as_json = false, settings_as_markdown = false;
  settings_command->add_flag("--json", settings_as_json, "As JSON");
  settings_command->add_flag("--markdown", settings_as_markdown, "As a Markdown table");

  // ---- query ----
  CLI::App* query = app.add_subcommand(
      "query", "Run a canned or a read-only SQL query over a job's trace databases");
  std::string job_path, query_name = "calls", sql;
  bool query_as_json = false, query_raw = false;
  bool list_queries = false;
  query->add_flag("--list", list_queries, "List the canned queries and exit");
  query->add_option("job", job_path, "Job directory (rank-<N>.db files) or a database file");
  std::string names;
  for (const std::string& name : canned_query_names()) names += (names.empty() ? "" : ", ") + name;
  query->add_option("query", query_name, "Canned query: " + names)->capture_default_str();
  query->add_option("--sql", sql, "A read-only SQL statement instead of a canned query");
  query->add_flag("--json", query_as_json, "Print rows as a JSON array of objects");
  query->add_flag("--raw", query_raw, "Print rows without a header, values separated by '|'");

  // `commtap run [settings] -- command...`: the command is split off here, before CLI11 sees it
  // (without --, prefix_command() takes everything from the first non-option word).
  std::vector<std::string> command_after_dashes;
  if (wants_run) {
    for (int i = 2; i < argc; ++i) {
      if (std::string(argv[i]) != "--") continue;
      command_after_dashes.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }
  // ---- merge ----
  CLI::App* merge = app.add_subcommand(
      "merge", "Combine a job directory's rank-<N>.db files into one database (job.db)");
  std::string merge_dir, merge_output;
  merge->add_option("job", merge_dir, "Job directory")->required();
  merge->add_option("-o,--output", merge_output, "Output file (default: <job>/job.db)");

  // ---- analyze and report ----
  HealthOptions health_options;
  std::vector<std::string> analyze_paths;
  bool analyze_json = false;
  std::string store, fail_on = "error";
  CLI::App* analyze = app.add_subcommand(
      "analyze", "Find hung ranks, lost ranks, slow hosts and ranks, slow links and degradation");
  CLI::App* report = app.add_subcommand(
      "report", "Write one self-contained HTML page with the link matrix, lateness and findings");
  std::string report_path, report_output = "report.html";
  for (CLI::App* command : {analyze, report}) {
    command
        ->add_option("--hang-after", health_options.hang_after_s,
                     "Seconds in one collective before ranks count as stuck")
        ->capture_default_str();
    command
        ->add_option("--stale-after", health_options.stale_after_s,
                     "Seconds without a heartbeat before a rank counts as lost (0: three "
                     "COMMTAP_INTERVALs + 1 s)")
        ->capture_default_str();
    command
        ->add_option("--since", health_options.since_s,
                     "Look only at the last this many seconds of data (0: all)")
        ->capture_default_str();
    command
        ->add_option("--at", health_options.at_s,
                     "Analyze the job as it stood this many seconds after it started, ignoring "
                     "what was written later: what a cron analysis saw then (0: now)")
        ->capture_default_str();
    command->add_option("--window", health_options.window_s, "Persistence window, seconds")
        ->capture_default_str();
    command
        ->add_option("--persistence", health_options.persistence,
                     "Fraction of windows a slow rank must be flagged in")
        ->capture_default_str();
    command
        ->add_option("--min-instances", health_options.min_instances,
                     "Aligned instances a window needs to count")
        ->capture_default_str();
    command
        ->add_option("--min-lateness-ms", health_options.min_lateness_ms,
                     "Slow rank: least median lateness")
        ->capture_default_str();
    command
        ->add_option("--lateness-factor", health_options.lateness_factor,
                     "Slow rank: median lateness over the ranks' lower quartile")
        ->capture_default_str();
    command
        ->add_option("--last-fraction", health_options.last_fraction,
                     "Slow rank: how often its host must be last to arrive")
        ->capture_default_str();
    command
        ->add_option("--min-evidence", health_options.min_evidence_instances,
                     "Slow rank or host: least compared collectives for any finding")
        ->capture_default_str();
    command
        ->add_option("--error-windows", health_options.error_windows,
                     "Slow rank or host: flagged windows for an error (fewer: a warning)")
        ->capture_default_str();
    command
        ->add_option("--link-factor", health_options.link_factor,
                     "Slow link: median latency over the baseline")
        ->capture_default_str();
    command
        ->add_option("--min-link-delay-us", health_options.min_link_delay_us,
                     "Slow link: least excess latency")
        ->capture_default_str();
    command
        ->add_option("--degradation-factor", health_options.degradation_factor,
                     "Degradation: recent time per call over the job's baseline")
        ->capture_default_str();
    command
        ->add_option("--min-degradation-us", health_options.min_degradation_us,
                     "Degradation: least excess per call")
        ->capture_default_str();
    command
        ->add_option("--degradation-windows", health_options.degradation_windows,
                     "Degradation: latest windows that must all be slow")
        ->capture_default_str();
  }
  analyze
      ->add_option("jobs", analyze_paths,
                   "Job directories, database files, or directories of job directories")
      ->required();
  analyze->add_flag("--json", analyze_json, "JSON output (schema in docs/analyzer.md)");
  analyze->add_option("--store", store,
                      "Record findings in this SQLite database (first/last seen, active)");
  analyze
      ->add_option("--fail-on", fail_on,
                   "Exit 1 when a finding is at least this severe (info, warning, error, "
                   "critical)")
      ->capture_default_str();
  report->add_option("job", report_path, "Job directory or database file")->required();
  report->add_option("-o,--output", report_output, "HTML file to write")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitError;
  }

  if (*run) {
    std::vector<std::string> command = run->remaining();
    command.insert(command.end(), command_after_dashes.begin(), command_after_dashes.end());
    if (command.empty()) {
      std::fprintf(stderr,
                   "commtap run: no command given (commtap run [settings] -- mpiexec ...)\n");
      return kExitError;
    }
    const std::string library = require_library(library_path);
    const std::string job_id = choose_job_id(flag_values);
    const int status = run_preloaded(library, flag_values, command);
    std::string directory = "commtap-" + job_id;
    if (auto it = flag_values.find("COMMTAP_DIR"); it != flag_values.end())
      directory = it->second;
    else if (const char* dir = std::getenv("COMMTAP_DIR"); dir && *dir)
      directory = dir;
    std::error_code ec;
    if (fs::is_directory(directory, ec)) {
      std::size_t files = 0;
      for (const auto& entry : fs::directory_iterator(directory, ec))
        files += entry.path().extension() == ".db" ? 1 : 0;
      std::fprintf(stderr, "commtap: trace database: %s (%zu rank files)\n", directory.c_str(),
                   files);
    }
    return status;
  }

  if (*calibrate) {
    std::vector<std::string> command = calibrate->remaining();
    command.insert(command.end(), command_after_dashes.begin(), command_after_dashes.end());
    const std::string program = find_calibrate_program();
    if (command.empty() || program.empty()) {
      std::fprintf(stderr, "commtap calibrate: %s\n",
                   command.empty() ? "no launcher given (commtap calibrate -- mpiexec -n 4 ...)"
                                   : "commtap-calibrate is not installed next to commtap");
      return kExitError;
    }
    std::error_code ec;
    const fs::path output = fs::absolute(model_output, ec);
    command.push_back(program);
    command.push_back(output.string());
    command.push_back(std::to_string(choices_up_to));
    command.push_back(std::to_string(choice_rounds));
    command.push_back(calibrate_yield ? "1" : "0");
    const int status = run_preloaded("", {}, command);
    if (status != 0 || !fs::exists(output, ec)) {
      std::fprintf(stderr, "commtap calibrate: the measurement failed (exit %d)\n", status);
      return kExitError;
    }
    return 0;
  }

  if (*settings_command) {
    if (settings_as_json) {
      std::string error;
      std::cout << *library_settings_json(require_library(library_path), error) << "\n";
    } else if (settings_as_markdown) {
      std::cout << settings_markdown(settings);
    } else {
      for (const Setting& s : settings) {
        std::cout << s.variable << " (" << s.kind;
        if (s.kind == "integer") std::cout << " " << s.min << ".." << s.max;
        std::cout << ", default " << (s.default_text.empty() ? "empty" : s.default_text)
                  << ")\n    " << s.description << "\n";
      }
    }
    return 0;
  }

  if (*merge) {
    std::string error;
    auto job = JobDatabase::open(merge_dir, error, /*prefer_merged=*/false);
    if (!job) {
      std::fprintf(stderr, "commtap: %s\n", error.c_str());
      return kExitError;
    }
    const std::string output =
        merge_output.empty() ? (fs::path(merge_dir) / "job.db").string() : merge_output;
    if (!job->save(output, error)) {
      std::fprintf(stderr, "commtap: cannot write %s: %s\n", output.c_str(), error.c_str());
      return kExitError;
    }
    std::fprintf(stderr, "commtap: merged %zu rank files into %s\n", job->sources().size(),
                 output.c_str());
    return 0;
  }

  if (*analyze) {
    Severity threshold = Severity::error;
    if (!parse_severity(fail_on, threshold)) {
      std::fprintf(stderr,
                   "commtap analyze: --fail-on %s: expected info, warning, error or "
                   "critical\n",
                   fail_on.c_str());
      return kExitError;
    }
    std::vector<std::string> errors;
    const std::vector<std::string> jobs = find_jobs(analyze_paths, errors);
    std::vector<JobHealth> results;
    for (const std::string& path : jobs) {
      JobHealth health;
      std::string error;
      if (analyze_job(path, health_options, health, error))
        results.push_back(std::move(health));
      else
        errors.push_back(error);
    }
    for (const std::string& error : errors) std::fprintf(stderr, "commtap: %s\n", error.c_str());
    std::cout << (analyze_json ? health_json(results).dump(2) + "\n" : health_text(results));
    if (!store.empty()) {
      std::string error;
      if (!store_findings(store, results, error)) {
        std::fprintf(stderr, "commtap: cannot store findings: %s\n", error.c_str());
        return kExitError;
      }
    }
    if (!errors.empty()) return kExitError;
    for (const JobHealth& job : results)
      for (const Finding& f : job.findings)
        if (f.severity >= threshold) return 1;
    return 0;
  }

  if (*report) {
    JobHealth health;
    std::string error;
    if (!analyze_job(report_path, health_options, health, error)) {
      std::fprintf(stderr, "commtap: %s\n", error.c_str());
      return kExitError;
    }
    // The slowest call sites over the whole job, from the aggregates.
    std::string sites = "<p>No aggregates.</p>";
    if (auto job = JobDatabase::open(report_path, error)) {
      auto result = job->query(
          "SELECT a.function, coalesce(s.symbol, '?') AS caller, "
          "coalesce(s.file || ':' || s.line, '') AS source, a.size_class AS bytes_class, "
          "sum(a.calls) AS calls, round(sum(a.total_ns) / 1e6, 3) AS total_ms, "
          "round(sum(a.total_ns) / 1e3 / sum(a.calls), 1) AS mean_us, "
          "round(max(a.max_ns) / 1e3, 1) AS worst_us FROM aggregates a LEFT JOIN call_sites s "
          "ON s.rank = a.rank AND s.site = a.site AND s.frame = 0 "
          "GROUP BY 1, 2, 3, 4 ORDER BY sum(a.total_ns) DESC LIMIT 15",
          error);
      if (result && !result->rows.empty()) {
        sites = "<table><tr>";
        for (const std::string& c : result->columns) sites += "<th>" + c + "</th>";
        sites += "</tr>";
        for (const auto& row : result->rows) {
          sites += "<tr>";
          for (const auto& cell : row) {
            std::string text = cell.value_or("");
            std::string escaped;
            for (char c : text)
              escaped += c == '<' ? "&lt;" : c == '&' ? "&amp;" : std::string(1, c);
            sites += "<td>" + escaped + "</td>";
          }
          sites += "</tr>";
        }
        sites += "</table>";
      }
    }
    const std::string temporary = report_output + ".tmp";
    FILE* out = std::fopen(temporary.c_str(), "w");
    const std::string html = health_html(health, sites);
    if (out == nullptr || std::fwrite(html.data(), 1, html.size(), out) != html.size() ||
        std::fclose(out) != 0 || std::rename(temporary.c_str(), report_output.c_str()) != 0) {
      std::fprintf(stderr, "commtap: cannot write %s\n", report_output.c_str());
      return kExitError;
    }
    std::fprintf(stderr, "commtap: wrote %s (%zu findings)\n", report_output.c_str(),
                 health.findings.size());
    return 0;
  }

  if (*query) {
    if (list_queries) {
      for (const std::string& name : canned_query_names())
        std::cout << name << std::string(name.size() < 15 ? 15 - name.size() : 1, ' ')
                  << canned_query_description(name) << "\n";
      return 0;
    }
    if (job_path.empty()) {
      std::fprintf(stderr, "commtap query: give a job directory or database (or --list)\n");
      return kExitError;
    }
    std::string error;
    auto job = JobDatabase::open(job_path, error);
    if (!job) {
      std::fprintf(stderr, "commtap: %s\n", error.c_str());
      return kExitError;
    }
    const char* statement = sql.empty() ? canned_query(query_name) : sql.c_str();
    if (statement == nullptr) {
      std::fprintf(stderr, "commtap: no canned query '%s' (have: %s)\n", query_name.c_str(),
                   names.c_str());
      return kExitError;
    }
    auto result = job->query(statement, error);
    if (!result) {
      std::fprintf(stderr, "commtap: query failed: %s\n", error.c_str());
      return kExitError;
    }
    std::cout << (query_as_json ? format_json(*result)
                  : query_raw   ? format_raw(*result)
                                : format_table(*result));
    return 0;
  }
  return 0;
}
