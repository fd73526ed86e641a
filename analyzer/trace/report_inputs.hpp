// analyzer/trace/report_inputs: what `commtap report` draws from a job's aggregates besides the
// analysis: the slowest call sites, and the call sites' share of the ranks' time per window.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/trace/query_result.hpp"

namespace commtap::analyzer {

class ReaderPool;

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
  // The job's files the analysis read, as listed (not clean_text): the page is as private as the
  // most private of them.
  std::vector<std::string> files;
  // Why the call sites were left out (then they are empty); empty when they were read.
  std::string error;
};

// The span of the job the charts cover, as its analysis found it.
struct ReportSpan {
  std::int64_t start_ns = 0;  // wall clock of the earliest MPI_Init (JobEvidence::start_ns)
  std::uint64_t now_ns = 0;   // of the newest heartbeat (JobHealth::now_ns)
  double interval_s = 1.0;    // COMMTAP_INTERVAL (JobEvidence::interval_s)
};

// Reads `inputs` from the job's `files`, one at a time, for the analysis of the same job whose
// `span` (its start, COMMTAP_INTERVAL and newest heartbeat) sets the windows. analyze_job calls it
// after its detectors, under the job's deadline, for files its facts pass has checked. Each file's
// aggregates are summed per call site (and window) by SQL in that file, and the files' sums added
// here, so memory grows with the call sites and windows, not with the ranks or their rows. A
// failure leaves the call sites empty, with `inputs.error` saying why; it never throws.
// `readers`, where given, is the analysis's pool of the same `files` (reader_pool.hpp).
void read_report_inputs(const std::vector<std::string>& files, const ReportSpan& span,
                        ReportInputs& inputs, ReaderPool* readers = nullptr);

}  // namespace commtap::analyzer
