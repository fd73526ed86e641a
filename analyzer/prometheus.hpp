// analyzer/prometheus: the analysis in Prometheus' text exposition format, for node_exporter's
// textfile collector (the convention for cron jobs): active findings as labelled gauges, and per
// job its size, what was compared and how long the analysis took.
#pragma once

#include <string>
#include <vector>

#include "analyzer/health.hpp"

namespace commtap::analyzer {

struct AnalysisRun {
  std::vector<JobHealth> jobs;
  std::vector<double> analysis_seconds;  // per job, same order
  int unreadable = 0;                    // inputs that could not be analyzed
  double seconds = 0;                    // the whole run
  double finished_unix_s = 0;            // when it finished
};

std::string prometheus_text(const AnalysisRun& run);

// Writes `text` to `path` through a temporary file in the same directory and a rename, so a
// reader (the textfile collector) sees the old file or the new one, never half of one. The
// temporary's name does not end in .prom: the collector reads only *.prom files.
bool write_file_atomically(const std::string& path, const std::string& text, std::string& error);

}  // namespace commtap::analyzer
