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

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "interpose/function_table.hpp"
#include "monitor/monitor.hpp"

namespace commtap::interpose {

class CommunicatorRegistry {
 public:
  // At MPI_Init: registers MPI_COMM_WORLD and MPI_COMM_SELF.
  void start(int world_rank);
  // After a creation call `fn` on `parent` returned MPI_SUCCESS; `created` may be
  // MPI_COMM_NULL (a rank left out by MPI_Comm_split or MPI_Comm_create). Collective: must be
  // called on every rank that made the call.
  void created(Fn fn, MPI_Comm parent, MPI_Comm created);
  // After MPI_Comm_free of `comm` (the handle as it was before the call).
  void freed(MPI_Comm comm);
  // The id of a live communicator, or 0 if commtap has not seen it being made.
  std::int64_t id_of(MPI_Comm comm) const;
  // Every communicator this rank belonged to since MPI_Init, live or freed.
  std::vector<monitor::CommunicatorRow> rows() const;

 private:
  struct Live {
    std::int64_t id;
    std::uint64_t collective_children;  // creation calls collective over all of its ranks
  };
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
  std::vector<monitor::CommunicatorRow> rows_;
  int world_rank_ = 0;
  std::uint64_t proposals_ = 0;
};

// A 63-bit positive id from two numbers (splitmix64 finalizer); never 0 or 1.
std::int64_t mix_id(std::uint64_t a, std::uint64_t b);

}  // namespace commtap::interpose
