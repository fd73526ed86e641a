// The writer thread: a window every interval, the final one at stop, signals and shared
// filesystems' snapshots (trace_writer.hpp).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "monitor/cgroup_cpu.hpp"
#include "monitor/clock.hpp"
#include "monitor/rank_database.hpp"
#include "monitor/shared_fs.hpp"
#include "monitor/trace_writer.hpp"

namespace commtap::monitor {

namespace {

// ranks.ended_by of a rank a signal ended: the stops a batch system or a user sends, and the
// crashes (docs/schema.md).
const char* signal_name(int number) {
  switch (number) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    default:
      return "signal";
  }
}

}  // namespace

struct TraceWriter::State {
  RankDatabase database;
  Collect collect;
  std::uint64_t interval_ns;
  // The writer thread sleeps in poll() on `wake`, so that a signal handler can wake it with an
  // async-signal-safe write(): 'S' from stop(), 'K' from flush_for_signal(), which then waits
  // for the byte the writer puts on `done` once the file is closed.
  int wake[2] = {-1, -1};
  int done[2] = {-1, -1};
  std::atomic<int> signal{0};
  std::atomic<bool> stopped{false};
  bool failed = false;  // the error was reported: stop() returns no error for it again
  std::atomic<std::uint64_t> writer_cpu_ns{0};
  std::uint64_t stalled_ns = 0;  // the writer thread's own: see Snapshot::stalled_ns
  CgroupCpuLimit cpu_limit;      // Snapshot::throttled_ns
  std::uint64_t tick_ns;         // RankFacts::stall_tick_ns (0: no ticks)
  static constexpr std::uint64_t kStallGraceNs = 2'000'000;
  std::string path;  // the file readers open
  int rank = 0;
  std::string final_ended_by;    // set by stop() before it wakes the thread
  RankFacts::Error final_error;  // likewise
  std::thread thread;

  // The snapshot layout (shared filesystems): the writer works on `local_path` and publishes
  // copies to `path`. Empty: `path` itself is written.
  std::string local_path;
  PrivateDirectory trace_directory;  // where snapshots are published (only with a local_path)
  mode_t mode;
  // A copy of a large file costs real time on the writer thread and on the network: a snapshot
  // is published only when at least kPublishCostFactor times the last one's duration has passed
  // since it began, so publishing takes at most a tenth of the writer's time.
  static constexpr std::uint64_t kPublishCostFactor = 10;
  std::uint64_t last_publish_began_ns = 0;
  std::uint64_t last_publish_cost_ns = 0;
  bool publish_error_said = false;

  State(const std::string& p, const std::string& local, const RankFacts& facts, Collect c,
        std::uint64_t interval)
      : database(local.empty() ? p : local, facts, local.empty() ? own_directory(p, facts) : true),
        collect(std::move(c)),
        interval_ns(interval),
        tick_ns(facts.stall_tick_ns),
        path(p),
        rank(facts.rank),
        local_path(local),
        mode(facts.group_readable ? 0640 : 0600) {
    if (local_path.empty()) return;
    database.set_meta("layout", "snapshot");
    trace_directory =
        PrivateDirectory(split_path(path).first, own_directory(path, facts), facts.group_readable);
  }

  // Whether the directory of `file` is the job's default one, commtap-<job id>, which this job
  // made: then it is made private (0700, or 0750 with group read) if it is not. A directory the
  // user named (COMMTAP_DIR) keeps its mode; it must only not be writable by others.
  static bool own_directory(const std::string& file, const RankFacts& facts) {
    return split_path(split_path(file).first).second == "commtap-" + facts.job_id;
  }

  // The working copy and its private directory (local_copy_path's), after a last publish or a
  // failed start.
  static void remove_working_copy(const std::string& local) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((local + suffix).c_str());
    const auto [directory, name] = split_path(local);
    if (split_path(directory).second.rfind("commtap-", 0) == 0) ::rmdir(directory.c_str());
  }

  static std::uint64_t steady_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }

  // Publishes a snapshot if the layout asks for one and its time has come (always when `now`).
  // A failure is said once; the next window tries again (a network filesystem may come back).
  void publish(bool now) {
    if (local_path.empty()) return;
    const std::uint64_t began = steady_ns();
    if (!now && last_publish_began_ns != 0 &&
        began - last_publish_began_ns < kPublishCostFactor * last_publish_cost_ns)
      return;
    const std::string error =
        publish_snapshot(database.handle(), trace_directory, split_path(path).second, mode);
    last_publish_began_ns = began;
    last_publish_cost_ns = steady_ns() - began;
    database.set_meta("publish_ns", std::to_string(last_publish_cost_ns));
    if (error.empty() || publish_error_said) return;
    publish_error_said = true;
    std::fprintf(stderr,
                 "commtap: rank %d cannot publish its trace (%s); it tries again every window, "
                 "the working copy is %s\n",
                 rank, error.c_str(), local_path.c_str());
  }

  // The last window, then the file closed; in the snapshot layout a last snapshot published and
  // the working copy removed, unless that snapshot failed: then the working copy is the trace.
  void finish(const std::string& ended_by) {
    if (ended_by == "mpi_error") database.set_error(final_error);
    window(ended_by, false);
    if (local_path.empty()) {
      database.close();
      return;
    }
    database.leave_wal();
    const std::string error =
        publish_snapshot(database.handle(), trace_directory, split_path(path).second, mode);
    database.close();
    if (error.empty()) {
      remove_working_copy(local_path);
      return;
    }
    std::fprintf(stderr,
                 "commtap: rank %d could not publish its last window (%s); its trace stays in "
                 "%s\n",
                 rank, error.c_str(), local_path.c_str());
  }

  void measure_writer_cpu() {
    timespec cpu{};
    if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
      writer_cpu_ns.store(static_cast<std::uint64_t>(cpu.tv_sec) * 1'000'000'000u +
                              static_cast<std::uint64_t>(cpu.tv_nsec),
                          std::memory_order_relaxed);
  }
  ~State() {
    for (int fd : {wake[0], wake[1], done[0], done[1]})
      if (fd >= 0) ::close(fd);
  }

  void window(const std::string& ended_by, bool may_publish = true) {
    if (failed) return;
    Snapshot snapshot = collect();
    snapshot.writer_ns = writer_cpu_ns.load(std::memory_order_relaxed);
    if (snapshot.stalled_ns == 0) snapshot.stalled_ns = stalled_ns;
    if (!snapshot.throttled_ns) snapshot.throttled_ns = cpu_limit.throttled_ns();
    if (tick_ns == 0) snapshot.stalls_measured = false;
    if (database.write_window(snapshot, ended_by)) {
      if (may_publish) publish(false);
    } else {
      // A full disk or a vanished directory: say so once, now, and stop writing. The job goes
      // on; the file keeps the windows committed before (in the snapshot layout the file that
      // failed is the working copy, whose committed windows are still published at the end).
      failed = true;
      std::fprintf(stderr,
                   "commtap: rank %d stopped writing %s: %s; monitoring is off for this rank, "
                   "the job goes on\n",
                   rank, local_path.empty() ? path.c_str() : local_path.c_str(),
                   database.error().c_str());
    }
  }

  // Between windows the thread wakes every tick_ns; a wakeup at least kStallGraceNs late adds
  // the larger of its lateness and its wait to `stalled_ns`. A process stopped, throttled by its
  // cgroup or queued behind other work on its cores wakes late; the analyzer compares ranks'
  // shares, so a host whose CPU is taken away is told from one whose network is slow (its
  // messages arrive late either way). Counting a late tick's whole wait makes the share an
  // estimate of the time held off whatever the tick: stalls shorter than a tick catch a share of
  // the deadlines equal to the share of time they cover, and a long one counts its lateness.
  // Wakeups cost CPU (about 50 us each on this project's VMs, docs/benchmarks.md), hence the
  // default of 50 ms.
  void run() {
    std::uint64_t next_window = steady_ns() + interval_ns;
    for (;;) {
      pollfd readable{wake[0], POLLIN, 0};
      const std::uint64_t before = steady_ns();
      const std::uint64_t until_window = next_window > before ? next_window - before : 0;
      const std::uint64_t wait_ns = tick_ns > 0 ? std::min(tick_ns, until_window) : until_window;
      const timespec timeout{static_cast<time_t>(wait_ns / 1'000'000'000u),
                             static_cast<long>(wait_ns % 1'000'000'000u)};
      const int ready = ::ppoll(&readable, 1, &timeout, nullptr);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        const std::uint64_t late = steady_ns() - before - wait_ns;
        if (static_cast<std::int64_t>(late) >= static_cast<std::int64_t>(kStallGraceNs))
          stalled_ns += std::max(late, wait_ns);
        if (steady_ns() < next_window) continue;
        refine_fast_clock(interval_ns);
        window("running");
        measure_writer_cpu();
        next_window = steady_ns() + interval_ns;
        continue;
      }
      char command = 0;
      if (::read(wake[0], &command, 1) != 1) continue;
      if (command == 'S') {
        // stop(): the last window and the close happen here too, so that every write of the
        // database is made by this thread, which blocks all signals: a file size limit then
        // fails the write (EFBIG) instead of killing the process with SIGXFSZ.
        finish(final_ended_by);
        return;
      }
      if (command == 'K') {
        // A fatal signal: last window, close, tell the handler; the process is about to die.
        const int number = signal.load();
        finish(signal_name(number));
        stopped.store(true);
        const char byte = 'D';
        [[maybe_unused]] auto ignored = ::write(done[1], &byte, 1);
        return;
      }
    }
  }
};

TraceWriter::TraceWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}

std::unique_ptr<TraceWriter> TraceWriter::start(
    const std::string& path, const RankFacts& facts,
    const std::vector<std::pair<std::string, std::string>>& settings, std::uint64_t interval_ns,
    Collect collect, std::string& error, const std::string& local_path) {
  auto state = std::make_unique<State>(path, local_path, facts, std::move(collect), interval_ns);
  // A failed start leaves no working copy behind (the caller then writes in place).
  auto discard_working_copy = [&] {
    state.reset();
    if (!local_path.empty()) State::remove_working_copy(local_path);
  };
  if (!local_path.empty() && !state->trace_directory.ok()) {
    error = state->trace_directory.problem();
    discard_working_copy();
    return nullptr;
  }
  if (!state->database.write_start(settings)) {
    error = state->database.error();
    discard_working_copy();
    return nullptr;
  }
  if (!local_path.empty()) {
    // An earlier attempt of the same rank that wrote in place may have left its WAL and index
    // beside the name the snapshots now take: they belong to no published file.
    const std::string name = split_path(path).second;
    for (const char* suffix : {"-wal", "-shm"})
      ::unlinkat(state->trace_directory.fd(), (name + suffix).c_str(), 0);
    // Readers listing the job directory see the rank from its start, not one window later.
    state->publish(true);
  }
  if (::pipe2(state->wake, O_CLOEXEC) != 0 || ::pipe2(state->done, O_CLOEXEC) != 0) {
    error = std::string("cannot create the writer's pipes: ") + std::strerror(errno);
    discard_working_copy();
    return nullptr;
  }
  // The writer thread takes no signals: they go to the application's threads, whose handlers
  // (commtap's flush included) may then wait for the writer.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  State* raw = state.get();
  raw->thread = std::thread([raw] { raw->run(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(state)));
}

std::string TraceWriter::stop(const RankFacts& facts) {
  State& s = *state_;
  if (s.stopped.exchange(true)) return "";
  s.final_ended_by = facts.ended_by;
  s.final_error = facts.error;
  const char byte = 'S';
  if (::write(s.wake[1], &byte, 1) != 1 || !s.thread.joinable()) return "the writer is gone";
  s.thread.join();
  // Errors are reported by the writer thread when they happen.
  return "";
}

bool TraceWriter::flush_for_signal(int signal_number, int timeout_ms) noexcept {
  State& s = *state_;
  if (s.stopped.load()) return false;
  s.signal.store(signal_number);
  const char byte = 'K';
  if (::write(s.wake[1], &byte, 1) != 1) return false;
  pollfd readable{s.done[0], POLLIN, 0};
  return ::poll(&readable, 1, timeout_ms) == 1;
}

TraceWriter::~TraceWriter() {
  if (!state_) return;
  if (state_->thread.joinable()) {
    if (!state_->stopped.exchange(true)) state_->final_ended_by = "exit";
    const char byte = 'S';
    [[maybe_unused]] auto ignored = ::write(state_->wake[1], &byte, 1);
    state_->thread.join();
  }
}

}  // namespace commtap::monitor
