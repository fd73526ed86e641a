// libcommtap.so as NCCL's profiler plugin (NCCL_PROFILER_PLUGIN=/path/to/libcommtap.so; see
// docs/nccl.md): the exported tables ncclProfiler_v1 ... ncclProfiler_v6, and their init and
// finalize, which tie a communicator to the runtime. The events themselves are
// nccl/profiler_events.cpp.
//
// At init, the communicator's id comes from
// - the constructor's wrapper (LD_PRELOAD), when NCCL calls init on the thread running it: the
//   same id the wrapper gives it; the wrapper registers it after the call and leaves its
//   collectives to the plugin (NcclConstruction::profiled);
// - else NCCL's commHash (equal on all members; v4+ init, v1-v3 every Coll/P2p event): the
//   plugin starts the recording if nothing did (a job without MPI and without LD_PRELOAD) and
//   registers the communicator itself.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "interpose/export.hpp"
#include "interpose/launcher_identity.hpp"
#include "interpose/nccl_communicators.hpp"
#include "interpose/runtime.hpp"
#include "nccl/profiler_events.hpp"

namespace commtap::interpose {
namespace {

namespace abi = ::commtap::nccl::profiler_abi;
namespace np = ::commtap::nccl::profiler;

constexpr char kPluginName[] = "commtap";
constexpr char kCreatedBy[] = "ncclProfiler";
constexpr std::uint64_t kHashSalt = 0x6e63636c70726f66ull;  // "ncclprof"

std::uint64_t clock_now() noexcept {
  return monitor::now_ns();
}
void queue_record(const monitor::InstanceRecord& record) noexcept {
  Runtime& r = runtime();
  if (r.active.load(std::memory_order_relaxed) && r.counters) r.counters->record(record);
}

// Init may run for several communicators at once (NCCL's async init threads).
std::mutex g_init_mutex;
// The first communicator this process made: the one whose ranks are taken for world ranks.
std::int64_t g_first_id = 0;

// Whether the communicator's rank r is world rank r for every member, which transfers need
// (their peer is a world rank) and nothing else tells: it must be the process's first
// communicator, this rank's rank in it its world rank, and its size the launcher's (when the
// launcher says).
bool ranks_are_world_ranks(std::int64_t id, int rank, int nranks) {
  std::lock_guard lock(g_init_mutex);
  if (g_first_id == 0) g_first_id = id;
  if (id != g_first_id || rank != runtime().world_rank) return false;
  const LauncherIdentity who =
      identity_from_environment([](const char* name) -> const char* { return std::getenv(name); });
  return who.size < 0 || who.size == nranks;
}

np::CommSetup base_setup(int version, std::int64_t id, int rank, int nranks) {
  np::CommSetup setup;
  setup.id = id;
  setup.rank = rank;
  setup.nranks = nranks;
  // Completion is known from the kernel's channels, v3 on; before, a collective is known to
  // have been enqueued only.
  setup.kernel_channels = version >= 3;
  setup.owns_progress = version >= 3;
  setup.record_transfers = ranks_are_world_ranks(id, rank, nranks);
  setup.sample = runtime().sample;
  setup.pid = static_cast<int>(::getpid());
  return setup;
}

// Not under a constructor's wrapper: starts the recording if nothing has (idempotent), then
// registers the communicator as the plugin's.
void configure_alone(np::Comm* comm, int version, std::uint64_t comm_hash, int rank, int nranks) {
  const std::int64_t id = world::mix_id(kHashSalt, comm_hash);
  start_without_mpi({id, rank, nranks});
  if (!runtime().active.load()) return;  // COMMTAP_DISABLE, a forked child, a failed start
  NcclConstruction made;
  made.id = id;
  made.created_by = kCreatedBy;
  made.size = nranks;
  made.rank = rank;
  np::CommSetup setup = base_setup(version, id, rank, nranks);
  setup.state = nccl_communicators().add(nullptr, made, /*device: not known here*/ 0);
  // v1/v2: nobody else records this communicator's collectives; their exits stay unknown.
  setup.record_instances = true;
  np::configure(comm, setup);
}

// v1-v3 init names no communicator: the first Coll or P2p event does (its hash and rank); the
// size is the launcher's, the only source left.
void start_lazily(np::Comm* comm, int version, std::uint64_t comm_hash, int rank) noexcept {
  const LauncherIdentity who =
      identity_from_environment([](const char* name) -> const char* { return std::getenv(name); });
  if (who.size <= 0 || rank < 0 || rank >= who.size) return;
  configure_alone(comm, version, comm_hash, rank, who.size);
}

// NCCL dlcloses the plugin with its last communicator; commtap's writer thread and the
// runtime must outlive that, so the library pins itself at the first init (a no-op when it was
// preloaded, which pins it anyway).
void pin_library() {
  static std::once_flag once;
  std::call_once(once, [] {
    np::set_sink({clock_now, queue_record, start_lazily, kNcclFunctionBase});
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&pin_library), &info) != 0 &&
        info.dli_fname != nullptr)
      (void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  });
}

// Every version's init. `comm_hash`, `rank` and `nranks` are known for v4+ (known = true).
abi::Result init(int version, void** context, int* mask, bool known, std::uint64_t comm_hash,
                 int rank, int nranks) noexcept {
  if (context != nullptr) *context = nullptr;
  pin_library();
  np::Comm* comm = context != nullptr ? np::new_comm(version) : nullptr;
  if (comm == nullptr) {
    // Nothing to record into. 2.28 keeps calling the other entry points when the mask is set.
    if (mask != nullptr) *mask = 0;
    return abi::kSuccess;
  }
  bool lazy = false;
  if (NcclConstruction* made = t_nccl_construction) {
    // Inside a constructor's wrapper on this thread: its id; the wrapper started the recording
    // already (or MPI_Init did).
    if (runtime().active.load()) {
      // NCCL's rank and size where init has them (v4+): a split's wrapper learns them only
      // after the call.
      np::CommSetup setup =
          base_setup(version, made->id, known ? rank : made->rank, known ? nranks : made->size);
      if (version >= 3) {
        // The plugin records the collectives (it sees their kernels); the wrapper registers the
        // communicator after the call and publishes its state into the plugin's context.
        made->profiled = true;
        made->profiler_state = np::progress_state(comm);
        setup.record_instances = true;
      }
      np::configure(comm, setup);
    }
  } else if (known) {
    configure_alone(comm, version, comm_hash, rank, nranks);
  } else {
    lazy = true;
  }
  *context = comm;
  // The mask is one int shared by every communicator: all of commtap's write the same value,
  // 0 only where nothing can record (the whole process is not recording).
  if (mask != nullptr)
    *mask = (np::recording(comm) || lazy) ? np::activation_mask(version)
                                          : (runtime().active.load() ? *mask : 0);
  return abi::kSuccess;
}

template <int V>
abi::Result init_v1_v3(void** context, int* mask) noexcept {
  return init(V, context, mask, false, 0, 0, 0);
}
abi::Result init_v4(void** context, int* mask, const char* /*name*/, std::uint64_t comm_hash,
                    int /*nNodes*/, int nranks, int rank, abi::DebugLogger /*log*/) noexcept {
  return init(4, context, mask, true, comm_hash, rank, nranks);
}
template <int V>
abi::Result init_v5_v6(void** context, std::uint64_t comm_id, int* mask, const char* /*name*/,
                       int /*nNodes*/, int nranks, int rank, abi::DebugLogger /*log*/) noexcept {
  return init(V, context, mask, true, comm_id, rank, nranks);
}

abi::Result finalize(void* context) noexcept {
  np::close_comm(static_cast<np::Comm*>(context));
  return abi::kSuccess;
}

}  // namespace
}  // namespace commtap::interpose

// The data objects NCCL looks up (newest first: 2.29+ takes v6, 2.28 v5, ... 2.23 v1).
namespace ct_np = ::commtap::nccl::profiler;
namespace ct_i = ::commtap::interpose;
extern "C" {
COMMTAP_EXPORT commtap::nccl::profiler_abi::v1::Profiler ncclProfiler_v1 = {
    ct_i::kPluginName, ct_i::init_v1_v3<1>,          ct_np::start_event<1>,
    ct_np::stop_event, ct_np::record_event_state<1>, ct_i::finalize};
COMMTAP_EXPORT commtap::nccl::profiler_abi::v2::Profiler ncclProfiler_v2 = {
    ct_i::kPluginName, ct_i::init_v1_v3<2>,          ct_np::start_event<2>,
    ct_np::stop_event, ct_np::record_event_state<2>, ct_i::finalize};
COMMTAP_EXPORT commtap::nccl::profiler_abi::v3::Profiler ncclProfiler_v3 = {
    ct_i::kPluginName, ct_i::init_v1_v3<3>,          ct_np::start_event<3>,
    ct_np::stop_event, ct_np::record_event_state<3>, ct_i::finalize};
COMMTAP_EXPORT commtap::nccl::profiler_abi::v4::Profiler ncclProfiler_v4 = {
    ct_i::kPluginName,
    ct_i::init_v4,
    ct_np::start_event<4>,
    ct_np::stop_event,
    ct_np::record_event_state<4>,
    ct_i::finalize};
COMMTAP_EXPORT commtap::nccl::profiler_abi::v5::Profiler ncclProfiler_v5 = {
    ct_i::kPluginName, ct_i::init_v5_v6<5>,          ct_np::start_event<5>,
    ct_np::stop_event, ct_np::record_event_state<5>, ct_i::finalize};
COMMTAP_EXPORT commtap::nccl::profiler_abi::v6::Profiler ncclProfiler_v6 = {
    ct_i::kPluginName, ct_i::init_v5_v6<6>,          ct_np::start_event<6>,
    ct_np::stop_event, ct_np::record_event_state<6>, ct_i::finalize};
}
