// `commtap merge`: a job directory's rank files into one database.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "analyzer/analyzer.hpp"
#include "analyzer/cli.hpp"

namespace commtap::analyzer::cli {

namespace fs = std::filesystem;

Subcommand add_merge_command(CLI::App& app) {
  struct Options {
    std::string merge_dir, merge_output;
  };
  auto o = std::make_shared<Options>();
  CLI::App* merge = app.add_subcommand(
      "merge", "Combine a job directory's rank-<N>.db files into one database (job.db)");
  merge->add_option("job", o->merge_dir, "Job directory")->required();
  merge->add_option("-o,--output", o->merge_output, "Output file (default: <job>/job.db)");
  return {merge, [o]() -> int {
            auto& [merge_dir, merge_output] = *o;
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
          }};
}

}  // namespace commtap::analyzer::cli
