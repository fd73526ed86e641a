/* Rank 0 reads input and writes checkpoints while the others wait in MPI_Bcast/MPI_Barrier. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int steps = argc > 1 ? atoi(argv[1]) : 300;
  const int n = 1 << 16;
  double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n);
  char path[256];
  snprintf(path, sizeof path, "/tmp/rank0io-%d.bin", (int)getppid());
  if (rank == 0) { /* "read input": write then read a file */
    FILE* f = fopen(path, "wb");
    for (int i = 0; i < n; i++) a[i] = i * 0.5;
    fwrite(a, sizeof(double), n, f);
    fclose(f);
    f = fopen(path, "rb");
    if (fread(a, sizeof(double), n, f) != (size_t)n) abort();
    fclose(f);
  }
  MPI_Bcast(a, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  double total = 0;
  for (int s = 0; s < steps; s++) {
    for (int i = rank; i < n; i += size) a[i] = a[i] * 0.99 + 1.0;
    for (int rep = 0; rep < 20; rep++)
      for (int i = 0; i < n; i++) b[i] = a[i] * a[i] * 1e-9 + b[i] * 0.5;
    MPI_Allreduce(MPI_IN_PLACE, a, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double loc = b[rank], sum;
    MPI_Reduce(&loc, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) total += sum;
    if (s % 20 == 19) { /* checkpoint: rank 0 writes 8 MiB and fsyncs, others wait at the barrier */
      if (rank == 0) {
        FILE* f = fopen(path, "wb");
        for (int k = 0; k < 16; k++) fwrite(a, sizeof(double), n, f);
        fflush(f);
        fsync(fileno(f));
        fclose(f);
        printf("checkpoint at step %d\n", s + 1);
        fflush(stdout);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  if (rank == 0) {
    printf("rank0io: %d steps, total %.17g a[7]=%.17g\n", steps, total, a[7]);
    unlink(path);
  }
  MPI_Finalize();
  return 0;
}
