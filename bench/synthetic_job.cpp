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
  const int ranks = std::atoi(argv[2]), steps = std::atoi(argv[3]);
  const int hosts = argc > 4 ? std::atoi(argv[4]) : std::max(1, ranks / 8);
  if (ranks < 1 || steps < 1 || hosts < 1 || hosts > ranks) {
    std::fprintf(stderr, "%s: needs ranks >= hosts >= 1 and instances >= 1\n", argv[0]);
    return 2;
  }
  const commtap::fixtures::SyntheticJob job = commtap::fixtures::straggler_job(ranks, steps, hosts);
  const std::string error = job.write(argv[1]);
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  return 0;
}
