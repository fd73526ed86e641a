// A toy data-parallel training loop: compute, all-reduce the gradient, exchange a halo with the
// ring neighbours, and now and then broadcast parameters and meet at a barrier. It prints a
// checksum that depends on every exchanged value, so a run under commtap can be compared with
// a native run byte for byte.
//
//   mpiexec -n 4 ./toy_train [steps] [gradient elements] [slow rank] [its extra compute, us]
//                            [compute per step, us] [halo: 1 exchange (default), 0 none]
//
// The slow rank (none by default) sleeps that long before each all-reduce: the analyzer test's
// straggler. Every rank can also sleep a fixed time per step, a compute phase that leaves the
// cores free (the fault-injection runs put 4 ranks and their network on 2 cores). Without the
// halo exchange the job calls nothing but collectives, like data-parallel training.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  const int elements = argc > 2 ? std::atoi(argv[2]) : 4096;
  const int slow_rank = argc > 3 ? std::atoi(argv[3]) : -1;
  const long slow_us = argc > 4 ? std::atol(argv[4]) : 0;
  const long step_us = argc > 5 ? std::atol(argv[5]) : 0;
  const bool halo = argc > 6 ? std::atoi(argv[6]) != 0 : true;

  std::vector<std::int64_t> weights(elements, 1), gradient(elements), sum(elements);
  std::vector<std::int64_t> halo_out(64), halo_in(64);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  std::uint64_t checksum = 0;

  for (int step = 0; step < steps; ++step) {
    // "Compute": a deterministic gradient that depends on rank, step and the weights.
    for (int i = 0; i < elements; ++i)
      gradient[i] = (weights[i] * 31 + rank * 7 + step * 13 + i) % 1009;
    if (step_us > 0) {
      const timespec compute{step_us / 1000000, (step_us % 1000000) * 1000};
      nanosleep(&compute, nullptr);
    }
    if (rank == slow_rank && slow_us > 0) {
      const timespec pause{slow_us / 1000000, (slow_us % 1000000) * 1000};
      nanosleep(&pause, nullptr);
    }
    MPI_Allreduce(gradient.data(), sum.data(), elements, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < elements; ++i) weights[i] = (weights[i] + sum[i]) % 1000003;

    // Halo exchange with both neighbours, nonblocking.
    if (halo) {
      for (int i = 0; i < 64; ++i) halo_out[i] = weights[i] + rank;
      MPI_Request requests[2];
      MPI_Irecv(halo_in.data(), 64, MPI_INT64_T, left, step, MPI_COMM_WORLD, &requests[0]);
      MPI_Isend(halo_out.data(), 64, MPI_INT64_T, right, step, MPI_COMM_WORLD, &requests[1]);
      MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
      for (int i = 0; i < 64; ++i) checksum = checksum * 1099511628211ull + halo_in[i];
    }

    if (step % 10 == 9) {
      MPI_Bcast(weights.data(), elements, MPI_INT64_T, 0, MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  for (int i = 0; i < elements; ++i) checksum = checksum * 1099511628211ull + weights[i];
  std::uint64_t all[256] = {};
  MPI_Gather(&checksum, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size && r < 256; ++r)
      std::printf("rank %d checksum %016llx\n", r, static_cast<unsigned long long>(all[r]));
  }
  MPI_Finalize();
  return 0;
}
