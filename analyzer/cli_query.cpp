// `commtap query`: a canned or read-only SQL query over a job's trace databases.
#include <cstdio>
#include <iostream>
#include <memory>

#include "analyzer/analyzer.hpp"
#include "analyzer/cli.hpp"

namespace commtap::analyzer::cli {

Subcommand add_query_command(CLI::App& app) {
  struct Options {
    std::string job_path, query_name = "calls", sql, names;
    bool query_as_json = false, query_raw = false, list_queries = false;
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
  return {query, [o]() -> int {
            auto& [job_path, query_name, sql, names, query_as_json, query_raw, list_queries] = *o;
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
          }};
}

}  // namespace commtap::analyzer::cli
