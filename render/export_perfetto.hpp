// render/export_perfetto: a job as a Chrome trace-event JSON timeline, which ui.perfetto.dev and
// chrome://tracing open. One process per host, one track per rank; collective instances and
// point-to-point operations as slices on rank 0's clock, messages as flows, in-call heartbeats
// and the analyzer's findings as instants. docs/analyzer.md describes the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "analyzer/health.hpp"

namespace commtap::render {

struct PerfettoOptions {
  // The cut, in seconds on the timeline (0 is the job's start): slices that overlap
  // [since_s, until_s] are kept. until_s <= 0: to the end. last_s > 0 replaces since_s with the
  // job's end minus last_s.
  double since_s = 0;
  double until_s = 0;
  double last_s = 0;
  // Bound on the events written (slices, flow ends, instants): beyond it, one collective
  // instance in k (by a hash of (comm_id, seq), so every rank keeps the same ones), one message
  // in k (both sides) and one heartbeat in k are kept.
  std::uint64_t max_events = 200'000;
  bool findings = true;            // run the analyzer and mark its findings
  analyzer::HealthOptions health;  // its thresholds
};

struct PerfettoStats {
  std::uint64_t slices = 0, flows = 0, instants = 0;
  std::uint64_t keep_one_in = 1;  // the sampling stride the bound needed
  int tracks = 0;                 // rank tracks, overflow tracks of overlapping operations included
};

// Writes the job at `job_path` (a job directory or database file) to `out`. False with `error`
// naming the file for unreadable input.
bool export_perfetto(const std::string& job_path, const PerfettoOptions& options, std::FILE* out,
                     PerfettoStats& stats, std::string& error);

}  // namespace commtap::render
