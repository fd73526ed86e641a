// The profiler events' sink for unit tests: a clock the test sets and the records kept in memory,
// so a test drives NCCL's calls at chosen times and reads back what commtap would have written.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "interpose/function_table.hpp"
#include "monitor/call_counters.hpp"
#include "nccl/profiler_events.hpp"

namespace commtap::nccl::test {

inline std::atomic<std::uint64_t> g_now{1};
inline std::mutex g_records_mutex;
inline std::vector<monitor::InstanceRecord> g_records;

inline std::uint64_t fake_now() noexcept {
  return g_now.load();
}

inline void keep(const monitor::InstanceRecord& r) noexcept {
  std::lock_guard lock(g_records_mutex);
  g_records.push_back(r);
}

// The records of one kind, in the order they were written.
inline std::vector<monitor::InstanceRecord> records(monitor::RecordKind kind) {
  std::lock_guard lock(g_records_mutex);
  std::vector<monitor::InstanceRecord> out;
  for (const monitor::InstanceRecord& r : g_records)
    if (r.kind == kind) out.push_back(r);
  return out;
}

// The record's function number of an NCCL function, as interpose numbers them.
inline std::uint32_t function_number(interpose::Fn f) {
  return static_cast<std::uint32_t>(interpose::index_of(f));
}

// A fresh sink on the fake clock, set to `now`, with no records.
inline void start_recording(std::uint64_t now) {
  profiler::set_sink({fake_now, keep, nullptr, interpose::kNcclFunctionBase});
  g_now = now;
  std::lock_guard lock(g_records_mutex);
  g_records.clear();
}

}  // namespace commtap::nccl::test
