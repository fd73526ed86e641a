// monitor/call_counters: the hot path's per-thread statistics, activity and record rings.
//
// The hot path touches only its thread's cached pointers (CallCounters::ThreadCache, part of the
// thread's monitor::ThreadState) and the clock; everything that allocates or locks happens at
// thread start and exit or on the writer thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "monitor/trace_schema.hpp"

namespace commtap::monitor {

// Per-function statistics of one thread. Each field has exactly one writer (its thread), so
// relaxed load+store compiles to a plain add while still being data-race free for the reader
// that sums all threads at the end.
struct CallStats {
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> time_ns{0};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> completions{0};
  std::atomic<std::uint64_t> completion_ns{0};
};

inline void bump(std::atomic<std::uint64_t>& field, std::uint64_t by) noexcept {
  field.store(field.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// What one thread is doing right now, for the heartbeat: written by its thread at the entry and
// exit of each recorded call (relaxed stores), read by the writer thread.
struct Activity {
  std::atomic<std::uint32_t> function{0};  // 0: not inside a recorded call; else index + 1
  std::atomic<std::int64_t> comm_handle{
      0};  // the MPI_Comm handle's value, resolved off the hot path
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::uint64_t> since_ns{0};  // now_ns() at entry
  // The call's peer or root, as a rank of its communicator (MPI_ANY_SOURCE, MPI_PROC_NULL as
  // they are; kNoPeer: none). Read only by the fatal error handler, on this thread.
  static constexpr int kNoPeer = std::numeric_limits<int>::min();
  std::atomic<int> peer{kNoPeer};
};

struct ActivitySnapshot {
  std::uint32_t function = 0;
  std::int64_t comm_handle = 0;
  std::int64_t comm_id = 0;  // filled by the collector from comm_handle; 0 if none or unknown
  std::uint64_t seq = 0;
  std::uint64_t since_ns = 0;
};

// What a record stands for.
enum class RecordKind : std::uint8_t {
  collective,  // one sampled collective instance
  send,        // one sampled point-to-point message, as its sender saw it
  recv,        // ... and as its receiver saw it
};

// One recorded collective instance or point-to-point transfer. Times are now_ns() of this host
// (CLOCK_MONOTONIC scale).
struct InstanceRecord {
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0;  // collective: sequence number on the communicator; transfer: message
                          // number of the (communicator, sender, receiver, tag) pair
  std::uint64_t bytes = 0;
  std::uint64_t enter_ns = 0;  // entry of the blocking call, or the post of a nonblocking one
  std::uint64_t exit_ns = 0;   // return of the blocking call, or the completing call's return;
                               // 0: not known (NCCL: completion happens later on the stream)
  std::uint32_t function = 0;  // index into the function table
  std::int32_t root = -1;      // collective: root (-1 when none); transfer: peer's world rank
  std::uint32_t site = 0;      // CallSites id; 0 if unknown
  std::int32_t tag = 0;        // transfers only
  RecordKind kind = RecordKind::collective;
  std::uint8_t algorithm = 0;  // collectives: index into Snapshot::algorithm_names; 0: the
                               // library's own
  // Received transfers: the last moment the receive was seen not yet done (transfers.
  // seen_pending_ns; monitor/schema.sql says what it bounds); 0: not known.
  std::uint64_t seen_pending_ns = 0;
};

// Size classes for the per-window aggregates: the byte count rounded down to three significant
// bits (0..7 exactly, then 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ...), so that a class spans at
// most 25% and calls of one size always share a class.
constexpr std::uint64_t size_bucket(std::uint64_t bytes) noexcept {
  if (bytes < 8) return bytes;
  const int shift = 63 - __builtin_clzll(bytes) - 2;
  return (bytes >> shift) << shift;
}

// What the aggregates are keyed by (besides the window).
struct AggregateKey {
  std::int64_t comm_id = 0;
  std::uint32_t function = 0;  // index into the function table
  std::uint32_t site = 0;      // CallSites id; 0 if unknown
  std::uint64_t bucket = 0;    // size_bucket(bytes)
  bool operator==(const AggregateKey&) const = default;
};

// One window's aggregate of the calls with one key.
struct AggregateRow {
  AggregateKey key;
  std::uint64_t calls = 0, total_ns = 0, min_ns = 0, max_ns = 0;
};

// A bounded single-producer (the thread) single-consumer (the writer) queue of records. When
// full, records are dropped and counted: the application is never blocked.
class RecordRing {
 public:
  static constexpr std::size_t kCapacity = 8192;
  bool push(const InstanceRecord& record) noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) == kCapacity) {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return false;
    }
    slots_[head % kCapacity] = record;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  // Consumer side: appends everything queued to `out`.
  void drain(std::vector<InstanceRecord>& out) {
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    for (; tail != head; ++tail) out.push_back(slots_[tail % kCapacity]);
    tail_.store(tail, std::memory_order_release);
  }
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  std::array<InstanceRecord, kCapacity> slots_{};
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  std::atomic<std::uint64_t> dropped_{0};
};

struct AggregateTable;  // one thread's aggregates (call_counters.cpp)

// A plain snapshot of CallStats, summed over threads.
struct CallTotals {
  std::uint64_t calls = 0, time_ns = 0, bytes = 0, completions = 0, completion_ns = 0;
};

// Per-thread arrays of CallStats, one slot per intercepted function. A thread's array is made
// (or recycled from an exited thread) on its first recorded call; totals() sums all arrays.
class CallCounters {
 public:
  explicit CallCounters(std::size_t functions);
  ~CallCounters();
  CallCounters(const CallCounters&) = delete;
  CallCounters& operator=(const CallCounters&) = delete;

  // What a thread caches of the counters it last attached to (its monitor::ThreadState's
  // `counters`, thread_state.hpp). The overloads that take it touch no thread-local: the hot
  // path fetches the thread's block once per call and passes it down; those without it fetch
  // it themselves.
  struct ThreadCache {
    std::uint64_t serial = 0;  // of the CallCounters the pointers belong to; 0: none yet
    CallStats* slots = nullptr;
    Activity* activity = nullptr;
    std::atomic<RecordRing*>* ring = nullptr;
    std::atomic<AggregateTable*>* aggregates = nullptr;
  };

  // This thread's slots (attached on its first call: its activity record with them).
  [[gnu::always_inline]] CallStats* local(ThreadCache& cache) {
    if (cache.serial != serial_) [[unlikely]]
      attach_thread(cache);
    return cache.slots;
  }
  CallStats* local();
  // This thread's activity record (attached together with its slots).
  [[gnu::always_inline]] Activity* local_activity(ThreadCache& cache) {
    if (cache.serial != serial_) [[unlikely]]
      attach_thread(cache);
    return cache.activity;
  }
  Activity* local_activity();
  // The threads that are inside a recorded call now.
  std::vector<ActivitySnapshot> busy() const;
  // Queues a collective instance or transfer on this thread's ring (made on first use).
  void record(const InstanceRecord& record, ThreadCache& cache);
  void record(const InstanceRecord& record);
  // Writer side: takes every queued record; returns the total dropped so far.
  std::uint64_t drain(std::vector<InstanceRecord>& out);
  // Adds one call of `ns` nanoseconds to this thread's aggregate for `key` (a per-thread hash
  // table, made on first use; keys beyond its capacity are counted as dropped).
  void aggregate(const AggregateKey& key, std::uint64_t ns, ThreadCache& cache);
  void aggregate(const AggregateKey& key, std::uint64_t ns);
  // Writer side: closes the current window and appends its aggregates (summed per key over
  // threads); returns the calls dropped so far for lack of room.
  std::uint64_t close_window(std::vector<AggregateRow>& out);
  // Sum over live and exited threads. Safe to call while other threads record.
  std::vector<CallTotals> totals() const;
  std::size_t functions() const { return functions_; }

  struct Registry;  // defined in call_counters.cpp

 private:
  [[gnu::noinline]] void attach_thread(ThreadCache& cache);
  // The window calls are aggregated into now; close_window() advances it.
  std::atomic<std::uint64_t> window_{1};
  std::size_t functions_;
  std::uint64_t serial_;
  std::shared_ptr<Registry> registry_;
};

}  // namespace commtap::monitor
