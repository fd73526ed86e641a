// `commtap merge`: a job directory's rank files into one database.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "analyzer/query/job_database.hpp"
#include "analyzer/trace/untrusted_input.hpp"
#include "cli/cli.hpp"

namespace commtap::cli {

using namespace commtap::analyzer;

namespace fs = std::filesystem;

Subcommand add_merge_command(CLI::App& app) {
  struct Options {
    std::string merge_dir, merge_output;
    double job_timeout_s = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* merge = app.add_subcommand(
      "merge", "Combine a job directory's rank-<N>.db files into one database (job.db)");
  merge->add_option("job", o->merge_dir, "Job directory")->required();
  merge->add_option("-o,--output", o->merge_output, "Output file (default: <job>/job.db)");
  add_input_options(merge, o->job_timeout_s, "--job-timeout",
                    "Seconds to read the rank files (0: 30 s and 2 s per MiB of them)");
  return {merge, [o]() -> int {
            auto& [merge_dir, merge_output, job_timeout_s] = *o;
            std::string error;
            std::unique_ptr<JobDatabase> job;
            {
              const Deadline deadline(job_time_limit(merge_dir, job_timeout_s));
              job = JobDatabase::open(merge_dir, error, /*prefer_merged=*/false);
              if (!job && Deadline::passed())
                error = merge_dir + ": not read within its time limit (--job-timeout): " + error;
            }
            if (!job) {
              print_error(error);
              return kExitError;
            }
            const std::string output =
                merge_output.empty() ? (fs::path(merge_dir) / "job.db").string() : merge_output;
            if (!job->save(output, error)) {
              print_error(error);
              return kExitError;
            }
            std::fprintf(stderr, "commtap: merged %zu rank files into %s\n", job->sources().size(),
                         clean_text(output).c_str());
            return 0;
          }};
}

}  // namespace commtap::cli
