// analyzer/report_inputs: what `commtap report` draws from a job's aggregates besides the
// analysis: the slowest call sites, and the call sites' share of the ranks' time per window.
#pragma once

#include <string>
#include <vector>

#include "analyzer/analyzer.hpp"
#include "analyzer/health.hpp"

namespace commtap::analyzer {

struct CallSiteSeries {
  std::string label;          // "MPI_Allreduce from train_step(int)", demangled
  std::vector<double> share;  // per window of bucket_s since the job's start: its MPI time over
                              // all ranks' time (-1: no row)
};
struct ReportInputs {
  // The slowest call sites over the whole job (function, caller, source, size class, calls,
  // total, mean and worst time), slowest first; no rows where there are no aggregates.
  QueryResult slowest_sites;
  double bucket_s = 1.0;              // the windows: COMMTAP_INTERVAL (wider in long jobs)
  double end_s = 0;                   // the newest write, s since the job's start
  std::vector<CallSiteSeries> sites;  // the call sites with the most MPI time, most first
};

// Reads `inputs` from `job` for the analysis `health` of the same job. A query that fails
// leaves its part empty, with `error` saying why.
void read_report_inputs(const JobDatabase& job, const JobHealth& health, ReportInputs& inputs,
                        std::string& error);

}  // namespace commtap::analyzer
