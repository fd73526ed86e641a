// Communicator identity: an id that every member rank of a communicator agrees on, so that the
// same collective can be lined up across ranks by (communicator id, sequence number).
//
// How ids are agreed, without assuming anything about how ranks are placed:
// - MPI_COMM_WORLD is 1; MPI_COMM_SELF gets an id derived from the world rank.
// - A new intracommunicator's rank 0 proposes an id made from its world rank and a counter of
//   its own proposals (unique in the job), and broadcasts it on the new communicator inside the
//   creating wrapper, before the application can use the communicator (so the broadcast cannot
//   be confused with the application's collectives, which MPI orders per communicator).
// - MPI_Comm_idup's communicator cannot be used before its request completes, and an
//   intercommunicator has no single rank 0: their ids are derived from the parent's id and a
//   counter of the creation calls that are collective over the whole parent (all but
//   MPI_Comm_create_group), which every parent rank advances in the same order.
// - A parent commtap did not see being made (MPI_Intercomm_create, MPI_Cart_create, ...) is
//   identified when first used as a parent, from its membership (identify_unseen).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "monitor/thread_state.hpp"
#include "monitor/trace_schema.hpp"
#include "monitor/trace_writer.hpp"

namespace commtap::world {

// The per-communicator state the hot path needs. Never freed while the process lives, so a
// pointer held by a request or a thread's cache stays valid after MPI_Comm_free.
struct CommState {
  std::int64_t id = 0;
  // Collectives started on this communicator by this rank. MPI requires all ranks to start a
  // communicator's collectives in the same order (and never concurrently), so the n-th one has
  // sequence number n on every member: (id, seq) names one collective instance job-wide.
  std::atomic<std::uint64_t> started{0};
  std::uint64_t next_seq() {
    const std::uint64_t seq = started.load(std::memory_order_relaxed) + 1;
    started.store(seq, std::memory_order_relaxed);
    return seq;
  }
  // The highest sequence number completed (nonblocking collectives may complete out of order,
  // and in any thread). `only_thread`: no other thread can be completing one now (the process
  // is not MPI_THREAD_MULTIPLE), so a plain store does, without a locked instruction.
  std::atomic<std::uint64_t> completed{0};
  void completed_seq(std::uint64_t seq, bool only_thread) {
    std::uint64_t seen = completed.load(std::memory_order_relaxed);
    if (only_thread) {
      if (seen < seq) completed.store(seq, std::memory_order_relaxed);
      return;
    }
    while (seen < seq && !completed.compare_exchange_weak(seen, seq, std::memory_order_relaxed)) {
    }
  }
  // The sequence number from which its next blocking collective is a link-probe decision point
  // (interpose/runtime.cpp, probes::LinkProber): 1 until the first one, where the prober says
  // whether it probes on this communicator at all (UINT64_MAX: never). Read on every blocking
  // collective; written at those points only, which every member reaches at the same seq.
  std::atomic<std::uint64_t> probe_at{1};
  // An intercommunicator's link-probe members: the world ranks of both its groups, ascending (the
  // same list on either side), filled at its first decision point (interpose/runtime.cpp).
  std::vector<int> probe_members;
  // World rank of each rank of the communicator (of the remote group, for an
  // intercommunicator: the ranks point-to-point calls name). Empty for MPI_COMM_WORLD.
  std::vector<int> world_ranks;
  int world_rank_of(int rank) const {
    if (world_ranks.empty()) return rank;
    return rank >= 0 && static_cast<std::size_t>(rank) < world_ranks.size()
               ? world_ranks[static_cast<std::size_t>(rank)]
               : -1;
  }
};

// A one-sided window as the link probes see it: its fences are collective over its group, in
// one order on every member, as a communicator's blocking collectives are (`sync` numbers them).
struct Window {
  CommState sync;  // id, fence sequence numbers, probe decision point, members' world ranks
  int rank = 0;    // this rank's in the window's group
  int size = 0;
};

class CommunicatorRegistry {
 public:
  // The state of `comm` for the hot path: this thread's cache of recent communicators (`cache`,
  // its monitor::ThreadState's, which the overloads without it fetch themselves), else a locked
  // lookup; a communicator commtap did not see being made is identified on first use. Called
  // only after a call on `comm` succeeded (so `comm` is valid: identifying it queries the
  // library, which would raise an error on a handle that is not one).
  CommState* state_of(MPI_Comm comm, monitor::HandleCache& cache) {
    return lookup(comm, true, cache);
  }
  CommState* state_of(MPI_Comm comm);
  // The state of `comm` if commtap knows it already, else nullptr: safe before a call, on any
  // handle the application passes.
  CommState* known(MPI_Comm comm, monitor::HandleCache& cache) {
    return lookup(comm, false, cache);
  }
  CommState* known(MPI_Comm comm);
  // At MPI_Init: registers MPI_COMM_WORLD and MPI_COMM_SELF.
  void start(int world_rank);
  // How a creation call involves its parent's ranks.
  enum class Creation {
    collective,  // every rank of the parent calls it (MPI_Comm_dup, _split, _create, ...)
    subgroup,    // only the new communicator's ranks call it (MPI_Comm_create_group)
    pending,     // collective, but the result may not be touched yet (MPI_Comm_idup)
  };
  // After a creation call named `created_by` on `parent` returned MPI_SUCCESS; `created` may be
  // MPI_COMM_NULL (a rank left out by MPI_Comm_split or MPI_Comm_create). Collective: must be
  // called on every rank that made the call.
  void created(Creation how, const char* created_by, MPI_Comm parent, MPI_Comm created);
  // A communicator of another library (NCCL), identified by its caller: its row, and a state
  // whose sequence numbers and progress (entered, completed) the windows report as an MPI
  // communicator's. Makes no MPI call.
  CommState* add_other_library(const monitor::CommunicatorRow& row);
  // After MPI_Comm_free of `comm` (the handle as it was before the call).
  void freed(MPI_Comm comm);
  // After a window was made on `comm` (collective: every member of `comm` calls it, in the same
  // order): its id, agreed as an MPI_Comm_idup's is, from the communicator's id and a count of
  // the windows made on it. Windows are not communicators: they have no row and no progress.
  void window_created(MPI_Comm comm, MPI_Win win);
  // The window `win` if commtap saw it being made, else nullptr. Valid until it is freed.
  Window* window(MPI_Win win);
  // After MPI_Win_free of `win` (the handle as it was before the call).
  void window_freed(MPI_Win win);
  // The id of a live communicator, or 0 if commtap has not seen it being made.
  std::int64_t id_of(MPI_Comm comm) const;
  // The communicators this rank joined since `cursor` (a count the caller keeps; rows never
  // change once added), live or freed: the writer writes each row once, so a job that makes
  // and frees communicators by the hundred thousand costs each window only its new ones.
  std::vector<monitor::CommunicatorRow> rows_since(std::size_t& cursor) const;
  // Collectives entered and completed on each of them.
  std::vector<monitor::CommProgress> progress() const;

 private:
  // A hit in `cache` inline (a load of the generation and up to four compares), the rest not.
  [[gnu::always_inline]] CommState* lookup(MPI_Comm comm, bool identify,
                                           monitor::HandleCache& cache) {
    const std::uint64_t key = key_of(comm);
    if (cache.owner == this && cache.generation == generation_.load(std::memory_order_acquire))
      for (unsigned i = 0; i < cache.keys.size(); ++i)
        if (cache.values[i] != nullptr && cache.keys[i] == key)
          return static_cast<CommState*>(cache.values[i]);
    return lookup_missed(comm, identify, cache);
  }
  CommState* lookup_missed(MPI_Comm comm, bool identify, monitor::HandleCache& cache);
  // A handle's bits (an int in some MPI libraries, a pointer in others) as a cache key.
  static std::uint64_t key_of(MPI_Comm comm) {
    static_assert(sizeof(MPI_Comm) <= sizeof(std::uint64_t));
    std::uint64_t key = 0;
    std::memcpy(&key, &comm, sizeof comm);
    return key;
  }
  struct Live {
    CommState* state;
    std::uint64_t collective_children;  // creation calls collective over all of its ranks
    std::uint64_t windows = 0;          // windows made on it
  };
  CommState* new_state(std::int64_t id);
  // `describe` is the communicator whose size, rank and group are read: `comm` itself, or the
  // parent for MPI_Comm_idup, whose result may not be touched before its request completes
  // (a duplicate has its parent's group).
  void add(MPI_Comm comm, MPI_Comm describe, std::int64_t id, std::int64_t parent_id,
           const char* created_by);

  // Registers a communicator commtap did not see being made; returns its id.
  std::int64_t identify_unseen(MPI_Comm comm);

  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::uint64_t> unseen_by_membership_;
  std::unordered_map<MPI_Comm, Live> live_;
  std::vector<std::unique_ptr<CommState>> states_;
  // Bumped when a handle is freed (its value may be reused): thread caches older than this are
  // discarded.
  std::atomic<std::uint64_t> generation_{1};
  std::vector<monitor::CommunicatorRow> rows_;
  std::unordered_map<MPI_Win, std::unique_ptr<Window>> windows_;
  int world_rank_ = 0;
  std::uint64_t proposals_ = 0;
};

// A 63-bit positive id from two numbers (splitmix64 finalizer); never 0 or 1.
std::int64_t mix_id(std::uint64_t a, std::uint64_t b);
// An id from bytes every member of a communicator holds alike (NCCL's ncclUniqueId).
std::int64_t id_from_bytes(const void* bytes, std::size_t size);

}  // namespace commtap::world
