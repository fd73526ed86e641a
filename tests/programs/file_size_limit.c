/* Runs allreduces under a file size limit set right after MPI_Init (RLIMIT_FSIZE, like a full
 * disk for commtap's writer, which then fails with EFBIG): the job must finish normally.
 *
 *   mpiexec -n <P> ./file_size_limit <limit in KiB> <allreduces> */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc < 3) {
    if (rank == 0) fprintf(stderr, "usage: %s <limit KiB> <allreduces>\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const struct rlimit limit = {(rlim_t)atol(argv[1]) * 1024, (rlim_t)atol(argv[1]) * 1024};
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0) MPI_Abort(MPI_COMM_WORLD, 3);
  const long n = atol(argv[2]);
  int64_t sum = 0;
  for (long i = 0; i < n; ++i) {
    int64_t value = rank + i, total = 0;
    MPI_Allreduce(&value, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    sum += total;
  }
  if (rank == 0) printf("sum %lld\n", (long long)sum);
  MPI_Finalize();
  return 0;
}
