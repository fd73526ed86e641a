// Writes the analyzer's replay corpus (scripts/corpus): synthetic jobs through the tests' fixture
// (tests/fixtures/synthetic_job.hpp), one directory each, healthy and with every fault the
// detectors name (the shapes of tests/unit/analyzer/*_test.cpp and the analyzer benchmark's
// jobs). The jobs are seeded: the same build writes the same rows every time.
//
//   trace_corpus <directory> [name...]     every job (or those named) into <directory>/<name>
//   trace_corpus --list                    the jobs' names, one a line
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tests/fixtures/synthetic_job.hpp"

namespace {

using commtap::fixtures::SyntheticJob;

struct Case {
  const char* name;
  std::function<SyntheticJob()> make;
};

// A link that drops packets: most messages on time, about `share` of them after a 200 ms
// retransmission timeout (as in health_test.cpp).
double retransmitted_us(bool lossy, double t, int from, int to, double share = 0.025) {
  const double draw = std::fmod(t * 7.31 + from * 0.377 + to * 0.613, 1.0);
  return lossy && draw < share ? 200'000.0 : 0.0;
}

SyntheticJob probed_job() {
  SyntheticJob job;
  job.messages = false;
  job.probe_every_s = 5;
  return job;
}

// Every kind of row at once, with a slow rank, a slow link and a lossy pair.
SyntheticJob busy_job(double seconds) {
  SyntheticJob job;
  job.seconds = seconds;
  job.period_ms = 20;
  job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
  job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 60.0; };
  job.link_us = [](int from, int to, double) { return from == 1 && to == 2 ? 2000.0 : 0.0; };
  job.probe_every_s = 2;
  job.tcp = true;
  job.tcp_lost_share = [](int from, int to, double) { return from == 3 && to == 0 ? 0.05 : 0.0; };
  return job;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  auto add = [&](const char* name, std::function<SyntheticJob()> make) {
    all.push_back({name, std::move(make)});
  };
  for (int seed = 1; seed <= 3; ++seed)
    add(seed == 1   ? "clean-1"
        : seed == 2 ? "clean-2"
                    : "clean-3",
        [seed] {
          SyntheticJob job;
          job.seed = static_cast<std::uint64_t>(seed);
          job.jitter_us = 60;
          return job;
        });
  add("straggler-16x3000", [] { return commtap::fixtures::straggler_job(16, 3000, 4); });
  add("straggler-64x500", [] { return commtap::fixtures::straggler_job(64, 500, 8); });
  add("slow-rank", [] {
    SyntheticJob job;
    job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 60.0; };
    return job;
  });
  add("slow-rank-2s", [] {
    SyntheticJob job;
    job.late_us = [](int rank, double) { return rank == 2 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank == 2 ? 0.0 : 60.0; };
    job.seconds = 2;
    return job;
  });
  add("slow-rank-0-long-period", [] {
    SyntheticJob job;
    job.late_us = [](int rank, double) { return rank == 0 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank == 0 ? 0.0 : 6.0; };
    job.seconds = 20;
    job.period_ms = 500;
    return job;
  });
  add("followers-taking-turns", [] {
    SyntheticJob job;
    job.followers = 1;
    job.late_us = [](int rank, double) { return rank == 3 ? 3000.0 : 0.0; };
    job.follower_late_us = [](int rank, double t) {
      return rank == static_cast<int>(t * 20) % 8 ? 3000.0 : 0.0;
    };
    job.receive_wait_ms = [](int rank) { return rank == 3 ? 0.0 : 60.0; };
    return job;
  });
  add("slow-rank-waits-in-receives", [] {
    SyntheticJob job;
    job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank == 5 ? 300.0 : 0.0; };
    return job;
  });
  add("writer-behind-interval-500", [] {
    SyntheticJob job;
    job.late_us = [](int rank, double) { return rank == 5 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank == 5 ? 0.0 : 600.0; };
    job.interval_ms = "500";
    job.last_window_s = 0.3;
    return job;
  });
  add("hang", [] {
    SyntheticJob job;
    job.hang_at = 20;
    job.hang_culprit = 6;
    return job;
  });
  add("hang-killed", [] {
    SyntheticJob job;
    job.hang_at = 20;
    job.hang_culprit = 6;
    job.killed_by = "SIGTERM";
    return job;
  });
  add("hang-ahead-and-waiting", [] {
    SyntheticJob job;
    job.hang_at = 15;
    job.hang_culprit = 2;
    job.hang_ahead = 4;
    job.hang_waiting = 3;
    return job;
  });
  add("killed-healthy", [] {
    SyntheticJob job;
    job.killed_by = "SIGTERM";
    return job;
  });
  add("crash", [] {
    SyntheticJob job;
    job.crash_at = 15;
    job.crash_rank = 3;
    return job;
  });
  add("in-call-and-unfinished", [] {
    SyntheticJob job;
    job.in_call_rank = 4;
    job.in_call_window = 29;
    job.unfinished_rank = 1;
    job.unfinished_at = 29.5;
    return job;
  });
  add("slow-host", [] {
    SyntheticJob job;
    job.late_us = [](int rank, double) { return rank / 2 == 1 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank / 2 == 1 ? 0.0 : 60.0; };
    return job;
  });
  add("slow-link", [] {
    SyntheticJob job;
    job.link_us = [](int from, int to, double) { return from == 0 && to == 2 ? 2000.0 : 0.0; };
    return job;
  });
  add("slow-link-3-hosts", [] {
    SyntheticJob job;
    job.ranks = 3;
    job.hosts = 3;
    job.seconds = 6;
    job.message_every = 1;
    job.link_us = [](int from, int to, double) { return from == 1 && to == 2 ? 3000.0 : 0.0; };
    return job;
  });
  add("slow-link-probed", [] {
    SyntheticJob job;
    job.link_us = [](int from, int to, double) { return from == 0 && to == 2 ? 2000.0 : 0.0; };
    job.probe_every_s = 5;
    job.probe_latency_us = [](int from, int to, double) {
      return from == 0 && to == 2 ? 2030.0 : 30.0;
    };
    return job;
  });
  add("degradation", [] {
    SyntheticJob job;
    job.seconds = 60;
    job.late_us = [](int rank, double t) { return rank / 2 == 1 && t >= 40 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank / 2 == 1 ? 0.0 : 60.0; };
    job.call_us = [](double t) { return t < 40 ? 100.0 : 3100.0; };
    return job;
  });
  add("one-way-link-skews-clock", [] {
    SyntheticJob job;
    job.link_us = [](int from, int to, double) { return from == 0 && to == 1 ? 3000.0 : 0.0; };
    job.clock_error_us = [](int host) { return host == 1 ? -1500.0 : 0.0; };
    return job;
  });
  add("clock-error-only", [] {
    SyntheticJob job;
    job.clock_error_us = [](int host) { return host == 2 ? 800.0 : 0.0; };
    return job;
  });
  add("clock-error-2-hosts", [] {
    SyntheticJob job;
    job.hosts = 2;
    job.ranks = 4;
    job.clock_error_us = [](int host) { return host == 1 ? 2500.0 : 0.0; };
    return job;
  });
  add("no-clock-offsets-skewed", [] {
    SyntheticJob job;
    job.record_clock_offsets = false;
    job.clock_skew_us = [](int rank) { return 1000.0 * rank; };
    job.late_us = [](int rank, double) { return rank == 6 ? 3000.0 : 0.0; };
    return job;
  });
  add("stalled-pipeline-host", [] {
    SyntheticJob job;
    job.late_us = [](int rank, double t) { return t >= 10 && rank >= 4 ? 4000.0 : 0.0; };
    job.link_us = [](int, int to, double t) { return t >= 10 && to == 3 ? 3000.0 : 0.0; };
    job.sends = [](int from, int to, double) { return from / 2 == to / 2; };
    job.receive_wait_ms = [](int rank) { return rank < 4 ? 950.0 : rank < 6 ? 700.0 : 300.0; };
    job.stall_share = [](int host, double t) {
      return t >= 10 && host == 3 ? 0.15 : 0.003 + 0.002 * host;
    };
    return job;
  });
  add("stalls-alike", [] {
    SyntheticJob job;
    job.stall_share = [](int host, double t) {
      return 0.08 + 0.04 * std::sin(host * 1.7 + t * 0.3 + 1.0);
    };
    return job;
  });
  add("pipeline-host-network-probed", [] {
    SyntheticJob job;
    job.probe_every_s = 5;
    job.sends = [](int from, int to, double) { return from / 2 == to / 2; };
    job.link_us = [](int from, int to, double t) {
      return t >= 8 && (from == 2 || to == 2) ? 4000.0 : 0.0;
    };
    job.probe_latency_us = [](int from, int to, double t) {
      return t >= 8 && (from == 2 || to == 2) ? 4030.0 : 30.0;
    };
    return job;
  });
  add("pipeline-slow-link", [] {
    SyntheticJob job;
    job.sends = [](int from, int to, double) { return from / 2 == to / 2; };
    job.link_us = [](int from, int to, double t) {
      return t >= 8 && from == 0 && to == 1 ? 3000.0 : 0.0;
    };
    job.late_us = [](int rank, double t) { return t >= 8 && rank < 4 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank < 4 ? 500.0 : 950.0; };
    return job;
  });
  add("host-network-both-ways", [] {
    SyntheticJob job;
    job.link_us = [](int from, int to, double) { return from == 3 || to == 3 ? 2000.0 : 0.0; };
    return job;
  });
  add("lossy-host-messages", [] {
    SyntheticJob job;
    job.link_us = [](int from, int to, double t) {
      return retransmitted_us(from == 1 || to == 1, t, from, to);
    };
    return job;
  });
  add("lossy-link-one-way", [] {
    SyntheticJob job;
    job.link_us = [](int from, int to, double t) {
      return retransmitted_us(from == 0 && to == 1, t, from, to, 0.08);
    };
    return job;
  });
  add("probes-stall-on-host", [] {
    SyntheticJob job = probed_job();
    job.probe_every_s = 1;
    job.probe_mb_per_s = [](int from, int to, double t) {
      const bool lossy = (from == 2 || to == 2) && std::fmod(t * 0.7 + from + to, 3.0) < 0.75;
      return lossy ? 1.0 : 1000.0;
    };
    return job;
  });
  add("probes-slowest-round-trip", [] {
    SyntheticJob job = probed_job();
    job.probe_every_s = 1;
    job.probe_slowest_latency_us = [](int from, int to, double t) {
      const bool lossy = (from == 2 || to == 2) && std::fmod(t * 0.7 + from + to, 3.0) < 0.75;
      return lossy ? 200'000.0 : 0.0;
    };
    return job;
  });
  add("probes-one-way-leg", [] {
    SyntheticJob job = probed_job();
    job.probe_every_s = 1;
    job.probe_slowest_one_way_us = [](int from, int to, double t) {
      return from == 0 && to == 1 && std::fmod(t * 0.7, 3.0) < 0.75 ? 200'000.0 : 60.0;
    };
    return job;
  });
  add("probes-one-way-times", [] {
    SyntheticJob job = probed_job();
    job.probe_one_way_us = [](int from, int to, double) {
      return from == 1 && to == 3 ? 3000.0 : 30.0;
    };
    return job;
  });
  add("tcp-lost-and-duplicates", [] {
    SyntheticJob job;
    job.tcp = true;
    job.tcp_lost_share = [](int from, int to, double) { return from == 2 && to == 1 ? 0.04 : 0.0; };
    job.tcp_duplicate_share = [](int from, int, double) { return from == 3 ? 0.02 : 0.0; };
    return job;
  });
  add("busy-every-row", [] { return busy_job(20); });
  add("phase-change-isend", [] {
    SyntheticJob job;
    job.isend_class = [](double t) { return t >= 15 ? std::int64_t{16} : std::int64_t{-1}; };
    job.late_us = [](int rank, double t) { return rank == 1 && t >= 15 ? 3000.0 : 0.0; };
    return job;
  });
  add("round-robin-slow-rank", [] {
    SyntheticJob job;
    job.round_robin = true;
    job.late_us = [](int rank, double) { return rank == 6 ? 3000.0 : 0.0; };
    job.receive_wait_ms = [](int rank) { return rank == 6 ? 0.0 : 60.0; };
    return job;
  });
  add("realistic-16x120s", [] {
    SyntheticJob job;
    job.ranks = 16;
    job.hosts = 2;
    job.seconds = 120;
    job.period_ms = 100;
    job.jitter_us = 5;
    job.late_us = [](int rank, double) { return rank == 7 ? 2000.0 : 0.0; };
    job.message_every = 4;
    job.sends_to = [](int from, int to) { return to == (from + 8) % 16; };
    job.probe_every_s = 60;
    job.tcp = true;
    job.tcp_segments_per_s = 100;
    job.job_id = "bench-realistic";
    job.host_prefix = "node";
    return job;
  });
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Case> all = cases();
  if (argc == 2 && std::strcmp(argv[1], "--list") == 0) {
    for (const Case& c : all) std::printf("%s\n", c.name);
    return 0;
  }
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <directory> [name...] | --list\n", argv[0]);
    return 2;
  }
  const std::string directory = argv[1];
  int written = 0;
  for (const Case& c : all) {
    bool wanted = argc == 2;
    for (int i = 2; i < argc; ++i) wanted |= std::strcmp(argv[i], c.name) == 0;
    if (!wanted) continue;
    const std::string error = c.make().write(directory + "/" + c.name);
    if (!error.empty()) {
      std::fprintf(stderr, "%s: %s\n", c.name, error.c_str());
      return 1;
    }
    ++written;
  }
  if (written == 0) {
    std::fprintf(stderr, "%s: no job of that name (--list)\n", argv[0]);
    return 2;
  }
  return 0;
}
