// The process-wide state of the preloaded library: inert until MPI_Init (or, in a job without
// MPI, its first NCCL communicator), active from then until MPI_Finalize (or exit), off again
// in forked children.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collectives/collectives.hpp"
#include "datatypes/datatypes.hpp"
#include "datatypes/device.hpp"
#include "interpose/function_table.hpp"
#include "interpose/messages.hpp"
#include "interpose/requests.hpp"
#include "monitor/call_counters.hpp"
#include "monitor/call_sites.hpp"
#include "monitor/stream_completions.hpp"
#include "monitor/thread_state.hpp"
#include "monitor/trace_writer.hpp"
#include "probes/async_probes.hpp"
#include "settings/settings.hpp"
#include "world/communicators.hpp"

namespace commtap::interpose {

struct Runtime {
  // Read on every intercepted call: false before MPI_Init, with COMMTAP_DISABLE=1, after
  // MPI_Finalize and in forked children.
  std::atomic<bool> active{false};
  // COMMTAP_YIELD and COMMTAP_SAMPLE, fixed at init.
  bool yield = false;
  // MPI_THREAD_MULTIPLE was provided: threads may be inside MPI calls at the same time.
  bool thread_multiple = false;
  int world_rank = 0;
  // The collectives module's context (COMMTAP_ALLREDUCE and what goes with it), set at init.
  collectives::Context collectives;
  std::uint64_t sample = 1;
  Settings settings;
  std::unique_ptr<monitor::CallCounters> counters;
  std::unique_ptr<MessageCounters> messages;
  monitor::CallSites call_sites;
  RequestTable requests;
  world::CommunicatorRegistry communicators;
  datatypes::PlanCache plans;
  // Point-to-point on device buffers through host staging; null (every hook a no-op) without a
  // GPU or with COMMTAP_DEVICE_STAGING=0. Set at init, never destroyed.
  datatypes::Stager* stager = nullptr;
  // Completions of sampled NCCL collectives on their streams; made at the first NCCL call.
  std::atomic<monitor::StreamCompletions*> stream_completions{nullptr};
  // The asynchronous link probes, on a host's leader where they run (probes/async_probes.hpp):
  // serviced at the entry of intercepted calls and while blocking point-to-point calls wait.
  // Set at init, reset at MPI_Finalize; read by the one thread in MPI (never under
  // MPI_THREAD_MULTIPLE).
  probes::AsyncProber* async_probes = nullptr;
};

// Never destroyed: MPI calls can still arrive at process exit, from atexit handlers and global
// destructors that run after commtap's own static objects would have been destroyed.
template <typename T>
union Immortal {
  T value;
  Immortal() : value() {}
  ~Immortal() {}
};
extern Immortal<Runtime> g_runtime;
inline Runtime& runtime() noexcept {
  return g_runtime.value;
}

// Lifecycle hooks, called by the generated Init/Init_thread/Finalize/Abort wrappers and by the
// Fortran mpi_f08 wrappers. `start` and `stop` are idempotent.
void start_after_mpi_init(std::uint64_t init_began_ns, Fn init_fn);
void stop_before_mpi_finalize(Fn finalize_fn, const char* ended_by);
// From the error handler that stands in for MPI_ERRORS_ARE_FATAL (interpose/fatal_errors.hpp),
// before MPI aborts the job: writes the last window, ended by "mpi_error" with `error`. Returns
// whether it did (not if this rank already stopped, or the lifecycle lock is taken).
bool stop_at_fatal_error(const monitor::RankFacts::Error& error);
// A process that makes an NCCL communicator without having called MPI_Init (torchrun, srun):
// starts recording there, without any MPI call, as the rank the launcher's environment names
// (else as `first`'s rank of its size). Called by the constructors' wrappers and by the NCCL
// profiler plugin's init; idempotent. It ends at exit or at a fatal signal.
struct FirstNcclCommunicator {
  std::int64_t id = 0;  // equal on its members: the job id where no launcher gives one
  int rank = 0, size = 1;
};
void start_without_mpi(const FirstNcclCommunicator& first);
// After the blocking collective `seq` on MPI_COMM_WORLD: every COMMTAP_CLOCK_SYNC-th of them
// re-estimates the clock offsets (all ranks reach the same seq, so all take part).
void after_world_collective(std::uint64_t seq);
// After the blocking collective `seq` on `comm` (handle `handle`), once `seq` reaches the
// communicator's probe_at: a link-probe decision point of the communicator (probes.hpp), where
// its members agree whether to probe now and when to ask again (an intercommunicator's: both
// its groups). Under MPI_THREAD_MULTIPLE only MPI_COMM_WORLD is probed.
void at_probe_point(world::CommState& comm, MPI_Comm handle, std::uint64_t seq);
// The same after the fence `seq` of a window (its group's members agree as a communicator's do).
void at_window_probe_point(world::Window& window, std::uint64_t seq);

}  // namespace commtap::interpose
