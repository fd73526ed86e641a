#include <vector>

#include "monitor/clock.hpp"
#include "world/world.hpp"

namespace commtap::world {

// Nonblocking calls completed with yielding waits: ranks waiting for their turn on an
// oversubscribed node must not starve rank 0.
monitor::ClockOffset estimate_clock_offset(MPI_Comm comm) {
  constexpr int kExchanges = 12;
  constexpr int kTag = 7;
  int rank = 0, size = 1;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  if (rank == 0) {
    for (int peer = 1; peer < size; ++peer) {
      for (int i = 0; i < kExchanges; ++i) {
        std::uint64_t request = 0;
        MPI_Request pending;
        PMPI_Irecv(&request, 1, MPI_UINT64_T, peer, kTag, comm, &pending);
        wait_all(1, &pending, true);
        std::uint64_t now = monitor::now_ns();
        PMPI_Isend(&now, 1, MPI_UINT64_T, peer, kTag, comm, &pending);
        wait_all(1, &pending, true);
      }
    }
    return {0, 0};
  }
  std::vector<monitor::ClockSample> samples;
  for (int i = 0; i < kExchanges; ++i) {
    monitor::ClockSample sample;
    sample.sent_ns = monitor::now_ns();
    MPI_Request requests[2];
    PMPI_Irecv(&sample.reference_ns, 1, MPI_UINT64_T, 0, kTag, comm, &requests[0]);
    PMPI_Isend(&sample.sent_ns, 1, MPI_UINT64_T, 0, kTag, comm, &requests[1]);
    wait_all(2, requests, true);
    sample.received_ns = monitor::now_ns();
    samples.push_back(sample);
  }
  return monitor::estimate_offset(samples);
}

}  // namespace commtap::world
