// `commtap query`: a canned or read-only SQL query over a job's trace databases.
#include <cstdio>
#include <iostream>
#include <memory>

#include "analyzer/query/job_database.hpp"
#include "analyzer/trace/untrusted_input.hpp"
#include "cli/cli.hpp"

namespace commtap::cli {

using namespace commtap::analyzer;

Subcommand add_query_command(CLI::App& app) {
  struct Options {
    std::string job_path, query_name = "calls", sql, names;
    bool query_as_json = false, query_raw = false, list_queries = false;
    double job_timeout_s = 0, memory_mib = 1024;
    JobDatabase::Limits limits;
  };
  auto o = std::make_shared<Options>();
  CLI::App* query = app.add_subcommand(
      "query", "Run a canned or a read-only SQL query over a job's trace databases");
  query->add_flag("--list", o->list_queries, "List the canned queries and exit");
  query->add_option("job", o->job_path, "Job directory (rank-<N>.db files) or a database file");
  for (const std::string& name : canned_query_names())
    o->names += (o->names.empty() ? "" : ", ") + name;
  query->add_option("query", o->query_name, "Canned query: " + o->names)->capture_default_str();
  query->add_option("--sql", o->sql, "A read-only SQL statement instead of a canned query");
  query->add_flag("--json", o->query_as_json, "Print rows as a JSON array of objects");
  query->add_flag("--raw", o->query_raw, "Print rows without a header, values separated by '|'");
  query
      ->add_option("--timeout", o->limits.seconds,
                   "Seconds a --sql statement may run (0: no limit)")
      ->capture_default_str();
  query
      ->add_option("--memory-limit", o->memory_mib,
                   "MiB a --sql statement and its result may use beyond the loaded job")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_input_options(query, o->job_timeout_s, "--job-timeout",
                    "Seconds to load the job (0: 30 s and 2 s per MiB of its files)");
  return {query, [o]() -> int {
            auto& [job_path, query_name, sql, names, query_as_json, query_raw, list_queries,
                   job_timeout_s, memory_mib, limits] = *o;
            limits.memory_bytes = static_cast<std::int64_t>(memory_mib * 1024 * 1024);
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
            std::unique_ptr<JobDatabase> job;
            {
              const Deadline deadline(job_time_limit(job_path, job_timeout_s));
              job = JobDatabase::open(job_path, error);
              if (!job && Deadline::passed())
                error = job_path + ": not loaded within its time limit (--job-timeout): " + error;
            }
            if (!job) {
              print_error(error);
              return kExitError;
            }
            const char* statement = sql.empty() ? canned_query(query_name) : sql.c_str();
            if (statement == nullptr) {
              print_error("no canned query '" + query_name + "' (have: " + names + ")");
              return kExitError;
            }
            auto result = job->query(statement, error, sql.empty() ? nullptr : &limits);
            if (!result) {
              print_error("query failed: " + error);
              return kExitError;
            }
            std::cout << (query_as_json ? format_json(*result)
                          : query_raw   ? format_raw(*result)
                                        : format_table(*result));
            return 0;
          }};
}

}  // namespace commtap::cli
