// Writes a synthetic job for the analyzer benchmark with the tests' fixture
// (tests/fixtures/synthetic_job.hpp), through the monitor's own writer.
//
//   synthetic_job <directory> <ranks> <instances> [hosts]
//     `ranks` rank files on `hosts` hosts, each with `instances` all-reduce instances on
//     MPI_COMM_WORLD, one a millisecond (arrival jitter of a few microseconds; rank 7 arrives
//     2 ms late, so the analysis has a finding to make), heartbeats and communicator progress; no
//     messages, no aggregates.
//   synthetic_job --realistic <directory> <ranks> <seconds> [hosts]
//     A job of `seconds` (a writer window each) with every kind of row: a sampled all-reduce
//     every 100 ms (as COMMTAP_SAMPLE keeps one in 16 of a program's), a message to a rank on the
//     next host every 400 ms, the aggregates of every window, link probes between every host
//     pair each minute and TCP counters each second; rank 7 is 2 ms late.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/fixtures/synthetic_job.hpp"

namespace {

commtap::fixtures::SyntheticJob realistic_job(int ranks, double seconds, int hosts) {
  commtap::fixtures::SyntheticJob job;
  job.ranks = ranks;
  job.hosts = hosts;
  job.seconds = seconds;
  job.period_ms = 100;
  job.jitter_us = 5;
  job.late_us = [](int rank, double) { return rank == 7 ? 2000.0 : 0.0; };
  job.message_every = 4;
  const int per_host = std::max(1, ranks / hosts);
  job.sends_to = [ranks, per_host](int from, int to) { return to == (from + per_host) % ranks; };
  job.probe_every_s = 60;
  job.tcp = true;
  job.tcp_segments_per_s = 100;
  job.job_id = "bench-realistic";
  job.host_prefix = "node";
  return job;
}

}  // namespace

int main(int argc, char** argv) {
  const bool realistic = argc > 1 && std::strcmp(argv[1], "--realistic") == 0;
  if (realistic) {
    ++argv;
    --argc;
  }
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: %s <directory> <ranks> <instances> [hosts]\n"
                 "       %s --realistic <directory> <ranks> <seconds> [hosts]\n",
                 argv[0], argv[0]);
    return 2;
  }
  const int ranks = std::atoi(argv[2]), steps = std::atoi(argv[3]);
  const int hosts = argc > 4 ? std::atoi(argv[4]) : std::max(1, ranks / 8);
  if (ranks < 1 || steps < 1 || hosts < 1 || hosts > ranks) {
    std::fprintf(stderr, "%s: needs ranks >= hosts >= 1 and instances (seconds) >= 1\n", argv[0]);
    return 2;
  }
  const commtap::fixtures::SyntheticJob job =
      realistic ? realistic_job(ranks, steps, hosts)
                : commtap::fixtures::straggler_job(ranks, steps, hosts);
  const std::string error = job.write(argv[1]);
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  return 0;
}
