// The point-to-point layer under commtap's all-reduce algorithms: one call's constants, the
// PMPI sends, receives and waits every message of the algorithms goes through (recording the
// call's steps when asked), the local reduction and the one fold order all ranks share.
// Internal to the algorithms (algorithms_flat.cpp, algorithms_hierarchical.cpp).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "collectives/topology.hpp"
#include "world/world.hpp"

namespace commtap::collectives {

// The steps of a recorded call: each message is listed when posted, with the request slot it
// waits in, and ends at the return of the first wait over that slot.
class StepRecorder {
 public:
  StepRecorder(std::vector<Step>& steps, Topology& topology) : steps_(steps), t_(topology) {}

  void posted(bool send, MPI_Comm comm, int peer, MPI_Count bytes, const MPI_Request* slot);
  void completed(const MPI_Request* requests, int n);

 private:
  int world_rank(MPI_Comm comm, int peer);

  std::vector<Step>& steps_;
  Topology& t_;
  std::vector<const MPI_Request*> slots_;  // parallel to steps_
  std::size_t open_ = 0;                   // steps before it have ended
};

// What every message and reduction of one all-reduce call shares.
struct Call {
  MPI_Datatype type;
  MPI_Op op;
  MPI_Aint extent;  // builtin types: extent == size
  bool yield;
  StepRecorder* steps;  // nullptr: this call is not recorded
  char* at(void* base, MPI_Count elements) const {
    return static_cast<char*>(base) + elements * extent;
  }
};

inline int wait_all(const Call& c, int n, MPI_Request* requests) {
  const int rc = world::wait_all(n, requests, c.yield);
  if (c.steps != nullptr && rc == MPI_SUCCESS) c.steps->completed(requests, n);
  return rc;
}

// Every message of commtap's own algorithms is posted through these two.
inline int isend(const Call& c, const void* buffer, MPI_Count count, int peer, MPI_Comm comm,
                 MPI_Request* request) {
  const int rc = PMPI_Isend_c(buffer, count, c.type, peer, 0, comm, request);
  if (c.steps != nullptr && rc == MPI_SUCCESS)
    c.steps->posted(true, comm, peer, count * c.extent, request);
  return rc;
}
inline int irecv(const Call& c, void* buffer, MPI_Count count, int peer, MPI_Comm comm,
                 MPI_Request* request) {
  const int rc = PMPI_Irecv_c(buffer, count, c.type, peer, 0, comm, request);
  if (c.steps != nullptr && rc == MPI_SUCCESS)
    c.steps->posted(false, comm, peer, count * c.extent, request);
  return rc;
}

inline int exchange(const Call& c, MPI_Comm comm, int peer, const void* send, MPI_Count send_count,
                    void* recv, MPI_Count recv_count) {
  MPI_Request requests[2];
  int rc = irecv(c, recv, recv_count, peer, comm, &requests[0]);
  if (rc != MPI_SUCCESS) return rc;
  rc = isend(c, send, send_count, peer, comm, &requests[1]);
  if (rc != MPI_SUCCESS) return rc;
  return wait_all(c, 2, requests);
}

inline int send(const Call& c, MPI_Comm comm, int peer, const void* buffer, MPI_Count count) {
  MPI_Request request;
  const int rc = isend(c, buffer, count, peer, comm, &request);
  return rc != MPI_SUCCESS ? rc : wait_all(c, 1, &request);
}

inline int receive(const Call& c, MPI_Comm comm, int peer, void* buffer, MPI_Count count) {
  MPI_Request request;
  const int rc = irecv(c, buffer, count, peer, comm, &request);
  return rc != MPI_SUCCESS ? rc : wait_all(c, 1, &request);
}

// inout = in op inout
inline int reduce(const Call& c, const void* in, void* inout, MPI_Count count) {
  return count == 0 ? MPI_SUCCESS : PMPI_Reduce_local_c(in, inout, count, c.type, c.op);
}

// COMMTAP_TEST_REVERSED_FOLD: this rank folds in the other order (see fold();
// reverse_folds_for_tests sets it).
inline bool reversed_fold_for_tests = false;

// buffer = slot(0) op (slot(1) op (... op slot(n - 1))): the one order in which every rank that
// folds the same n buffers does it (the highest first), so that all of them end with the same
// bits; floating-point sums in another association differ in the last ones.
template <typename Slot>
int fold(const Call& c, Slot slot, int n, void* buffer, MPI_Count count) {
  // The test's wrong order starts from slot(0) instead.
  const int first = reversed_fold_for_tests ? 0 : n - 1, step = reversed_fold_for_tests ? 1 : -1;
  std::memcpy(buffer, slot(first), static_cast<std::size_t>(count * c.extent));
  for (int i = first + step; i >= 0 && i < n; i += step)
    if (const int rc = reduce(c, slot(i), buffer, count); rc != MPI_SUCCESS) return rc;
  return MPI_SUCCESS;
}

// Returns the MPI error code of `expression` from the enclosing function unless it succeeded.
#define COMMTAP_TRY(expression)         \
  do {                                  \
    const int rc_ = (expression);       \
    if (rc_ != MPI_SUCCESS) return rc_; \
  } while (0)

}  // namespace commtap::collectives
