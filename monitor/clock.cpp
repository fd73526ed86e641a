#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <string>

#include "monitor/monitor.hpp"

namespace commtap::monitor {

namespace {

std::uint64_t read(clockid_t id) noexcept {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// Added to every reading; 0 except in tests that simulate hosts whose clocks disagree.
std::atomic<std::int64_t> skew_ns{0};

}  // namespace

std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(skew_ns.load(std::memory_order_relaxed)) +
         read(CLOCK_MONOTONIC);
}

void skew_clock_for_tests(std::int64_t ns) noexcept {
  skew_ns.store(ns, std::memory_order_relaxed);
}

ClockOffset estimate_offset(const std::vector<ClockSample>& samples) {
  // Cristian's method: the reference read its clock somewhere inside [sent, received]; the
  // exchange with the shortest round trip bounds that best.
  ClockOffset best;
  for (const ClockSample& s : samples) {
    if (s.received_ns < s.sent_ns) continue;
    const std::uint64_t half_round_trip = (s.received_ns - s.sent_ns) / 2;
    if (best.error_ns >= 0 && half_round_trip >= static_cast<std::uint64_t>(best.error_ns))
      continue;
    const std::int64_t midpoint = static_cast<std::int64_t>(s.sent_ns + half_round_trip);
    best.offset_ns = static_cast<std::int64_t>(s.reference_ns) - midpoint;
    best.error_ns = static_cast<std::int64_t>(half_round_trip);
  }
  return best;
}

std::uint64_t wall_ns() noexcept {
  return read(CLOCK_REALTIME);
}

std::string choose_job_id(const std::string& explicit_id) {
  std::string id = explicit_id;
  for (const char* variable : {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID"}) {
    if (!id.empty()) break;
    if (const char* value = std::getenv(variable); value && *value) id = value;
  }
  if (id.empty()) {
    char stamp[32] = {};
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
    id = std::string(stamp) + "-" + std::to_string(::getpid());
  }
  for (char& c : id)
    if (c == '/' || c == ' ') c = '_';
  return id;
}

}  // namespace commtap::monitor
