#include "world/communicators.hpp"

#include "world/world.hpp"

#include <algorithm>
#include <array>
#include <string>

namespace commtap::world {

std::int64_t mix_id(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  const auto id = static_cast<std::int64_t>(x >> 1);
  return id > 1 ? id : id + 2;  // 0 means unknown and 1 is MPI_COMM_WORLD
}

std::int64_t id_from_bytes(const void* bytes, std::size_t size) {
  std::uint64_t hash = 0x6e63636cull;  // "nccl", its first user: ids as before the move
  for (std::size_t i = 0; i < size; ++i)
    hash = static_cast<std::uint64_t>(mix_id(hash, static_cast<const unsigned char*>(bytes)[i]));
  return mix_id(hash, 0x1d);
}

namespace {
// Each way of making an id mixes in its own constant first, so that ids made in different ways
// from equal numbers (world rank 0's first proposal, the world's first derived child) differ.
constexpr std::uint64_t kProposed = 0x70726f706f736564ull;
constexpr std::uint64_t kDerived = 0x6465726976656421ull;
constexpr std::uint64_t kWindow = 0x77696e646f777321ull;
constexpr std::uint64_t kUnseen = 0x756e7365656e2121ull;
constexpr std::uint64_t kSelf = 0x73656c6621212121ull;
}  // namespace

void CommunicatorRegistry::start(int world_rank) {
  std::lock_guard lock(mutex_);
  world_rank_ = world_rank;
  add(MPI_COMM_WORLD, MPI_COMM_WORLD, 1, 0, "MPI_COMM_WORLD");
  add(MPI_COMM_SELF, MPI_COMM_SELF, mix_id(kSelf, static_cast<std::uint64_t>(world_rank)), 0,
      "MPI_COMM_SELF");
}

void CommunicatorRegistry::add(MPI_Comm comm, MPI_Comm describe, std::int64_t id,
                               std::int64_t parent_id, const char* created_by) {
  monitor::CommunicatorRow row;
  row.id = id;
  row.parent_id = parent_id;
  row.created_by = created_by;
  int inter = 0;
  PMPI_Comm_test_inter(describe, &inter);
  row.inter = inter != 0;
  PMPI_Comm_size(describe, &row.size);
  PMPI_Comm_rank(describe, &row.comm_rank);
  CommState* state = new_state(id);
  // Point-to-point peers are recorded as world ranks, so every member keeps the translation
  // (of the remote group for an intercommunicator).
  if (comm != MPI_COMM_WORLD) {
    MPI_Group group = MPI_GROUP_NULL;
    if (row.inter)
      PMPI_Comm_remote_group(describe, &group);
    else
      PMPI_Comm_group(describe, &group);
    state->world_ranks = world_ranks_of(group);
    PMPI_Group_free(&group);
  }
  // The member list is stored once per communicator, by its rank 0: stored by every member it
  // would grow with the square of the job size.
  if (row.comm_rank == 0) {
    std::vector<int> global;
    if (row.inter || comm == MPI_COMM_WORLD) {
      MPI_Group group = MPI_GROUP_NULL;
      PMPI_Comm_group(describe, &group);
      global = world_ranks_of(group);
      PMPI_Group_free(&group);
    } else {
      global = state->world_ranks;
    }
    for (std::size_t i = 0; i < global.size(); ++i) {
      if (i > 0) row.members += ',';
      row.members += global[i] == MPI_UNDEFINED ? std::string("?") : std::to_string(global[i]);
    }
  }
  live_[comm] = Live{state, 0};
  rows_.push_back(std::move(row));
}

std::int64_t CommunicatorRegistry::identify_unseen(MPI_Comm comm) {
  // Made by a call commtap does not intercept (MPI_Intercomm_create, MPI_Cart_create, ...). It is
  // identified by its membership (world ranks of its local and remote groups, in order) and how
  // many communicators of that membership this rank has identified so far: every member meets
  // it at the same collective call, in the same order relative to its other communicators.
  std::uint64_t membership = 0x1d;
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  for (int side = 0; side < (inter ? 2 : 1); ++side) {
    MPI_Group group = MPI_GROUP_NULL;
    if (side == 0)
      PMPI_Comm_group(comm, &group);
    else
      PMPI_Comm_remote_group(comm, &group);
    const std::vector<int> global = world_ranks_of(group);
    // The two sides in a fixed order, so both groups of an intercommunicator agree.
    std::uint64_t side_hash = 0x51de;
    for (int rank : global)
      side_hash = static_cast<std::uint64_t>(mix_id(side_hash, static_cast<std::uint64_t>(rank)));
    membership = side == 0 ? side_hash : membership;
    if (side == 1)
      membership = static_cast<std::uint64_t>(
          mix_id(std::min(membership, side_hash), std::max(membership, side_hash)));
    PMPI_Group_free(&group);
  }
  const std::int64_t id = mix_id(static_cast<std::uint64_t>(mix_id(kUnseen, membership)),
                                 ++unseen_by_membership_[membership]);
  add(comm, comm, id, 0, "unseen");
  return id;
}

void CommunicatorRegistry::created(Creation how, const char* created_by, MPI_Comm parent,
                                   MPI_Comm created) {
  std::unique_lock lock(mutex_);
  auto found = live_.find(parent);
  if (found == live_.end()) {
    identify_unseen(parent);
    found = live_.find(parent);
  }
  const std::int64_t parent_id = found->second.state->id;
  std::uint64_t ordinal = 0;
  if (how != Creation::subgroup) ordinal = ++found->second.collective_children;
  if (created == MPI_COMM_NULL) return;

  const bool pending = how == Creation::pending;
  int inter = 0;
  PMPI_Comm_test_inter(pending ? parent : created, &inter);
  std::int64_t id = 0;
  if (pending || inter) {
    id = mix_id(static_cast<std::uint64_t>(mix_id(kDerived, static_cast<std::uint64_t>(parent_id))),
                ordinal);
  } else {
    int comm_rank = 0;
    PMPI_Comm_rank(created, &comm_rank);
    if (comm_rank == 0)
      id = mix_id(
          static_cast<std::uint64_t>(mix_id(kProposed, static_cast<std::uint64_t>(world_rank_))),
          ++proposals_);
    // Not under the lock: other threads may make communicators meanwhile (MPI_THREAD_MULTIPLE).
    lock.unlock();
    PMPI_Bcast(&id, 1, MPI_INT64_T, 0, created);
    lock.lock();
  }
  add(created, pending ? parent : created, id, parent_id, created_by);
}

CommState* CommunicatorRegistry::add_other_library(const monitor::CommunicatorRow& row) {
  std::lock_guard lock(mutex_);
  rows_.push_back(row);
  return new_state(row.id);
}

void CommunicatorRegistry::freed(MPI_Comm comm) {
  std::lock_guard lock(mutex_);
  live_.erase(comm);
  generation_.fetch_add(1, std::memory_order_release);
}

void CommunicatorRegistry::window_created(MPI_Comm comm, MPI_Win win) {
  auto window = std::make_unique<Window>();
  PMPI_Comm_rank(comm, &window->rank);
  PMPI_Comm_size(comm, &window->size);
  // The window's group is its communicator's (an intracommunicator: MPI allows no other), listed
  // by world rank even for MPI_COMM_WORLD's, whose communicator state leaves the list empty.
  MPI_Group group = MPI_GROUP_NULL;
  PMPI_Comm_group(comm, &group);
  window->sync.world_ranks = world_ranks_of(group);
  PMPI_Group_free(&group);
  std::lock_guard lock(mutex_);
  auto found = live_.find(comm);
  if (found == live_.end()) {
    identify_unseen(comm);
    found = live_.find(comm);
  }
  window->sync.id = mix_id(static_cast<std::uint64_t>(mix_id(
                               kWindow, static_cast<std::uint64_t>(found->second.state->id))),
                           ++found->second.windows);
  windows_[win] = std::move(window);
}

Window* CommunicatorRegistry::window(MPI_Win win) {
  std::lock_guard lock(mutex_);
  auto found = windows_.find(win);
  return found == windows_.end() ? nullptr : found->second.get();
}

void CommunicatorRegistry::window_freed(MPI_Win win) {
  std::lock_guard lock(mutex_);
  windows_.erase(win);
}

std::int64_t CommunicatorRegistry::id_of(MPI_Comm comm) const {
  std::lock_guard lock(mutex_);
  auto found = live_.find(comm);
  return found == live_.end() ? 0 : found->second.state->id;
}

CommState* CommunicatorRegistry::new_state(std::int64_t id) {
  states_.push_back(std::make_unique<CommState>());
  states_.back()->id = id;
  return states_.back().get();
}

CommState* CommunicatorRegistry::state_of(MPI_Comm comm) {
  return lookup(comm, true, monitor::this_thread().communicators);
}

CommState* CommunicatorRegistry::known(MPI_Comm comm) {
  return lookup(comm, false, monitor::this_thread().communicators);
}

CommState* CommunicatorRegistry::lookup_missed(MPI_Comm comm, bool identify,
                                               monitor::HandleCache& cache) {
  // Most threads use one to three communicators: four entries, round robin, all dropped when a
  // handle is freed (its value may come back as another communicator).
  const std::uint64_t generation = generation_.load(std::memory_order_acquire);
  if (cache.owner != this || cache.generation != generation)
    cache = monitor::HandleCache{this, generation};
  CommState* state = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto found = live_.find(comm);
    if (found == live_.end()) {
      if (!identify || comm == MPI_COMM_NULL) return nullptr;
      identify_unseen(comm);
      found = live_.find(comm);
    }
    state = found->second.state;
  }
  const unsigned slot = cache.next++ % cache.keys.size();
  cache.keys[slot] = key_of(comm);
  cache.values[slot] = state;
  return state;
}

std::vector<monitor::CommProgress> CommunicatorRegistry::progress() const {
  std::lock_guard lock(mutex_);
  std::vector<monitor::CommProgress> out;
  out.reserve(states_.size());
  for (const auto& state : states_)
    out.push_back({state->id, state->started.load(std::memory_order_relaxed),
                   state->completed.load(std::memory_order_relaxed)});
  return out;
}

std::vector<monitor::CommunicatorRow> CommunicatorRegistry::rows_since(std::size_t& cursor) const {
  std::lock_guard lock(mutex_);
  std::vector<monitor::CommunicatorRow> out(
      rows_.begin() + static_cast<std::ptrdiff_t>(std::min(cursor, rows_.size())), rows_.end());
  cursor = rows_.size();
  return out;
}

}  // namespace commtap::world
