#include <time.h>

#include "monitor/monitor.hpp"

namespace commtap::monitor {

namespace {
std::uint64_t read(clockid_t id) noexcept {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}
}  // namespace

std::uint64_t now_ns() noexcept { return read(CLOCK_MONOTONIC); }
std::uint64_t wall_ns() noexcept { return read(CLOCK_REALTIME); }

}  // namespace commtap::monitor
