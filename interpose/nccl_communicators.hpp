// NCCL communicators as commtap knows them. NCCL offers no way to ask a communicator who its
// members are, and a job without MPI has no other channel, so ids are made from what every
// member passes alike, without communicating:
// - ncclCommInitRank/InitRankConfig/InitRankScalable: from the ncclUniqueId bytes;
// - ncclCommSplit: from the parent's id, the number of splits and shrinks made from the parent
//   so far (every member calls them in the same order) and the color;
// - ncclCommShrink: likewise, with the excluded ranks instead of a color (only the survivors
//   call it, and they all pass the same list);
// - ncclCommInitAll: one process drives every device; its communicators form one clique.
// The profiler plugin (nccl_profiler_plugin.cpp) adopts the id of the communicator whose
// constructor is running on its thread, so that both ways of recording name it alike.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "world/communicators.hpp"

namespace commtap::interpose {

// What a constructor's wrapper knows before it calls the library; set on its thread for the
// duration of the call (t_nccl_construction), so that the profiler plugin's init, which NCCL
// calls from inside a blocking constructor, can take the same id.
struct NcclConstruction {
  std::int64_t id = 0;
  std::int64_t parent_id = 0;
  const char* created_by = "";
  int size = 0, rank = 0;
  // Set by the profiler plugin's init: the plugin records this communicator's collectives
  // (instances with kernel times, progress), so the wrapper must not record them too.
  bool profiled = false;
  // Set by the profiler plugin's init with `profiled`: add() publishes the communicator's state
  // there, for the plugin (whose init ran before the wrapper registered it) to keep its progress.
  std::atomic<world::CommState*>* profiler_state = nullptr;
};
extern thread_local NcclConstruction* t_nccl_construction;

class NcclCommunicators {
 public:
  struct Live {
    world::CommState* state = nullptr;  // nullptr: not known
    int device = 0;                     // the CUDA device it runs on
    bool profiled = false;              // see NcclConstruction::profiled
  };

  // Registers a communicator (a row for the trace and a state for sequence numbers and
  // progress). `comm` may be nullptr where only the profiler plugin knows the communicator
  // (NCCL loaded commtap as its plugin, without the wrappers). Returns the state.
  world::CommState* add(const void* comm, const NcclConstruction& made, int device);
  // After ncclCommDestroy or ncclCommAbort returned: the handle may be reused.
  void forget(const void* comm);
  Live find(const void* comm);

  // The id of the next communicator made from `parent` (split or shrink) with `salt` (the color,
  // or a hash of the excluded ranks); sets `parent_id` (0 if the parent is unknown: then the id
  // is made from the salt alone and may collide with another split's).
  std::int64_t child_id(const void* parent, std::uint64_t salt, std::int64_t& parent_id);
  // ncclCommInitAll's clique: an id unique to this process and call.
  std::int64_t next_clique_id();

 private:
  struct Entry {
    Live live;
    std::int64_t id = 0;
    std::uint64_t children = 0;  // splits and shrinks made from it so far
  };
  std::mutex mutex_;
  std::unordered_map<const void*, Entry> live_;
  std::uint64_t cliques_ = 0;
};

NcclCommunicators& nccl_communicators();

}  // namespace commtap::interpose
