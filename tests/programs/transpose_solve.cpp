// A spectral solver's loop, the shape of NPB FT or a distributed 3-D FFT and unlike the training
// loops: each step every rank computes for a time that varies from step to step and rank to rank
// (a deterministic jitter, as real kernels vary with cache and data), transposes its slab with
// MPI_Alltoall, and all-reduces a residual; every 10 steps rank 0 reduces a diagnostic vector and
// "writes" it (an extra pause on rank 0 alone: the program's own imbalance, like NPB's I/O on
// rank 0). The program sends no point-to-point messages of its own: every byte between hosts is
// the library's collective traffic. It prints a checksum that depends on every exchanged value,
// so a run under commtap can be compared with a native run byte for byte.
//
//   mpiexec -n 4 ./transpose_solve [steps] [elements per peer] [compute per step, us]
//                                  [jitter, % of the compute] [rank 0's output pause, us]
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace {

void compute_for(long us) {
  if (us <= 0) return;
  const timespec pause{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&pause, nullptr);
}

constexpr std::uint64_t kFnvPrime = 1099511628211ull;

// A fixed pseudo-random number per (rank, step): the same run after run, natively or not.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  const int per_peer = argc > 2 ? std::atoi(argv[2]) : 512;
  const long step_us = argc > 3 ? std::atol(argv[3]) : 0;
  const long jitter_percent = argc > 4 ? std::atol(argv[4]) : 25;
  const long output_us = argc > 5 ? std::atol(argv[5]) : step_us / 4;

  const std::size_t slab = static_cast<std::size_t>(per_peer) * size;
  std::vector<std::int64_t> field(slab), transposed(slab), diagnostic(per_peer), total(per_peer);
  for (std::size_t i = 0; i < slab; ++i) field[i] = static_cast<std::int64_t>(i + rank) % 997;
  std::uint64_t checksum = 0;
  for (int step = 0; step < steps; ++step) {
    // Compute: step_us +- jitter, and a deterministic update of the field.
    const std::uint64_t draw = mix(static_cast<std::uint64_t>(rank) << 32 | step);
    const long spread = step_us * jitter_percent / 100;
    compute_for(step_us + (spread > 0 ? static_cast<long>(draw % (2 * spread + 1)) - spread : 0));
    for (std::size_t i = 0; i < slab; ++i)
      field[i] = (field[i] * 7 + static_cast<std::int64_t>(i) + step) % 1000003;

    MPI_Alltoall(field.data(), per_peer, MPI_INT64_T, transposed.data(), per_peer, MPI_INT64_T,
                 MPI_COMM_WORLD);
    std::int64_t residual = 0, global_residual = 0;
    for (std::size_t i = 0; i < slab; ++i)
      residual = (residual + transposed[i] * (i % 5 + 1)) % 1000003;
    MPI_Allreduce(&residual, &global_residual, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    checksum = checksum * kFnvPrime + static_cast<std::uint64_t>(global_residual);
    for (std::size_t i = 0; i < slab; ++i) field[i] = (transposed[i] + global_residual) % 1000003;

    if (step % 10 == 9) {
      for (int i = 0; i < per_peer; ++i) diagnostic[i] = field[i] % 101;
      MPI_Reduce(diagnostic.data(), total.data(), per_peer, MPI_INT64_T, MPI_SUM, 0,
                 MPI_COMM_WORLD);
      if (rank == 0) {
        for (int i = 0; i < per_peer; ++i) checksum = checksum * kFnvPrime + total[i];
        compute_for(output_us);  // writing the diagnostic out
      }
    }
  }
  for (std::size_t i = 0; i < slab; ++i) checksum = checksum * kFnvPrime + field[i];
  std::vector<std::uint64_t> all(rank == 0 ? size : 1);
  MPI_Gather(&checksum, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r)
      std::printf("rank %d checksum %016llx\n", r, static_cast<unsigned long long>(all[r]));
  }
  MPI_Finalize();
  return 0;
}
