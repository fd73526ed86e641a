// Writes a synthetic job for the analyzer benchmark with the tests' fixture
// (tests/fixtures/synthetic_job.hpp), through the monitor's own writer: `ranks` rank files on
// `hosts` hosts, each with `instances` all-reduce instances on MPI_COMM_WORLD, one a millisecond
// (arrival jitter of a few microseconds; rank 7 arrives 2 ms late, so the analysis has a finding
// to make), heartbeats and communicator progress; no messages, no aggregates.
//
//   synthetic_job <directory> <ranks> <instances> [hosts]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fixtures/synthetic_job.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s <directory> <ranks> <instances> [hosts]\n", argv[0]);
    return 2;
  }
  commtap::fixtures::SyntheticJob job;
  job.ranks = std::atoi(argv[2]);
  job.steps = std::atoi(argv[3]);
  job.hosts = argc > 4 ? std::atoi(argv[4]) : std::max(1, job.ranks / 8);
  if (job.ranks < 1 || job.steps < 1 || job.hosts < 1 || job.hosts > job.ranks) {
    std::fprintf(stderr, "%s: needs ranks >= hosts >= 1 and instances >= 1\n", argv[0]);
    return 2;
  }
  job.period_ms = 1;
  job.seconds = std::ceil(job.steps / 1000.0);  // a writer window per 1,000 instances
  job.jitter_us = 5;
  job.late_us = [](int rank, double) { return rank == 7 ? 2000.0 : 0.0; };
  job.collective_bytes = 4096;
  job.messages = false;
  job.aggregates = false;
  job.stall_share = [](int, double) { return 0.0; };
  job.job_id = "bench";
  job.host_prefix = "node";
  job.command_line = "";
  const std::string error = job.write(argv[1]);
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  return 0;
}
