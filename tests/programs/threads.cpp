// MPI_THREAD_MULTIPLE: several threads per rank, each on its own communicator, exchanging with
// the partner rank and reducing. Prints a checksum from rank 0; the interception test checks
// that every thread's calls and completions were counted exactly.
//
//   mpiexec -n <even> ./threads <threads> <iterations>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "MPI_THREAD_MULTIPLE not provided\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 50;
  const int partner = rank ^ 1;

  std::vector<MPI_Comm> comms(threads);
  for (auto& comm : comms) MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  std::vector<std::uint64_t> sums(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < iterations; ++i) {
        int out = rank * 100000 + t * 1000 + i, in = -1, total = 0;
        MPI_Request requests[2];
        MPI_Irecv(&in, 1, MPI_INT, partner, i, comms[t], &requests[0]);
        MPI_Isend(&out, 1, MPI_INT, partner, i, comms[t], &requests[1]);
        MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
        MPI_Allreduce(&in, &total, 1, MPI_INT, MPI_SUM, comms[t]);
        sums[t] = sums[t] * 31 + static_cast<std::uint64_t>(in) + static_cast<std::uint64_t>(total);
      }
    });
  }
  for (auto& thread : pool) thread.join();
  for (auto& comm : comms) MPI_Comm_free(&comm);

  std::uint64_t mine = 0;
  for (std::uint64_t s : sums) mine = mine * 1099511628211ull + s;
  std::vector<std::uint64_t> all(size);
  MPI_Gather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0)
    for (int r = 0; r < size; ++r)
      std::printf("rank %d checksum %016llx\n", r, static_cast<unsigned long long>(all[r]));
  MPI_Finalize();
  return 0;
}
