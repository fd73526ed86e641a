/* MPICH 4.0.2 behaviour: small sends complete at once and share one request handle, so a
 * request handle is not an identity. Rank 0 posts 8 small MPI_Isend to rank 1 (which has
 * pre-posted the receives) and prints the handles; exits 1 when two outstanding requests hold
 * the same value. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  enum { N = 8 };
  double data[N][3] = {{0}};
  MPI_Request requests[N];
  int shared = 0;
  if (rank == 1)
    for (int i = 0; i < N; ++i)
      MPI_Irecv(data[i], 3, MPI_DOUBLE, 0, i, MPI_COMM_WORLD, &requests[i]);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    for (int i = 0; i < N; ++i)
      MPI_Isend(data[i], 3, MPI_DOUBLE, 1, i, MPI_COMM_WORLD, &requests[i]);
    for (int i = 0; i < N; ++i) {
      printf("Isend %d: request 0x%x\n", i, (unsigned)requests[i]);
      for (int j = 0; j < i; ++j) shared |= requests[i] == requests[j];
    }
    printf(shared ? "DEFECT PRESENT (handles shared)\n" : "no defect\n");
  }
  MPI_Waitall(N, requests, MPI_STATUSES_IGNORE);
  MPI_Bcast(&shared, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return shared;
}
