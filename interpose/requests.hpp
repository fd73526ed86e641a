// Maps the MPI requests of intercepted nonblocking and persistent calls to the function that
// created them, so that whichever Wait/Test call completes them attributes the completion.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "interpose/function_table.hpp"

namespace commtap::interpose {

class RequestTable {
 public:
  struct Completed {
    Fn fn;
    std::uint64_t started_ns;
  };

  // A new request from an intercepted call. Persistent requests stay inactive until started.
  void track(MPI_Request request, Fn fn, std::uint64_t now_ns, bool persistent);
  // MPI_Start/Startall on a persistent request.
  void started(MPI_Request request, std::uint64_t now_ns);
  // A completion call finished `request`; nonblocking entries are removed, persistent ones
  // become inactive. Empty when commtap did not create the request or it was not active.
  std::optional<Completed> complete(MPI_Request request);
  // MPI_Request_free.
  void forget(MPI_Request request);
  // Fast check for the completion wrappers: nothing tracked means nothing to snapshot.
  bool empty() const { return size_.load(std::memory_order_relaxed) == 0; }
  void clear();

 private:
  struct Entry {
    Fn fn;
    std::uint64_t started_ns;
    bool persistent;
    bool active;
  };
  // Sharded so that MPI_THREAD_MULTIPLE programs completing requests on several threads do not
  // all queue on one lock.
  struct alignas(64) Shard {
    std::mutex mutex;
    std::unordered_map<MPI_Request, Entry> entries;
  };
  Shard& shard(MPI_Request request) {
    return shards_[std::hash<MPI_Request>{}(request) % shards_.size()];
  }
  std::array<Shard, 16> shards_;
  std::atomic<std::size_t> size_{0};
};

// A copy of the request handles passed to a completion call, taken before the call because MPI
// overwrites completed nonpersistent handles with MPI_REQUEST_NULL.
class RequestSnapshot {
 public:
  void take(const MPI_Request* requests, int count) {
    count_ = count < 0 ? 0 : count;
    if (count_ > static_cast<int>(inline_.size())) heap_.assign(requests, requests + count_);
    else std::copy(requests, requests + count_, inline_.begin());
  }
  MPI_Request operator[](int i) const {
    if (i < 0 || i >= count_) return MPI_REQUEST_NULL;
    return count_ > static_cast<int>(inline_.size()) ? heap_[i] : inline_[i];
  }
  int size() const { return count_; }

 private:
  int count_ = 0;
  std::array<MPI_Request, 16> inline_;  // left uninitialized: most calls never use it
  std::vector<MPI_Request> heap_;
};

}  // namespace commtap::interpose
