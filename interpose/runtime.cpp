// The library's lifecycle: at MPI_Init it reads the settings, agrees on rank 0's where ranks must
// agree, starts each module with its own settings and starts recording; at MPI_Finalize, exit,
// MPI_Abort or a fatal signal it stops them; in forked children it stays out of the way.
#include "interpose/runtime.hpp"

#include "interpose/fatal_errors.hpp"
#include "interpose/fortran_routes.hpp"
#include "interpose/launcher_identity.hpp"
#include "interpose/recording.hpp"
#include "monitor/shared_fs.hpp"
#include "monitor/tcp_links.hpp"
#include "probes/probes.hpp"
#include "world/world.hpp"

#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>

namespace commtap::interpose {

Immortal<Runtime> g_runtime;

const char* family_name(Family family) noexcept {
  switch (family) {
    case Family::collective:
      return "collective";
    case Family::collective_start:
      return "collective_start";
    case Family::collective_init:
      return "collective_init";
    case Family::send:
      return "send";
    case Family::recv:
      return "recv";
    case Family::sendrecv:
      return "sendrecv";
    case Family::probe:
      return "probe";
    case Family::p2p_start:
      return "p2p_start";
    case Family::p2p_init:
      return "p2p_init";
    case Family::completion:
      return "completion";
    case Family::start:
      return "start";
    case Family::request:
      return "request";
    case Family::one_sided_sync:
      return "one_sided_sync";
    case Family::window:
      return "window";
    case Family::pack:
      return "pack";
    case Family::datatype:
      return "datatype";
    case Family::communicator:
      return "communicator";
    case Family::lifecycle:
      return "lifecycle";
    case Family::error_handling:
      return "error_handling";
    case Family::nccl_collective:
      return "nccl_collective";
    case Family::nccl_p2p:
      return "nccl_p2p";
    case Family::nccl_group:
      return "nccl_group";
    case Family::nccl_communicator:
      return "nccl_communicator";
  }
  return "unknown";
}

namespace {

// Everything start() learns and stop() needs. Touched only by the thread that calls
// MPI_Init/MPI_Finalize (and by the exit handler), under `lifecycle_mutex`.
struct Session {
  bool started = false;
  bool stopped = false;
  bool forked_child = false;
  bool record = false;  // a writable directory was agreed on
  // Started at the first NCCL communicator of a process that had not called MPI_Init: no MPI
  // call is ever made (session.comm stays MPI_COMM_NULL).
  bool without_mpi = false;
  MPI_Comm comm = MPI_COMM_NULL;
  monitor::RankFacts facts;
  std::string database_path;
  std::unique_ptr<monitor::TraceWriter> writer;
  std::size_t sites_written = 0;          // touched by the writer thread only
  std::size_t communicators_written = 0;  // likewise
  // COMMTAP_TCP_INTERVAL (nullptr: off); read by the writer thread only.
  std::unique_ptr<monitor::TcpLinkCounters> tcp_links;
  std::atomic<bool> final_window{false};
  // Link probes (nullptr: off); run under `lifecycle_mutex` at agreed world collectives.
  std::unique_ptr<probes::LinkProber> prober;
  // The nodes the clocks are compared along and the probes run between (pretend ones with
  // COMMTAP_TEST_NODES), and the clock tree over them (MPI jobs; run under `lifecycle_mutex`).
  world::NodeLayout layout;
  std::unique_ptr<world::ClockTree> clocks;
  // What the clock estimates cost this rank (COMMTAP_VERBOSE reports it): MPI_Init's, the
  // mid-job ones, MPI_Finalize's.
  struct ClockCost {
    std::uint64_t estimates = 0, total_ns = 0;
    std::vector<std::uint64_t> mid_job_ns;  // the first kKept mid-job ones
    static constexpr std::size_t kKept = 4096;
  } clock_cost;
  // Measurements not written yet: clock estimates (MPI_Init's, periodic ones, MPI_Finalize's)
  // and link probes. Guarded by `measured_mutex` (the writer thread takes them).
  std::mutex measured_mutex;
  std::vector<monitor::ClockEstimate> clock_estimates;
  std::vector<monitor::ProbeRow> probes;
  // Time commtap's own measurements took outside the program's MPI calls so far: link-probe
  // decisions and rounds and mid-job clock estimates, which run after a collective's recorded
  // end (heartbeats.measuring_ns, with the asynchronous probes' services at a call's entry).
  std::atomic<std::uint64_t> measuring_ns{0};
  // Why COMMTAP_YIELD=auto chose what it did, for COMMTAP_VERBOSE's line ("" where it was set).
  std::string yield_reason;
};

struct Lifecycle {
  std::mutex mutex;
  Session session;
};
Immortal<Lifecycle> lifecycle;
std::mutex& lifecycle_mutex = lifecycle.value.mutex;
Session& session = lifecycle.value.session;

bool should_print(const Settings& settings, int rank) {
  return rank == 0 || settings.verbose >= 2;
}

std::string read_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : raw)
    if (c == '\0') c = ' ';
  while (!raw.empty() && raw.back() == ' ') raw.pop_back();
  return raw;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (PMPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string version(text, static_cast<std::size_t>(length));
  if (auto newline = version.find('\n'); newline != std::string::npos) version.resize(newline);
  // MPICH separates "MPICH Version:" and the number with a tab; keep one line of plain spaces.
  std::string clean;
  for (char c : version) {
    const char d = (c == '\t') ? ' ' : c;
    if (!(d == ' ' && !clean.empty() && clean.back() == ' ')) clean += d;
  }
  return clean;
}

// The agreed settings (the `scope` column of the settings tables) decide which collective calls
// commtap makes on its private communicators, which instances all ranks record, or what rank 0
// alone reads for all: a rank with other values than the rest would wait for them forever. An
// MPMD launch can give ranks different environments, so rank 0's values are used everywhere and
// a rank that had others says so. (COMMTAP_DISABLE cannot be agreed on: a disabled rank makes no
// call at all. It must be equal on all ranks.)
void agree_with_rank_0(Settings& settings, MPI_Comm comm, int rank) {
  const std::string rank_0 = world::broadcast_string(agreed_values(settings), comm, rank);
  const std::vector<std::string> differences = adopt_agreed_values(settings, rank_0);
  // One line for the job, from the lowest rank that differs.
  if (world::lowest_rank_where(!differences.empty(), comm) != rank) return;
  std::string list;
  for (const std::string& difference : differences) list += (list.empty() ? "" : ", ") + difference;
  std::fprintf(stderr,
               "commtap: rank %d's settings differ from rank 0's: %s; every rank uses rank "
               "0's (other ranks may differ too)\n",
               rank, list.c_str());
}

// The job id: the setting, else the batch system's, else rank 0 makes one. Broadcast from rank 0
// in every case so that all ranks agree even if their environments differ.
std::string agree_on_job_id(const MonitorSettings& settings, MPI_Comm comm, int rank) {
  return world::broadcast_string(rank == 0 ? monitor::choose_job_id(settings.job_id) : "", comm,
                                 rank);
}

void in_forked_child() {
  // The child of a rank is not a rank: it must neither record nor write the parent's database.
  // Locks held by other threads at fork time are never touched again in the child.
  runtime().active.store(false, std::memory_order_relaxed);
  session.forked_child = true;
}

// What the writer thread records every window. Runs on the writer thread: no MPI calls here.
monitor::Snapshot collect_snapshot() {
  monitor::Snapshot snapshot;
  const std::vector<monitor::CallTotals> totals = runtime().counters->totals();
  for (std::size_t i = 0; i < totals.size(); ++i) {
    if (totals[i].calls == 0 && totals[i].completions == 0) continue;
    snapshot.functions.push_back({kFunctionName[i], family_name(kFamily[i]), totals[i]});
  }
  snapshot.communicators = runtime().communicators.rows_since(session.communicators_written);
  snapshot.instances_dropped = runtime().counters->drain(snapshot.instances);
  // After the instances: every site they name is written in the same window or before.
  snapshot.new_sites = runtime().call_sites.since(session.sites_written);
  monitor::resolve_source_lines(snapshot.new_sites);
  snapshot.aggregates_dropped = runtime().counters->close_window(snapshot.aggregates);
  snapshot.progress = runtime().communicators.progress();
  {
    std::lock_guard lock(session.measured_mutex);
    snapshot.clock_estimates.swap(session.clock_estimates);
    snapshot.probes.swap(session.probes);
  }
  if (session.tcp_links != nullptr)
    snapshot.tcp_links = session.tcp_links->due(monitor::now_ns(), session.final_window.load());
  snapshot.measuring_ns = session.measuring_ns.load(std::memory_order_relaxed);
  // The prober lives until the writer has stopped (finish_recording comes first).
  if (session.prober != nullptr && session.prober->async() != nullptr)
    snapshot.measuring_ns += session.prober->async()->entry_service_ns();
  snapshot.busy = runtime().counters->busy();
  for (monitor::ActivitySnapshot& busy : snapshot.busy)
    busy.comm_id = runtime().communicators.id_of(static_cast<MPI_Comm>(busy.comm_handle));
  if (monitor::StreamCompletions* completions =
          runtime().stream_completions.load(std::memory_order_acquire)) {
    completions->collect(snapshot.instances, session.final_window.load());
    snapshot.gpus = completions->devices();
  }
  snapshot.function_names.assign(std::begin(kFunctionName), std::end(kFunctionName));
  for (auto algorithm = collectives::Algorithm::native; algorithm <= collectives::kLastAlgorithm;
       algorithm = static_cast<collectives::Algorithm>(static_cast<int>(algorithm) + 1))
    snapshot.algorithm_names.emplace_back(collectives::algorithm_name(algorithm));
  return snapshot;
}

void finish_recording(const char* ended_by) {
  if (session.writer == nullptr || session.forked_child) return;
  session.facts.end_ns = monitor::wall_ns();
  session.facts.ended_by = ended_by;
  session.final_window.store(true);  // NCCL work still on its streams is not waited for
  const std::string error = session.writer->stop(session.facts);
  // Every rank that fails says so: by now ranks may no longer be able to agree on anything.
  if (!error.empty())
    std::fprintf(stderr, "commtap: rank %d could not write %s: %s\n", session.facts.rank,
                 session.database_path.c_str(), error.c_str());
}

// Runs when the library is unloaded at exit: after the application's atexit handlers and global
// destructors (which may still call MPI_Finalize) and before libmpich's own finalization.
[[gnu::destructor]] void at_unload() {
  // The application exited without MPI_Finalize: keep what was recorded.
  std::lock_guard lock(lifecycle_mutex);
  if (!session.started || session.forked_child || session.stopped) return;
  session.stopped = true;
  runtime().active.store(false, std::memory_order_relaxed);
  runtime().async_probes = nullptr;
  finish_recording("exit");
}

void keep_clock_estimates(const std::vector<monitor::ClockEstimate>& estimates) {
  std::lock_guard lock(session.measured_mutex);
  for (const monitor::ClockEstimate& estimate : estimates)
    if (estimate.offset.error_ns >= 0) session.clock_estimates.push_back(estimate);
}

// One clock estimate along the tree, kept and accounted for: summed down the tree before it
// returns, or mid-job in the background (its offset kept when it arrives). Returns the offset
// of the last estimate finished (MPI_Init's, at MPI_Init).
monitor::ClockOffset estimate_clock(int exchanges, bool mid_job) {
  const std::uint64_t began = monitor::now_ns();
  const std::vector<monitor::ClockEstimate> finished =
      mid_job ? session.clocks->estimate_in_background(exchanges)
              : session.clocks->estimate(exchanges);
  const std::uint64_t took = monitor::elapsed_ns(began, monitor::now_ns());
  Session::ClockCost& cost = session.clock_cost;
  ++cost.estimates;
  cost.total_ns += took;
  if (mid_job && cost.mid_job_ns.size() < Session::ClockCost::kKept)
    cost.mid_job_ns.push_back(took);
  keep_clock_estimates(finished);
  return finished.empty() ? monitor::ClockOffset{} : finished.back().offset;
}

// SIGTERM and SIGINT (what batch systems and Ctrl-C send) end the process before MPI_Finalize:
// the writer is asked for a last window first, then the signal's default action proceeds.
void on_fatal_signal(int number) {
  if (!session.forked_child && session.writer != nullptr) {
    session.final_window.store(true);
    session.writer->flush_for_signal(number, 3000);
  }
  ::signal(number, SIG_DFL);
  ::raise(number);
}

// The crashes: a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL) or abort() (SIGABRT). Where the
// launcher then kills every rank at once (hydra's default), the crashed rank's own last window,
// ended by the signal, is the only word on who went first.
constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxSignal = 65;
struct sigaction g_before_crash[kMaxSignal];

// Writes the last window (at most 1 s), then puts back the action that was there before and
// hands the signal on to it: a fault returns, so that the instruction faults again into that
// action with its own siginfo (UCX's handler prints its backtrace, the default dumps core); a
// signal that was sent (kill, abort's raise) is raised again.
void on_crash_signal(int number, siginfo_t* info, void*) {
  if (!session.forked_child && session.writer != nullptr) {
    session.final_window.store(true);
    session.writer->flush_for_signal(number, 1000);
  }
  sigaction(number, &g_before_crash[number], nullptr);
  if (info == nullptr || info->si_code <= 0) ::raise(number);
}

// SIGTERM and SIGINT only where the application left the default action: its own handlers are
// not replaced. The crash signals whatever is there (MPI's transport installs its own, UCX's
// backtrace): that action runs after the window is written.
void install_signal_flush() {
  for (int number : {SIGTERM, SIGINT}) {
    struct sigaction current {};
    if (sigaction(number, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction flush {};
    flush.sa_handler = on_fatal_signal;
    sigemptyset(&flush.sa_mask);
    flush.sa_flags = SA_RESETHAND;
    sigaction(number, &flush, nullptr);
  }
  for (int number : kCrashSignals) {
    struct sigaction flush {};
    flush.sa_sigaction = on_crash_signal;
    sigemptyset(&flush.sa_mask);
    flush.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigaction(number, &flush, &g_before_crash[number]);
  }
}

void count_lifecycle_call(Fn fn, std::uint64_t began, std::uint64_t ended) {
  monitor::CallStats& stats = runtime().counters->local()[index_of(fn)];
  monitor::bump(stats.calls, 1);
  monitor::bump(stats.time_ns, monitor::elapsed_ns(began, ended));
}

// What a rank knows about itself without asking the others.
void learn_local_facts(const Settings& settings, monitor::RankFacts& facts) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  facts.host = host;
  facts.group_readable = settings.group_read;
  facts.stall_tick_ns = static_cast<std::uint64_t>(settings.stall_tick) * 1'000'000;
  facts.pid = ::getpid();
  facts.command_line = read_command_line();
  facts.start_ns = monitor::wall_ns();
  if (settings.test_clock_skew != 0)
    monitor::skew_clock_for_tests(settings.test_clock_skew * facts.rank);
}

// What this rank records about itself (session.facts); the job id and the clock offset are
// agreed with the other ranks.
const monitor::RankFacts& learn_rank_facts(const Settings& settings, int rank, int size) {
  monitor::RankFacts& facts = session.facts;
  facts.job_id = agree_on_job_id(settings, session.comm, rank);
  facts.rank = rank;
  runtime().world_rank = rank;
  facts.world_size = size;
  // Node index and local rank: nodes are MPI's shared-memory domains (any rank placement).
  world::NodeLayout layout = world::node_layout(session.comm, 0);
  facts.local_rank = layout.local_rank;
  facts.node = layout.node_index;
  facts.mpi_library = mpi_library_version();
  learn_local_facts(settings, facts);
  // The clocks are compared along the nodes (pretend ones for tests, so that one machine can
  // check the tree across nodes).
  if (settings.test_nodes > 0) {
    world::free_layout(layout);
    layout = world::node_layout(session.comm, static_cast<int>(settings.test_nodes));
  }
  session.layout = layout;
  session.clocks = std::make_unique<world::ClockTree>(layout);
  facts.clock = estimate_clock(world::kClockExchanges, false);
  return facts;
}

// Where this rank records and what it said about it, for COMMTAP_VERBOSE's line.
struct Recording {
  std::string directory;
  WorkingCopy copy;
};

// Of the ranks where `condition` holds, the lowest; -1 if none. MPI jobs agree on it (collective);
// a job without MPI cannot, and each rank answers for itself.
using LowestRankWhere = std::function<int(bool condition)>;

// The trace directory and the writer (session.record, .database_path, .writer), with the ranks'
// agreement between the steps of interpose/recording.hpp, which themselves need no MPI.
Recording start_recording(const Settings& settings, monitor::SnapshotLayout trace_layout, int rank,
                          const LowestRankWhere& lowest_rank_where) {
  const monitor::RankFacts& facts = session.facts;
  // All ranks must agree on whether to record, so one unwritable node turns recording off
  // everywhere with a single message instead of leaving a job directory with holes.
  Recording recording;
  const std::string& directory = recording.directory = trace_directory(settings, facts.job_id);
  const std::string problem = make_directory(directory, /*must_be_private*/ true);
  // The lowest failing rank explains; the others stay quiet.
  const int first_failed = lowest_rank_where(!problem.empty());
  if (first_failed == rank)
    std::fprintf(stderr,
                 "commtap: rank %d cannot write the trace directory (%s); recording is off on "
                 "%s, the job goes on\n",
                 rank, problem.c_str(), session.without_mpi ? "this rank" : "all ranks");
  session.record = first_failed < 0;
  session.database_path = directory + "/rank-" + std::to_string(rank) + ".db";
  WorkingCopy& copy = recording.copy;
  if (session.record) copy = choose_working_copy(settings, trace_layout, directory, facts);
  // A rank without a local copy still records, in place: the lowest such rank explains.
  if (lowest_rank_where(!copy.problem.empty()) == rank)
    std::fprintf(stderr,
                 "commtap: rank %d cannot keep a local working copy of its trace (%s); ranks "
                 "without one write %s in place, which readers on other hosts may see "
                 "inconsistent; the job goes on\n",
                 rank, copy.problem.c_str(), directory.c_str());
  if (session.record) {
    session.writer = start_trace_writer(settings, session.database_path, facts, describe(settings),
                                        collect_snapshot, copy);
    if (session.writer != nullptr) install_signal_flush();
  }
  return recording;
}

// The settings and the counters, the first steps of either start. False: COMMTAP_DISABLE, and
// the library stays a pure pass-through (no communicator, no file, no output).
bool begin_session(ParsedSettings& parsed) {
  parsed = parse_settings([](const char* name) { return std::getenv(name); });
  if (parsed.settings.disable) return false;
  session.started = true;
  runtime().settings = parsed.settings;
  // "auto" is decided after MPI_Init (decide_yield); until then, and in jobs without MPI, no.
  runtime().yield = parsed.settings.yield == FlagOrAuto::on;
  runtime().counters = std::make_unique<monitor::CallCounters>(kFunctionCount);
  runtime().messages = std::make_unique<MessageCounters>();
  return true;
}

// COMMTAP_YIELD=auto decided (collective over `comm`): yield on every rank where some machine of
// the job runs more ranks than it has CPUs for them. On every rank, because the setting must be
// equal everywhere (a yielding rank's blocking collective is its nonblocking form, which matches
// no blocking call on another rank); the settings in force then say 1 or 0.
void decide_yield(Settings& settings, MPI_Comm comm) {
  if (settings.yield == FlagOrAuto::automatic) {
    const world::MachineShare share = world::machine_share(comm);
    const int first = world::lowest_rank_where(share.ranks > share.cpus, comm);
    settings.yield = first >= 0 ? FlagOrAuto::on : FlagOrAuto::off;
    auto count = [](int n, const char* what) {
      return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
    };
    session.yield_reason =
        " (auto: " + count(share.ranks, "rank") + " on " + count(share.cpus, "CPU") +
        " on this machine" +
        (first >= 0 ? "; rank " + std::to_string(first) + "'s machine is oversubscribed" : "") +
        ")";
  }
  runtime().yield = settings.yield == FlagOrAuto::on;
}

// The last steps of either start: say where the rank records, and go live.
void go_live(const Settings& settings, const Recording& recording, int size) {
  const monitor::RankFacts& facts = session.facts;
  pthread_atfork(nullptr, nullptr, in_forked_child);
  if (settings.verbose >= 1 && should_print(settings, facts.rank)) {
    const WorkingCopy& copy = recording.copy;
    const std::string snapshots =
        copy.path.empty() ? "" : " (" + copy.filesystem.name + ": snapshots of " + copy.path + ")";
    // Spinning is said only where "auto" chose it: it was the only mode once.
    const std::string waits = settings.yield == FlagOrAuto::on ? ", yield mode"
                              : session.yield_reason.empty()   ? ""
                                                               : ", spinning waits";
    std::fprintf(stderr, "commtap: rank %d of %d, job %s, recording to %s%s%s%s%s\n", facts.rank,
                 size, facts.job_id.c_str(),
                 session.record ? recording.directory.c_str() : "(nowhere)", snapshots.c_str(),
                 waits.c_str(), session.yield_reason.c_str(),
                 session.without_mpi ? ", without MPI" : "");
  }
}

}  // namespace

void start_after_mpi_init(std::uint64_t init_began_ns, Fn init_fn) {
  std::lock_guard lock(lifecycle_mutex);
  if (session.forked_child) return;
  if (session.started) {
    if (session.without_mpi && session.facts.rank == 0)
      std::fprintf(stderr,
                   "commtap: MPI_Init came after the first NCCL communicator; commtap records "
                   "this job as an NCCL job, without MPI's communicators\n");
    return;
  }
  ParsedSettings parsed;
  if (!begin_session(parsed)) return;
  int thread_level = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&thread_level);
  runtime().thread_multiple = thread_level == MPI_THREAD_MULTIPLE;

  // A private communicator keeps commtap's own messages out of the application's matching.
  MPI_Request duplicated = MPI_REQUEST_NULL;
  PMPI_Comm_idup(MPI_COMM_WORLD, &session.comm, &duplicated);
  world::wait_all(1, &duplicated, true);
  int rank = 0, size = 1;
  PMPI_Comm_rank(session.comm, &rank);
  PMPI_Comm_size(session.comm, &size);
  agree_with_rank_0(runtime().settings, session.comm, rank);
  decide_yield(runtime().settings, session.comm);
  const Settings& settings = runtime().settings;
  runtime().sample = static_cast<std::uint64_t>(settings.sample);
  learn_rank_facts(settings, rank, size);
  runtime().collectives = collectives::start(settings, runtime().yield, session.comm,
                                             session.layout.nodes, parsed.problems);
  runtime().collectives.report_trials = settings.verbose >= 2;
  runtime().stager = datatypes::make_stager(settings, runtime().plans, parsed.problems)
                         .release();  // never destroyed: MPI calls may come at exit
  const monitor::SnapshotLayout trace_layout = snapshot_layout(settings, parsed.problems);
  if (rank == 0)
    for (const std::string& problem : parsed.problems)
      std::fprintf(stderr, "%s\n", problem.c_str());

  if (settings.probe_interval > 0) {
    session.prober = std::make_unique<probes::LinkProber>(session.comm, session.layout, settings,
                                                          runtime().thread_multiple);
    runtime().async_probes = session.prober->start_async([](std::vector<monitor::ProbeRow>&& rows) {
      std::lock_guard measured(session.measured_mutex);
      session.probes.insert(session.probes.end(), rows.begin(), rows.end());
    });
  }
  if (settings.tcp_interval > 0)
    session.tcp_links = std::make_unique<monitor::TcpLinkCounters>(
        static_cast<std::uint64_t>(settings.tcp_interval) * 1'000'000'000);

  // Before the writer, whose windows list the communicators.
  runtime().communicators.start(rank);
  const Recording recording = start_recording(settings, trace_layout, rank, [](bool condition) {
    return world::lowest_rank_where(condition, session.comm);
  });
  go_live(settings, recording, size);
  if (session.record) install_fatal_error_recorder();
  count_lifecycle_call(init_fn, init_began_ns, monitor::now_ns());
  // Before any Fortran call can come: mpi_f08 bindings that call PMPI_ directly go through the
  // wrappers from here on.
  route_fortran_bindings();
  runtime().active.store(true, std::memory_order_release);
}

void start_without_mpi(const FirstNcclCommunicator& first) {
  std::lock_guard lock(lifecycle_mutex);
  if (session.started || session.forked_child) return;
  ParsedSettings parsed;
  if (!begin_session(parsed)) return;
  session.without_mpi = true;
  // Any thread may make NCCL calls: counters and completions are kept as under
  // MPI_THREAD_MULTIPLE.
  runtime().thread_multiple = true;
  const Settings& settings = runtime().settings;
  runtime().sample = static_cast<std::uint64_t>(settings.sample);
  const monitor::SnapshotLayout trace_layout = snapshot_layout(settings, parsed.problems);

  // Who this process is: the launcher's variables, else the first communicator's rank and size
  // (right for the usual job whose first communicator spans it all).
  const Environment environment = [](const char* name) -> const char* { return std::getenv(name); };
  const LauncherIdentity identity = identity_from_environment(environment);
  monitor::RankFacts& facts = session.facts;
  facts.rank = identity.rank >= 0 ? identity.rank : first.rank;
  facts.world_size = identity.size >= 0 ? identity.size : first.size;
  facts.local_rank = std::max(identity.local_rank, 0);
  facts.node = std::max(identity.node, 0);
  facts.job_id = job_id_without_mpi(settings.job_id, environment, first.id);
  facts.mpi_library = "none";
  runtime().world_rank = facts.rank;
  learn_local_facts(settings, facts);
  // No estimate of the offset to rank 0's clock: the analyzer aligns the ranks' clocks by their
  // collectives' completion times (analyzer/model/clock_alignment.cpp).
  facts.clock = {};
  if (facts.rank == 0)
    for (const std::string& problem : parsed.problems)
      std::fprintf(stderr, "%s\n", problem.c_str());
  if (settings.tcp_interval > 0)
    session.tcp_links = std::make_unique<monitor::TcpLinkCounters>(
        static_cast<std::uint64_t>(settings.tcp_interval) * 1'000'000'000);
  const Recording recording =
      start_recording(settings, trace_layout, facts.rank,
                      [rank = facts.rank](bool condition) { return condition ? rank : -1; });
  go_live(settings, recording, facts.world_size);
  runtime().active.store(true, std::memory_order_release);
}

namespace {

// stop_before_mpi_finalize and stop_at_fatal_error, under `lifecycle_mutex`. `finalize_fn`:
// the lifecycle call to count (none at a fatal error).
void stop_locked(const Fn* finalize_fn, const char* ended_by) {
  if (!session.started || session.forked_child || session.stopped) return;
  session.stopped = true;
  runtime().active.store(false, std::memory_order_relaxed);
  // The library's finalize has not run yet, so its call is counted with no time.
  const std::uint64_t now = monitor::now_ns();
  if (finalize_fn != nullptr) count_lifecycle_call(*finalize_fn, now, now);
  // The asynchronous probes first: a leader still measuring waits for its peer's answer, which
  // a peer held in the clock estimate's exchanges would never give.
  runtime().async_probes = nullptr;
  if (std::strcmp(ended_by, "finalize") == 0 && session.prober != nullptr)
    session.prober->before_finalize();
  // MPI_Finalize is collective: a last clock estimate bounds the drift since the last one.
  // Not at MPI_Abort, where the other ranks may never come.
  if (std::strcmp(ended_by, "finalize") == 0 && session.clocks != nullptr)
    estimate_clock(world::kClockExchanges, false);
  // Written before the library's MPI_Finalize: finalize can hang (UCX across hosts), and what
  // was recorded must survive that.
  finish_recording(ended_by);
  if (runtime().settings.verbose >= 1 && should_print(runtime().settings, session.facts.rank)) {
    std::fprintf(stderr, "commtap: rank %d wrote %s\n", session.facts.rank,
                 session.writer ? session.database_path.c_str() : "nothing");
    if (Session::ClockCost& c = session.clock_cost; c.estimates > 0) {
      // The median says what a re-estimation costs; the longest, what one preempted cost.
      std::vector<std::uint64_t>& mid_job = c.mid_job_ns;
      std::sort(mid_job.begin(), mid_job.end());
      std::fprintf(stderr,
                   "commtap: rank %d: clock estimates: %llu, %.1f ms in all; %zu mid-job, median "
                   "%.3f ms, longest %.3f ms\n",
                   session.facts.rank, static_cast<unsigned long long>(c.estimates),
                   static_cast<double>(c.total_ns) / 1e6, mid_job.size(),
                   mid_job.empty() ? 0.0 : static_cast<double>(mid_job[mid_job.size() / 2]) / 1e6,
                   mid_job.empty() ? 0.0 : static_cast<double>(mid_job.back()) / 1e6);
    }
    if (session.prober && session.prober->cost().since_ns != 0) {
      // What the link probes cost this rank, against the time since they could first run.
      const probes::LinkProber::Cost c = session.prober->cost();
      const double total_s =
          static_cast<double>(monitor::elapsed_ns(c.since_ns, monitor::now_ns())) / 1e9;
      const double spent_s = static_cast<double>(c.probing_ns + c.deciding_ns) / 1e9;
      std::fprintf(stderr,
                   "commtap: rank %d: link probes: %llu rounds, %.1f ms probing and %.1f ms "
                   "deciding in %.1f s (%.3f%%)\n",
                   session.facts.rank, static_cast<unsigned long long>(c.rounds),
                   static_cast<double>(c.probing_ns) / 1e6,
                   static_cast<double>(c.deciding_ns) / 1e6, total_s,
                   total_s > 0 ? 100 * spent_s / total_s : 0.0);
    }
    if (session.prober && session.prober->async() != nullptr) {
      const probes::AsyncProber::Cost c = session.prober->async()->cost();
      const double total_s =
          static_cast<double>(monitor::elapsed_ns(c.since_ns, monitor::now_ns())) / 1e9;
      std::fprintf(stderr,
                   "commtap: rank %d: asynchronous link probes: %llu measurements, %llu answers, "
                   "%.1f ms in %.1f s (%.3f%%)\n",
                   session.facts.rank, static_cast<unsigned long long>(c.measurements),
                   static_cast<unsigned long long>(c.answers),
                   static_cast<double>(c.spent_ns) / 1e6, total_s,
                   total_s > 0 ? 100 * static_cast<double>(c.spent_ns) / 1e9 / total_s : 0.0);
    }
  }
  if (session.comm != MPI_COMM_NULL && std::strcmp(ended_by, "finalize") == 0) {
    session.prober.reset();
    session.clocks.reset();
    world::free_layout(session.layout);
    PMPI_Comm_free(&session.comm);
  } else {
    (void)session.prober.release();  // MPI may be gone: the communicators are left as they are
  }
  runtime().requests.clear();
}

}  // namespace

void stop_before_mpi_finalize(Fn finalize_fn, const char* ended_by) {
  std::lock_guard lock(lifecycle_mutex);
  stop_locked(&finalize_fn, ended_by);
}

bool stop_at_fatal_error(const monitor::RankFacts::Error& error) {
  // The error may come from a call commtap makes under the lock (a clock estimate, a probe
  // round) on this thread, or from one of the application's threads while another holds it:
  // then nothing is written, and MPI aborts the job as it would have.
  std::unique_lock lock(lifecycle_mutex, std::try_to_lock);
  if (!lock.owns_lock() || !session.started || session.stopped) return false;
  session.facts.error = error;
  stop_locked(nullptr, "mpi_error");
  return true;
}

namespace {

// Adds the time from its construction to its destruction to session.measuring_ns: a measurement
// of commtap's own outside the program's MPI calls, which the analyzer does not count as the
// rank's work (a probe leader whose rounds grew longer behind a slow link is not a slow rank).
class MeasuringTime {
 public:
  MeasuringTime() : start_ns_(monitor::now_ns()) {}
  ~MeasuringTime() {
    session.measuring_ns.fetch_add(monitor::elapsed_ns(start_ns_, monitor::now_ns()),
                                   std::memory_order_relaxed);
  }
  MeasuringTime(const MeasuringTime&) = delete;
  MeasuringTime& operator=(const MeasuringTime&) = delete;

 private:
  std::uint64_t start_ns_;
};

}  // namespace

void after_world_collective(std::uint64_t seq) {
  const std::uint64_t every = static_cast<std::uint64_t>(runtime().settings.clock_sync);
  const bool sync_clock = every != 0 && seq % every == 0;
  world::ClockTree* clocks = session.clocks.get();
  const bool clock_pending = clocks != nullptr && clocks->pending();
  if (!sync_clock && !clock_pending) return;
  const MeasuringTime measuring;
  std::lock_guard lock(lifecycle_mutex);
  if (!session.started || session.stopped || session.forked_child || session.without_mpi) return;
  if (clock_pending && !sync_clock) keep_clock_estimates(clocks->progress());
  if (sync_clock && clocks != nullptr) estimate_clock(world::kClockExchangesMidJob, true);
}

namespace {

// A decision point of `comm` (a communicator's or a window's state) whose members are `members`;
// under lifecycle_mutex, with the prober set.
void probe_point(world::CommState& comm, const probes::LinkProber::Members& members,
                 std::uint64_t seq) {
  using probes::LinkProber;
  const MeasuringTime measuring;
  LinkProber* prober = session.prober.get();
  if (comm.probe_at.load(std::memory_order_relaxed) == 1) {
    // The first blocking collective on it: whether it is probed at all, from what every member
    // knows alike. Where any rank runs under MPI_THREAD_MULTIPLE the world's collectives only
    // (as before, the prober agreed on it at MPI_Init): a thread held in one communicator's
    // decision under the lock, while another thread of a fellow member waits for the lock to
    // reach a second communicator's, could hold both forever.
    const bool probed = prober->can_probe(members);
    comm.probe_at.store(probed ? LinkProber::kFirstDecision : LinkProber::kNever,
                        std::memory_order_relaxed);
    if (!probed || seq < LinkProber::kFirstDecision) return;
  }
  std::vector<monitor::ProbeRow> rows;
  comm.probe_at.store(prober->after_collective(members, seq, rows), std::memory_order_relaxed);
  if (!rows.empty()) {
    std::lock_guard measured(session.measured_mutex);
    session.probes.insert(session.probes.end(), rows.begin(), rows.end());
  }
}

// Whether probing can go on now (else `comm` is never probed again); takes lifecycle_mutex.
std::unique_lock<std::mutex> probing_lock(world::CommState& comm) {
  if (session.prober == nullptr) {  // probes off (or MPI finalized): never on any communicator
    comm.probe_at.store(probes::LinkProber::kNever, std::memory_order_relaxed);
    return {};
  }
  std::unique_lock lock(lifecycle_mutex);
  // The prober is set at MPI_Init, reset at MPI_Finalize under the lock.
  if (!session.started || session.stopped || session.forked_child || session.without_mpi ||
      session.prober == nullptr)
    return {};
  return lock;
}

}  // namespace

void at_window_probe_point(world::Window& window, std::uint64_t seq) {
  const std::unique_lock lock = probing_lock(window.sync);
  if (!lock.owns_lock()) return;
  probes::LinkProber::Members members;
  members.id = window.sync.id;
  members.rank = window.rank;
  members.size = window.size;
  members.world_ranks = &window.sync.world_ranks;
  probe_point(window.sync, members, seq);
}

void at_probe_point(world::CommState& comm, MPI_Comm handle, std::uint64_t seq) {
  using probes::LinkProber;
  const std::unique_lock lock = probing_lock(comm);
  if (!lock.owns_lock()) return;
  LinkProber::Members members;
  members.id = comm.id;
  int inter = 0;
  PMPI_Comm_test_inter(handle, &inter);
  if (inter == 0) {
    members.world_ranks = &comm.world_ranks;
    PMPI_Comm_rank(handle, &members.rank);
    PMPI_Comm_size(handle, &members.size);
  } else {
    // Both groups of an intercommunicator call its collectives, in the same order: together they
    // are the members that agree, listed alike on either side (by world rank), so that pairs
    // across the groups (two coupled models on their own hosts) are probed too.
    if (comm.probe_members.empty()) {
      for (int side = 0; side < 2; ++side) {
        MPI_Group group = MPI_GROUP_NULL;
        if (side == 0)
          PMPI_Comm_group(handle, &group);
        else
          PMPI_Comm_remote_group(handle, &group);
        const std::vector<int> ranks = world::world_ranks_of(group);
        PMPI_Group_free(&group);
        comm.probe_members.insert(comm.probe_members.end(), ranks.begin(), ranks.end());
      }
      std::sort(comm.probe_members.begin(), comm.probe_members.end());
    }
    members.world_ranks = &comm.probe_members;
    members.size = static_cast<int>(comm.probe_members.size());
    const auto me = std::lower_bound(comm.probe_members.begin(), comm.probe_members.end(),
                                     runtime().world_rank);
    members.rank = me != comm.probe_members.end() && *me == runtime().world_rank
                       ? static_cast<int>(me - comm.probe_members.begin())
                       : -1;  // not a world rank of ours: can_probe says no
  }
  probe_point(comm, members, seq);
}

}  // namespace commtap::interpose
