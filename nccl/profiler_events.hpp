// NCCL profiler plugin events -> commtap records (docs/nccl.md). NCCL calls these from its hot
// paths (the application's launch thread and the proxy progress thread), so every event is a
// few loads and stores: handles are encoded integers naming a slot of a fixed pool (with a
// generation, so a stale handle is recognized, never dereferenced as something else), nothing
// is allocated and nothing locks after a communicator's init, and the clock is read only for
// sampled work.
//
// What is kept per communicator (the plugin's context, `Comm`):
// - collectives: sequence numbers (NCCL's Coll events, in enqueue order, equal on all members),
//   `CommState::started`/`completed` (completed when the kernel has finished on every channel
//   it used: the last KernelCh stop), and for sampled ones an instance record whose exit is the
//   GPU's stop time converted to now_ns();
// - transfers (only where the communicator's ranks are world ranks): one send or recv record per
//   proxy operation of a sampled collective or point-to-point message, from its first network
//   step posted to its last one done.
// The runtime-facing parts (ids, starting the recording, registration) are in
// nccl_profiler_plugin.cpp; this file depends on nothing but headers, so unit tests drive it
// with a fake clock and sink.
#pragma once

#include <atomic>
#include <cstdint>

#include "monitor/call_counters.hpp"
#include "nccl/profiler_abi.hpp"
#include "world/communicators.hpp"

namespace commtap::nccl::profiler {

namespace abi = ::commtap::nccl::profiler_abi;

// A communicator as the plugin knows it: NCCL's `context` (below).
struct Comm;

// What the events need from the process. Set once before the first init (the plugin sets the
// runtime's; tests set fakes).
struct Sink {
  // The clock of every record (monitor::now_ns()).
  std::uint64_t (*now)() noexcept = nullptr;
  // Queues a collective instance or a transfer (any thread).
  void (*record)(const monitor::InstanceRecord& record) noexcept = nullptr;
  // v1-v3 init carries no communicator hash: the first Coll or P2p event that does (with the
  // rank in its header) calls this, once per communicator, to configure it (see `configure`).
  // May be null: such communicators then record nothing.
  void (*start_lazily)(Comm* comm, int version, std::uint64_t comm_hash,
                       int rank) noexcept = nullptr;
  // The caller's function table's index of NCCL's first function (nccl/functions.def's order):
  // records carry function_base + nccl::index_of(function).
  std::uint32_t function_base = 0;
};
void set_sink(const Sink& sink) noexcept;

// Made at init, never freed (a
// finalized communicator's late events and stale slots may still point at it; it is a few
// hundred bytes, where an NCCL communicator costs megabytes).
Comm* new_comm(int version) noexcept;

struct CommSetup {
  std::int64_t id = 0;
  int rank = 0, nranks = 0;
  // Its state (started, completed). Null if not known yet: the constructor's wrapper publishes
  // it through progress_state() when it registers the communicator after NCCL's init returned.
  world::CommState* state = nullptr;
  // The plugin keeps started/completed (NCCL reports kernel completion: KernelCh, v3+).
  bool owns_progress = false;
  // Records the sampled collectives' instances.
  bool record_instances = false;
  // Records transfers: the communicator's rank r is world rank r for every member.
  bool record_transfers = false;
  // NCCL reports one KernelCh stop per channel of each collective (v3+): the last one is its
  // completion. Without (v1, v2), a collective is done for the plugin when it is enqueued, and
  // its instance has no exit.
  bool kernel_channels = false;
  std::uint64_t sample = 1;  // COMMTAP_SAMPLE
  int pid = 0;               // this process (PXN: proxy ops of other processes are skipped)
};
// Makes `comm` record (before that its events are declined). Called once, at init or from
// Sink::start_lazily; not concurrently with its events.
void configure(Comm* comm, const CommSetup& setup) noexcept;
// Where the wrapper publishes the state it registered for this communicator.
std::atomic<world::CommState*>* progress_state(Comm* comm) noexcept;
// At NCCL's finalize: later events of the communicator are declined.
void close_comm(Comm* comm) noexcept;
// Whether `comm` is configured (and not closed).
bool recording(const Comm* comm) noexcept;

// The events the plugin asks NCCL for, by interface version: collectives, point-to-point
// operations, proxy operations and steps, and (v3+) kernel channels. NCCL also starts the
// parents these imply (Group, and in v5+ the API events); those are declined at once.
int activation_mask(int version) noexcept;

// The plugin table's entry points, per version. They accept null contexts, handles, parents
// and state args, always write *handle, and always return kSuccess.
template <int V>
abi::Result start_event(void* context, void** handle,
                        typename abi::Version<V>::Descr* descr) noexcept;
abi::Result stop_event(void* handle) noexcept;
template <int V>
abi::Result record_event_state(void* handle, abi::EventState state,
                               typename abi::Version<V>::StateArgs* args) noexcept;

// What the pools could not hold so far (the work went unrecorded; a collective's completion is
// then taken from the next one's, as a communicator's collectives complete in order).
struct Dropped {
  std::uint64_t collectives = 0;
  std::uint64_t proxy_ops = 0;
};
Dropped dropped() noexcept;

// The caller's function table's index (Sink::function_base) of NCCL's func name ("AllReduce"),
// one past NCCL's functions when unknown. Exposed for tests.
std::uint32_t function_of(const char* func) noexcept;
// Bytes per element of NCCL's datatype name ("ncclFloat32" -> 4; 1 when unknown).
std::uint32_t datatype_size(const char* datatype) noexcept;

}  // namespace commtap::nccl::profiler
