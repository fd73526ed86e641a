// render/prometheus: the analysis in Prometheus' text exposition format, for node_exporter's
// textfile collector (the convention for cron jobs): active findings as labelled gauges, and per
// job its size, what was compared and how long the analysis took.
#pragma once

#include <string>
#include <vector>

#include "analyzer/health.hpp"

namespace commtap::render {

struct AnalysisRun {
  std::vector<analyzer::JobHealth> jobs;
  std::vector<double> analysis_seconds;  // per job, same order
  std::vector<std::string> unreadable;   // inputs that could not be analyzed (clean_text)
  double seconds = 0;                    // the whole run
  double finished_unix_s = 0;            // when it finished
};

std::string prometheus_text(const AnalysisRun& run);

// The file is written by write_file_atomically (output_files.hpp) with mode 0644: node_exporter
// runs as another user and must read it, so the textfile is world-readable by design; it holds
// job ids, paths, host names and finding kinds, nothing of the traces' command lines or sources.
// Its temporary's name does not end in .prom: the collector reads only *.prom files.
inline constexpr unsigned kPrometheusFileMode = 0644;

}  // namespace commtap::render
