#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <atomic>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
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

// The time-stamp counter, scaled to CLOCK_MONOTONIC nanoseconds. A read costs a few ns where
// clock_gettime costs ~20 ns even through the vDSO, and the hot path reads the clock twice per
// call. Used only when the CPU says the counter runs at a constant rate through sleep states
// (constant_tsc and nonstop_tsc), which is also what lets it be compared across cores.
struct TscClock {
  std::atomic<bool> enabled{false};
  std::uint64_t base_ticks = 0;
  std::uint64_t base_ns = 0;
  double ns_per_tick = 0.0;
};
TscClock tsc;

bool invariant_tsc() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line);
    bool constant = false, nonstop = false;
    for (std::string word; words >> word;) {
      constant |= word == "constant_tsc";
      nonstop |= word == "nonstop_tsc";
    }
    return constant && nonstop;
  }
  return false;
}

}  // namespace

// Added to every reading; 0 except in tests that simulate hosts whose clocks disagree.
std::atomic<std::int64_t> skew_ns{0};

std::uint64_t now_ns() noexcept {
  const std::uint64_t skew = static_cast<std::uint64_t>(skew_ns.load(std::memory_order_relaxed));
  if (tsc.enabled.load(std::memory_order_relaxed)) {
    const std::uint64_t ticks = __rdtsc();
    return skew + tsc.base_ns +
           static_cast<std::uint64_t>(static_cast<double>(ticks - tsc.base_ticks) *
                                      tsc.ns_per_tick);
  }
  return skew + read(CLOCK_MONOTONIC);
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

bool use_fast_clock(std::uint64_t calibration_ns) noexcept {
  if (tsc.enabled.load(std::memory_order_acquire)) return true;
  if (!invariant_tsc()) return false;
  const std::uint64_t start_ns = read(CLOCK_MONOTONIC);
  const std::uint64_t start_ticks = __rdtsc();
  std::uint64_t end_ns = start_ns;
  while (end_ns - start_ns < calibration_ns) end_ns = read(CLOCK_MONOTONIC);
  const std::uint64_t end_ticks = __rdtsc();
  if (end_ticks <= start_ticks) return false;
  tsc.ns_per_tick =
      static_cast<double>(end_ns - start_ns) / static_cast<double>(end_ticks - start_ticks);
  tsc.base_ticks = end_ticks;
  tsc.base_ns = end_ns;
  tsc.enabled.store(true, std::memory_order_release);
  return true;
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
