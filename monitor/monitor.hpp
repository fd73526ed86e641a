// monitor: what commtap records about a rank and how it reaches the trace database.
//
// The hot path touches only CallCounters::local() (one thread-local pointer) and the clock;
// everything that allocates, locks or does I/O happens at init, at thread exit or at the end.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "monitor/trace_schema.hpp"

namespace commtap::monitor {

// CLOCK_MONOTONIC in nanoseconds. Read through clock_gettime (the vDSO, about 25 ns here) until
// use_fast_clock() and the first refine_fast_clock() that has a long enough baseline; from then
// on, where the kernel itself keeps CLOCK_MONOTONIC on an invariant, synchronized time-stamp
// counter, from that counter (about 10 ns) converted with a rate measured against
// CLOCK_MONOTONIC over the whole run and re-anchored by every refine: readings stay within tens
// of nanoseconds of clock_gettime's, so ranks agree as they would with clock_gettime. (A rate
// calibrated once per process differs between processes by parts in 1e5: tens of milliseconds
// per hour between ranks.) Readings can step back by a few nanoseconds at the switch: take
// durations with elapsed_ns().
[[gnu::always_inline]] inline std::uint64_t now_ns() noexcept;
// Later minus earlier, 0 if the clock stepped back in between.
inline std::uint64_t elapsed_ns(std::uint64_t earlier, std::uint64_t later) noexcept {
  return later > earlier ? later - earlier : 0;
}
// Shifts now_ns() by `ns`: lets a test make the ranks of one host disagree like hosts do.
void skew_clock_for_tests(std::int64_t ns) noexcept;
// Takes the first anchor of the counter clock if this machine has a usable one; returns whether
// it has. Until then, and on machines without, now_ns() is clock_gettime.
bool use_fast_clock() noexcept;
// Called periodically (by the trace writer, once per window): re-measures the counter's rate
// against CLOCK_MONOTONIC and, once the baseline is at least 100 ms, switches now_ns() to the
// counter, slewing away any difference over the next `horizon_ns`. Not thread safe: one caller.
void refine_fast_clock(std::uint64_t horizon_ns) noexcept;
// Whether now_ns() reads the counter now (for tests and the database's facts).
bool fast_clock_active() noexcept;

// One clock exchange with the reference rank: this rank's now_ns() when it sent the request and
// when the reply arrived, and the reference's now_ns() when it answered.
struct ClockSample {
  std::uint64_t sent_ns = 0;
  std::uint64_t reference_ns = 0;
  std::uint64_t received_ns = 0;
};
// The estimate from the exchange with the shortest round trip (Cristian's method).
ClockOffset estimate_offset(const std::vector<ClockSample>& samples);

// Wall-clock nanoseconds since the epoch, for the database's start/end stamps.
std::uint64_t wall_ns() noexcept;

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
};

struct ActivitySnapshot {
  std::uint32_t function = 0;
  std::int64_t comm_handle = 0;
  std::int64_t comm_id = 0;  // filled by the collector from comm_handle; 0 if none or unknown
  std::uint64_t seq = 0;
  std::uint64_t since_ns = 0;
};

// Where the application called MPI: the frames above the MPI (or NCCL) library, innermost first.
struct CallSite {
  struct Frame {
    std::uint64_t address = 0;
    std::string module;  // the executable or shared object
    std::string symbol;  // the enclosing function ("" if unknown)
    std::uint64_t symbol_offset = 0;
    std::string file;  // source file of the call, from the debug information ("" if unknown)
    int line = 0;      // its line (0 if unknown)
  };
  std::uint32_t id = 0;  // rank-local: compare ranks by frames, not by id
  std::vector<Frame> frames;
};

// Fills in file and line of every frame whose module has line information (DWARF, also from a
// separate debug file), reading this process's own modules. Off the hot path: the writer thread
// calls it for each window's new sites.
void resolve_source_lines(std::vector<CallSite>& sites);

// Call-site capture: the hot path looks a return address up in a per-thread cache; the stack is
// unwound (libunwind) once per distinct call site. Calls that reach MPI through a binding inside
// the MPI library (Fortran) are keyed by the first return address outside it.
class CallSites {
 public:
  static constexpr std::size_t kDepth = 8;
  CallSites();
  ~CallSites();
  // The site id (1, 2, ...) of a call whose wrapper returns to `return_address`.
  std::uint32_t site_of(const void* return_address);
  // The sites found since `cursor` (a count the caller keeps), for the writer.
  std::vector<CallSite> since(std::size_t& cursor) const;

 private:
  struct Shared;
  static CallSite unwind(std::uint32_t id);
  std::unique_ptr<Shared> shared_;
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

  // This thread's slots. Cheap after the first call on a thread.
  CallStats* local();
  // This thread's activity record (attached together with its slots).
  Activity* local_activity();
  // The threads that are inside a recorded call now.
  std::vector<ActivitySnapshot> busy() const;
  // Queues a collective instance or transfer on this thread's ring (made on first use).
  void record(const InstanceRecord& record);
  // Writer side: takes every queued record; returns the total dropped so far.
  std::uint64_t drain(std::vector<InstanceRecord>& out);
  // Adds one call of `ns` nanoseconds to this thread's aggregate for `key` (a per-thread hash
  // table, made on first use; keys beyond its capacity are counted as dropped).
  void aggregate(const AggregateKey& key, std::uint64_t ns);
  // Writer side: closes the current window and appends its aggregates (summed per key over
  // threads); returns the calls dropped so far for lack of room.
  std::uint64_t close_window(std::vector<AggregateRow>& out);
  // Sum over live and exited threads. Safe to call while other threads record.
  std::vector<CallTotals> totals() const;
  std::size_t functions() const { return functions_; }

  struct Registry;  // defined in call_counters.cpp

 private:
  void attach_thread();
  // The window calls are aggregated into now; close_window() advances it.
  std::atomic<std::uint64_t> window_{1};
  std::size_t functions_;
  std::uint64_t serial_;
  std::shared_ptr<Registry> registry_;
};

// Facts about one rank, written once per rank database.
struct RankFacts {
  std::string job_id;
  int rank = 0;
  int world_size = 1;
  std::string host;
  int node = 0;                 // index of the rank's node (shared-memory domain), 0..nodes-1
  int local_rank = 0;           // rank within the node
  bool group_readable = false;  // create the file 0640 instead of 0600
  long pid = 0;
  std::string mpi_library;
  std::string command_line;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::string ended_by;  // "finalize", "abort", "exit"
  ClockOffset clock;     // this rank's monotonic clock -> rank 0's, estimated at MPI_Init
};

// A communicator this rank belonged to. `id` is equal on every member rank (see
// interpose/communicators.hpp for how it is agreed).
struct CommunicatorRow {
  std::int64_t id = 0;
  std::int64_t parent_id = 0;  // 0 for MPI_COMM_WORLD and MPI_COMM_SELF
  std::string created_by;      // "MPI_COMM_WORLD", "MPI_COMM_SELF", "MPI_Comm_split", ...
  int size = 0;
  int comm_rank = 0;
  bool inter = false;
  std::string members;  // world ranks, comma-separated; only in the row of the comm's rank 0
};

struct FunctionRow {
  std::string function;
  std::string family;
  CallTotals totals;
};

// What the writer records at every window, collected from the interposer on the writer thread.
struct Snapshot {
  std::vector<FunctionRow> functions;
  std::vector<CallSite> new_sites;        // found since the last window
  std::vector<InstanceRecord> instances;  // collective instances and transfers
  std::uint64_t instances_dropped = 0;    // since start
  std::vector<AggregateRow> aggregates;   // of the window that closes now
  std::uint64_t aggregates_dropped = 0;   // since start
  std::vector<CommunicatorRow> communicators;
  std::vector<CommProgress> progress;  // every communicator's (rows that did not change since
                                       // the last window are not written again)
  std::vector<ClockEstimate> clock_estimates;  // made since the last window
  std::vector<ActivitySnapshot> busy;          // threads inside a recorded call
  std::vector<std::string> function_names;     // to name function indexes
  std::vector<std::string> algorithm_names;    // to name InstanceRecord::algorithm; empty: all
                                               // 'native'
  std::uint64_t writer_ns = 0;                 // the writer thread's CPU time so far
  std::vector<std::string> gpus;               // GPUs in use so far (empty: none, or unchanged)
  // For synthetic databases: the window's CLOCK_REALTIME stamp and how this rank's now_ns()
  // maps to it. 0: now, and the writer's own mapping.
  std::uint64_t wall_ns = 0;
  std::int64_t wall_minus_monotonic_ns = 0;
};

// One rank's trace database, written by a background thread: created at start (WAL mode,
// readable by the user only), then every `interval_ns` one transaction with the call totals,
// the communicators, a heartbeat row and the rank's end time so far. A reader (commtap query)
// can open it at any time, also while the job runs. After a crash at most one window is lost.
class TraceWriter {
 public:
  using Collect = std::function<Snapshot()>;

  // Creates `path` (replacing an old file) and starts the thread. On failure returns nullptr
  // and sets `error`; nothing is left running.
  static std::unique_ptr<TraceWriter> start(
      const std::string& path, const RankFacts& facts,
      const std::vector<std::pair<std::string, std::string>>& settings, std::uint64_t interval_ns,
      Collect collect, std::string& error);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Writes a last window and the end facts (end_ns, ended_by), stops the thread and closes the
  // file. Returns an empty string or an error not reported yet (the writer thread reports the
  // error that stops it on stderr when it happens). Idempotent.
  std::string stop(const RankFacts& facts);

  // For a fatal-signal handler (async-signal-safe): asks the writer thread to write a last
  // window, ended by the signal's name, and close the file; waits up to `timeout_ms` for it.
  // Returns whether it finished in time.
  bool flush_for_signal(int signal_number, int timeout_ms) noexcept;

  struct State;

 private:
  explicit TraceWriter(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Writes a complete rank database in one go (start, one transaction per snapshot, end): for
// tests and tools that make synthetic databases through the same code as the library.
std::string write_rank_database(const std::string& path, const RankFacts& facts,
                                const std::vector<std::pair<std::string, std::string>>& settings,
                                const std::vector<Snapshot>& windows);

}  // namespace commtap::monitor

#include "monitor/clock_inline.hpp"  // now_ns(): inlined into every wrapper
