// Communicators: made by init (through a unique id's root), split and shrink (over the parent's
// control sockets); ended by destroy (after the comm's work has run), abort (at once) or
// revoke (its work stopped, management calls still allowed).
#include <strings.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <unordered_map>

#include "fake_nccl.hpp"
#include "profiler_hooks.hpp"

namespace fake_nccl {
namespace {

// Leaked on purpose: stream workers may still hold comms while the process exits.
struct Registry {
  std::mutex mutex;
  std::unordered_map<Comm*, CommRef> comms;
};
Registry& registry() {
  static auto* instance = new Registry;
  return *instance;
}

struct LastError {
  std::mutex mutex;
  std::string text;
};
LastError& last_error_store() {
  static auto* instance = new LastError;
  return *instance;
}

// NCCL prints its warnings when NCCL_DEBUG asks for them; so does the fake.
bool warnings_wanted() {
  static const bool wanted = [] {
    const char* level = std::getenv("NCCL_DEBUG");
    return level && (strcasecmp(level, "WARN") == 0 || strcasecmp(level, "INFO") == 0 ||
                     strcasecmp(level, "TRACE") == 0);
  }();
  return wanted;
}

constexpr unsigned kConfigMagic = 0xcafebeef;
constexpr int kShrinkColor = -2;  // a color no split can use: shrinks hash apart from splits

ncclResult_t check_config(const ncclConfig_t* config) {
  if (config && config->magic != kConfigMagic)
    return fail(ncclInvalidArgument, "config was not set with NCCL_CONFIG_INITIALIZER");
  return ncclSuccess;
}

// Without a config, a derived comm inherits its parent's (as NCCL's split does).
void apply_config(Comm& comm, const ncclConfig_t* config, const Comm* parent) {
  if (parent) {
    comm.blocking = parent->blocking;
    comm.name = parent->name;
  }
  if (!config) return;
  if (config->blocking != NCCL_CONFIG_UNDEF_INT) comm.blocking = config->blocking != 0;
  // Older callers pass smaller structs: read only the fields they have.
  const std::size_t name_end = offsetof(ncclConfig_t, commName) + sizeof config->commName;
  if (config->size >= name_end && config->commName) comm.name = config->commName;
}

std::uint64_t derived_hash(std::uint64_t parent, int index, int color) {
  const std::int64_t input[3] = {static_cast<std::int64_t>(parent), index, color};
  return hash_bytes(input, sizeof input, 0x5117);
}

// Connects a derived comm whose members (ranks of parent, in new-rank order) have all-gathered
// their listeners, and hands it to the application.
ncclResult_t finish_derived(CommRef comm, int listener, std::span<const sockaddr_in> addresses,
                            ncclComm_t* out) {
  ncclResult_t result = connect_mesh(*comm, listener, addresses);
  close_fd(listener);
  if (result != ncclSuccess) return result;
  profiler::comm_init(*comm);
  *out = publish(std::move(comm));
  return ncclSuccess;
}

}  // namespace

Comm::~Comm() {
  for (PeerSockets& sockets : peers) {
    close_fd(sockets.control);
    close_fd(sockets.data);
  }
}

void Comm::shut_down_sockets(bool control_too) {
  for (PeerSockets& sockets : peers) {
    if (sockets.data >= 0) shutdown(sockets.data, SHUT_RDWR);
    if (control_too && sockets.control >= 0) shutdown(sockets.control, SHUT_RDWR);
  }
}

CommRef retain(ncclComm_t handle) {
  Registry& comms = registry();
  std::lock_guard lock(comms.mutex);
  auto found = comms.comms.find(reinterpret_cast<Comm*>(handle));
  return found == comms.comms.end() ? nullptr : found->second;
}

ncclComm_t publish(CommRef comm) {
  Registry& comms = registry();
  std::lock_guard lock(comms.mutex);
  Comm* handle = comm.get();
  comms.comms.emplace(handle, std::move(comm));
  return reinterpret_cast<ncclComm_t>(handle);
}

void unpublish(Comm* comm) {
  CommRef last;  // released outside the lock: closing sockets need not hold everybody up
  Registry& comms = registry();
  std::lock_guard lock(comms.mutex);
  auto found = comms.comms.find(comm);
  if (found == comms.comms.end()) return;
  last = std::move(found->second);
  comms.comms.erase(found);
}

ncclResult_t fail(ncclResult_t result, const char* format, ...) {
  char text[512];
  va_list arguments;
  va_start(arguments, format);
  std::vsnprintf(text, sizeof text, format, arguments);
  va_end(arguments);
  if (warnings_wanted()) std::fprintf(stderr, "fake_nccl WARN %s\n", text);
  LastError& store = last_error_store();
  std::lock_guard lock(store.mutex);
  store.text = text;
  return result;
}

const char* last_error() {
  thread_local std::string copy;
  LastError& store = last_error_store();
  std::lock_guard lock(store.mutex);
  copy = store.text;
  return copy.c_str();
}

ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config) {
  if (!out) return fail(ncclInvalidArgument, "comm is NULL");
  if (nranks <= 0 || rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "rank %d of %d ranks", rank, nranks);
  if (ncclResult_t result = check_config(config); result != ncclSuccess) return result;
  RootAddress root{};
  if (ncclResult_t result = decode_unique_id(id, &root); result != ncclSuccess) return result;
  auto comm = std::make_shared<Comm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->hash = hash_bytes(id.internal, sizeof id.internal, 0);
  apply_config(*comm, config, nullptr);
  if (ncclResult_t result = join_through_root(*comm, root); result != ncclSuccess) return result;
  profiler::comm_init(*comm);
  *out = publish(std::move(comm));
  return ncclSuccess;
}

ncclResult_t init_all(ncclComm_t* comms, int ndev) {
  if (!comms || ndev <= 0) return fail(ncclInvalidArgument, "ncclCommInitAll: %d devices", ndev);
  ncclUniqueId id;
  if (ncclResult_t result = make_unique_id(&id); result != ncclSuccess) return result;
  // One thread per rank, as an application would initialize one rank per GPU thread.
  std::vector<ncclResult_t> results(static_cast<std::size_t>(ndev), ncclSuccess);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < ndev; ++rank)
    ranks.emplace_back([&, rank] {
      results[static_cast<std::size_t>(rank)] = init_rank(&comms[rank], ndev, id, rank, nullptr);
    });
  for (std::thread& thread : ranks) thread.join();
  const auto failed = std::find_if(results.begin(), results.end(),
                                   [](ncclResult_t result) { return result != ncclSuccess; });
  if (failed == results.end()) return ncclSuccess;
  for (int rank = 0; rank < ndev; ++rank)
    if (results[static_cast<std::size_t>(rank)] == ncclSuccess)
      abort_comm(reinterpret_cast<Comm*>(comms[rank]));
  return *failed;
}

ncclResult_t split(Comm& parent, int color, int key, ncclComm_t* out, const ncclConfig_t* config) {
  if (!out) return fail(ncclInvalidArgument, "newcomm is NULL");
  *out = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, "split color %d", color);
  if (ncclResult_t result = check_config(config); result != ncclSuccess) return result;
  if (parent.aborted || parent.finalized)
    return fail(ncclInvalidUsage, "split of a finalized or aborted communicator");

  struct Entry {
    std::int32_t color;
    std::int32_t key;
    sockaddr_in address;
  };
  Entry mine{color, key, {}};
  int listener = -1;
  if (color != NCCL_SPLIT_NOCOLOR && (listener = open_listener(&mine.address)) < 0)
    return fail(ncclSystemError, "cannot listen: %s", strerror(errno));
  std::vector<Entry> all(static_cast<std::size_t>(parent.nranks));
  std::vector<int> everybody(static_cast<std::size_t>(parent.nranks));
  std::iota(everybody.begin(), everybody.end(), 0);
  const ncclResult_t result = control_allgather(parent, everybody, &mine, sizeof mine, all.data());
  const int index = parent.derived_count++;
  if (result != ncclSuccess || color == NCCL_SPLIT_NOCOLOR) {
    close_fd(listener);
    return result;
  }

  // New ranks: by key, ties by parent rank.
  std::vector<int> members;
  for (int rank = 0; rank < parent.nranks; ++rank)
    if (all[static_cast<std::size_t>(rank)].color == color) members.push_back(rank);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<std::size_t>(a)].key < all[static_cast<std::size_t>(b)].key;
  });
  auto comm = std::make_shared<Comm>();
  comm->nranks = static_cast<int>(members.size());
  comm->rank =
      static_cast<int>(std::find(members.begin(), members.end(), parent.rank) - members.begin());
  comm->hash = derived_hash(parent.hash, index, color);
  apply_config(*comm, config, &parent);
  std::vector<sockaddr_in> addresses;
  for (int member : members) addresses.push_back(all[static_cast<std::size_t>(member)].address);
  return finish_derived(std::move(comm), listener, addresses, out);
}

ncclResult_t shrink(Comm& parent, std::span<const int> excluded, ncclComm_t* out,
                    const ncclConfig_t* config, int flags) {
  if (!out) return fail(ncclInvalidArgument, "newcomm is NULL");
  *out = nullptr;
  if (ncclResult_t result = check_config(config); result != ncclSuccess) return result;
  std::vector<bool> removed(static_cast<std::size_t>(parent.nranks), false);
  for (int rank : excluded) {
    if (rank < 0 || rank >= parent.nranks)
      return fail(ncclInvalidArgument, "excluded rank %d of %d", rank, parent.nranks);
    removed[static_cast<std::size_t>(rank)] = true;
  }
  if (removed[static_cast<std::size_t>(parent.rank)])
    return fail(ncclInvalidArgument, "an excluded rank called ncclCommShrink");
  if (parent.aborted || parent.finalized)
    return fail(ncclInvalidUsage, "shrink of a finalized or aborted communicator");
  if (flags & NCCL_SHRINK_ABORT) revoke(parent);

  // Only the survivors take part (the excluded ones may be gone): they alone all-gather.
  std::vector<int> members;
  for (int rank = 0; rank < parent.nranks; ++rank)
    if (!removed[static_cast<std::size_t>(rank)]) members.push_back(rank);
  sockaddr_in mine{};
  int listener = open_listener(&mine);
  if (listener < 0) return fail(ncclSystemError, "cannot listen: %s", strerror(errno));
  std::vector<sockaddr_in> addresses(members.size());
  const ncclResult_t result =
      control_allgather(parent, members, &mine, sizeof mine, addresses.data());
  const int index = parent.derived_count++;
  if (result != ncclSuccess) {
    close_fd(listener);
    return result;
  }
  auto comm = std::make_shared<Comm>();
  comm->nranks = static_cast<int>(members.size());
  comm->rank =
      static_cast<int>(std::find(members.begin(), members.end(), parent.rank) - members.begin());
  comm->hash = derived_hash(parent.hash, index, kShrinkColor);
  apply_config(*comm, config, &parent);
  return finish_derived(std::move(comm), listener, addresses, out);
}

ncclResult_t finalize(Comm& comm) {
  if (comm.finalized) return fail(ncclInvalidUsage, "communicator finalized twice");
  if (comm.revoked) return fail(ncclInvalidUsage, "ncclCommFinalize after ncclCommRevoke");
  wait_for_comm_idle(comm);  // NCCL's finalize flushes the comm's outstanding work
  comm.finalized = true;
  return comm.async_error.load();
}

ncclResult_t destroy(Comm* handle) {
  CommRef comm = retain(reinterpret_cast<ncclComm_t>(handle));
  if (!comm) return fail(ncclInvalidArgument, "ncclCommDestroy of an unknown communicator");
  if (!comm->finalized) wait_for_comm_idle(*comm);  // destroy finalizes implicitly
  profiler::comm_finalize(*comm);
  unpublish(handle);
  return ncclSuccess;
}

ncclResult_t abort_comm(Comm* handle) {
  if (!handle) return ncclSuccess;
  CommRef comm = retain(reinterpret_cast<ncclComm_t>(handle));
  if (!comm) return fail(ncclInvalidArgument, "ncclCommAbort of an unknown communicator");
  {
    // Work not yet started will see the flag and not start; work running fails on the shut
    // sockets. Only then may the plugin's context go.
    std::unique_lock lock(comm->mutex);
    comm->aborted = true;
    comm->shut_down_sockets(true);
    comm->turn_changed.wait(lock, [&] { return !comm->executing; });
  }
  profiler::comm_finalize(*comm);
  unpublish(handle);
  return ncclSuccess;
}

ncclResult_t revoke(Comm& comm) {
  std::lock_guard lock(comm.mutex);
  comm.revoked = true;
  comm.shut_down_sockets(false);  // the control sockets stay for split and shrink
  return ncclSuccess;
}

ncclResult_t async_error(Comm& comm) {
  // A revoked comm is "in progress" until the work it stopped has drained.
  if (comm.revoked) return comm_has_pending_work(comm) ? ncclInProgress : ncclSuccess;
  return comm.async_error.load();
}

}  // namespace fake_nccl
