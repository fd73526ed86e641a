// monitor/trace_writer: the rank's trace database, written by a thread of its own every window.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "monitor/call_counters.hpp"
#include "monitor/call_sites.hpp"
#include "monitor/clock.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::monitor {

// Facts about one rank, written once per rank database.
struct RankFacts {
  std::string job_id;
  int rank = 0;
  int world_size = 1;
  std::string host;
  int node = 0;                 // index of the rank's node (shared-memory domain), 0..nodes-1
  int local_rank = 0;           // rank within the node
  bool group_readable = false;  // create the file 0640 instead of 0600
  // COMMTAP_STALL_TICK: the writer's wakeups between windows that measure stalls (0: none, and
  // Snapshot::stalled_ns is not written).
  std::uint64_t stall_tick_ns = 50'000'000;
  long pid = 0;
  std::string mpi_library;
  std::string command_line;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::string ended_by;  // "finalize", "abort", "exit", "mpi_error"
  ClockOffset clock;     // this rank's monotonic clock -> rank 0's, estimated at MPI_Init
  // The fatal MPI error that ended the rank (ended_by "mpi_error"): the function in progress,
  // its communicator, its peer as a world rank (-1: none, or not one rank), the error's class
  // by name ("MPI_ERR_OTHER") and MPI's text.
  struct Error {
    std::string function;
    std::int64_t comm_id = 0;
    int peer = -1;
    std::string error_class;
    std::string text;
  } error;
};

// A communicator this rank belonged to. `id` is equal on every member rank (see
// world/communicators.hpp for how it is agreed).
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
  std::vector<ProbeRow> probes;                // measured since the last window
  std::vector<TcpLinkRow> tcp_links;           // TCP connections whose counters changed
  std::vector<ActivitySnapshot> busy;          // threads inside a recorded call
  std::vector<std::string> function_names;     // to name function indexes
  std::vector<std::string> algorithm_names;    // to name InstanceRecord::algorithm; empty: all
                                               // 'native'
  std::uint64_t writer_ns = 0;                 // the writer thread's CPU time so far
  // Time the process was held off the CPU so far (stopped, throttled, or queued behind other
  // work), estimated by the writer's ticks (COMMTAP_STALL_TICK): each that woke at least 2 ms
  // late counts the larger of its lateness and its wait. Not written when !stalls_measured
  // (ticks off).
  std::uint64_t stalled_ns = 0;
  bool stalls_measured = true;
  // Of that, time the process's cgroup CPU limit held it throttled so far (CgroupCpuLimit); none
  // where no group counts it.
  std::optional<std::uint64_t> throttled_ns;
  // Time commtap's own measurements took outside the program's MPI calls so far (link-probe
  // rounds and decisions, clock estimates, asynchronous probes served at a call's entry): not
  // the program's work, though the rank spends it between its calls.
  std::uint64_t measuring_ns = 0;
  std::vector<std::string> gpus;  // GPUs in use so far (empty: none, or unchanged)
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
  //
  // With a `local_path` (the snapshot layout, for trace directories on filesystems shared
  // between hosts, see monitor/shared_fs.hpp), the writer works on `local_path` instead and
  // publishes complete copies to `path` by an atomic rename: at start, after windows (no more
  // often than ten times the last copy's duration) and at the end, when the working copy is
  // removed. Published files are plain rollback-journal databases that no one writes after their
  // rename: readers on any host can open them without locks or a -shm.
  static std::unique_ptr<TraceWriter> start(
      const std::string& path, const RankFacts& facts,
      const std::vector<std::pair<std::string, std::string>>& settings, std::uint64_t interval_ns,
      Collect collect, std::string& error, const std::string& local_path = "");
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
// The same with `windows` windows made one at a time by `window(i)`: synthetic hours of a busy
// rank without holding them all in memory.
std::string write_rank_database(const std::string& path, const RankFacts& facts,
                                const std::vector<std::pair<std::string, std::string>>& settings,
                                std::size_t windows,
                                const std::function<Snapshot(std::size_t)>& window);

// Publishes a consistent copy of the database at `source` over `target` the way the snapshot
// layout does (a copy to `target`.tmp, marked as a rollback-journal file, synced, renamed), with
// the file mode 0600, or 0640 if `group_readable`. Returns an empty string or what went wrong. For
// tools and bench/publish.
std::string publish_copy(const std::string& source, const std::string& target, bool group_readable);

}  // namespace commtap::monitor
