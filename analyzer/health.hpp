// analyzer/health: C4-style health analysis of trace databases (`commtap analyze`, `commtap
// report`); render/ turns its results into text, JSON, HTML and other tools' formats. Each job is
// read rank by rank, in a few streaming passes, so memory grows with the number of collective
// instances and ranks, not with instances x ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/findings/finding.hpp"
#include "analyzer/findings/job_evidence.hpp"
#include "analyzer/options.hpp"
#include "avoid_list/avoid_list.hpp"

namespace commtap::analyzer {

struct JobHealth {
  std::string job_id;
  std::string path;
  int ranks = 0;
  int hosts = 0;
  bool running = false;              // some rank has not ended
  std::uint64_t now_ns = 0;          // wall clock of the newest heartbeat: "now" for the detectors
  std::uint64_t instances = 0;       // aligned collective instances looked at
  std::uint64_t messages = 0;        // joined transfers looked at
  std::uint64_t rows_read = 0;       // rows the analysis read from the job's files
  std::vector<Finding> findings;     // most severe first
  std::vector<std::string> skipped;  // files of the job directory left out, and why
  // Who wrote the job's files: their owner (a user's other than root's or the analyzing user's
  // where the files have several owners); -1 where not known (taken as the analyzing user's).
  // Decides whether its findings' hosts may enter the store's avoid list (store_findings).
  long owner_uid = -1;
  JobEvidence evidence;  // what the detectors measured, for the report and --json
};

// The jobs named by `paths`: a job directory (rank-<N>.db or job.db), a database file, or a
// directory whose subdirectories are jobs. Unreadable paths go to `unreadable`. A subdirectory that
// is a symbolic link is followed only as check_input_file (untrusted_input.hpp) follows links.
struct UnreadableInput {
  std::string path, why;  // clean_text, like everything taken from a job directory
};
std::vector<std::string> find_jobs(const std::vector<std::string>& paths,
                                   std::vector<UnreadableInput>& unreadable);

struct ReportInputs;

// Analyzes one job, in isolation: unreadable, corrupt or hostile input, an exception, or reading
// past options.job_timeout_s make it false with `error` naming the job and why, and nothing
// else. health.path and every string taken from the files are clean_text. With `report`, also
// reads what `commtap report` draws besides the findings (report_inputs.hpp) from the same
// files, within the same time limit; its failure costs only those charts (`report->error`).
bool analyze_job(const std::string& path, const HealthOptions& options, JobHealth& health,
                 std::string& error, ReportInputs* report = nullptr);

}  // namespace commtap::analyzer
