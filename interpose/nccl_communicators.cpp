// NCCL communicators as commtap knows them (interpose/nccl_communicators.hpp).
#include "interpose/nccl_communicators.hpp"

#include <unistd.h>

#include "interpose/runtime.hpp"

namespace commtap::interpose {

thread_local NcclConstruction* t_nccl_construction = nullptr;

namespace {
constexpr std::uint64_t kChild = 0x6e63636c6368696cull;   // "ncclchil"
constexpr std::uint64_t kClique = 0x6e63636c616c6c21ull;  // "ncclall!"
}  // namespace

world::CommState* NcclCommunicators::add(const void* comm, const NcclConstruction& made,
                                         int device) {
  monitor::CommunicatorRow row;
  row.id = made.id;
  row.parent_id = made.parent_id;
  row.created_by = made.created_by;
  row.size = made.size;
  row.comm_rank = made.rank;
  world::CommState* state = runtime().communicators.add_other_library(row);
  if (made.profiler_state != nullptr) made.profiler_state->store(state, std::memory_order_release);
  if (comm != nullptr) {
    std::lock_guard lock(mutex_);
    Entry& entry = live_[comm];
    entry = Entry{};
    // NCCL raises no profiler event for a one-rank communicator's collectives (its one-rank
    // path): the wrapper records those whatever the plugin registered.
    entry.live = {state, device, made.profiled && made.size > 1};
    entry.id = made.id;
  }
  return state;
}

void NcclCommunicators::forget(const void* comm) {
  std::lock_guard lock(mutex_);
  live_.erase(comm);
}

NcclCommunicators::Live NcclCommunicators::find(const void* comm) {
  std::lock_guard lock(mutex_);
  auto found = live_.find(comm);
  return found == live_.end() ? Live{} : found->second.live;
}

std::int64_t NcclCommunicators::child_id(const void* parent, std::uint64_t salt,
                                         std::int64_t& parent_id) {
  std::lock_guard lock(mutex_);
  auto found = live_.find(parent);
  std::uint64_t child = 0;
  parent_id = 0;
  if (found != live_.end()) {
    parent_id = found->second.id;
    child = ++found->second.children;
  }
  return world::mix_id(
      static_cast<std::uint64_t>(world::mix_id(kChild, static_cast<std::uint64_t>(parent_id))),
      static_cast<std::uint64_t>(world::mix_id(child, salt)));
}

std::int64_t NcclCommunicators::next_clique_id() {
  std::lock_guard lock(mutex_);
  return world::mix_id(
      kClique, ++cliques_ + (std::uint64_t{1} << 40) * static_cast<std::uint64_t>(::getpid()));
}

NcclCommunicators& nccl_communicators() {
  static Immortal<NcclCommunicators> registry;
  return registry.value;
}

}  // namespace commtap::interpose
