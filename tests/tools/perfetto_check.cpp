// perfetto_check FILE HOSTS RANKS [SINCE_US UNTIL_US [MAX_EVENTS]]: checks a commtap Perfetto
// export (tests/tools/perfetto_checks.hpp) and prints what it counted; exit 1 with the problem.
// PERFETTO_ALIGNMENT_US: how far apart the ranks' clocks may be (default 1000 us).
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "perfetto_checks.hpp"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: perfetto_check FILE HOSTS RANKS [SINCE_US UNTIL_US [MAX]]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "perfetto_check: %s: not JSON: %s\n", argv[1], e.what());
    return 1;
  }
  commtap::test::PerfettoExpectations expect;
  expect.hosts = std::atoi(argv[2]);
  expect.ranks = std::atoi(argv[3]);
  if (argc > 5) {
    expect.since_us = std::atof(argv[4]);
    expect.until_us = std::atof(argv[5]);
  }
  if (argc > 6) expect.max_events = std::strtoull(argv[6], nullptr, 10);
  if (const char* tolerance = std::getenv("PERFETTO_ALIGNMENT_US"))
    expect.alignment_tolerance_us = std::atof(tolerance);
  const auto check = commtap::test::check_perfetto(trace, expect);
  std::printf(
      "slices %llu flows %llu instants %llu aligned_instances %llu worst_us %.1f "
      "keep_one_in %llu first_us %.3f last_us %.3f\n",
      static_cast<unsigned long long>(check.slices), static_cast<unsigned long long>(check.flows),
      static_cast<unsigned long long>(check.instants),
      static_cast<unsigned long long>(check.aligned_instances), check.worst_misalignment_us,
      static_cast<unsigned long long>(
          trace.value("otherData", nlohmann::json::object()).value("keep_one_in", 0)),
      check.first_us, check.last_us);
  if (!check.problem.empty()) {
    std::fprintf(stderr, "perfetto_check: %s\n", check.problem.c_str());
    return 1;
  }
  return 0;
}
