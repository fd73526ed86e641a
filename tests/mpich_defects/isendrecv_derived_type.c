/* MPICH 4.0.2 defect: MPI_Isendrecv (every form: _c, _replace, _replace_c) with a derived
 * datatype corrupts the library's datatype bookkeeping: a few calls in, the job dies with
 * "yaksu_handle_pool_elem_get: Assertion `handle_pool->handle_cache[handle]' failed" or a
 * segmentation fault (and MPI_Type_free can trip "ref_count >= 0"). Two ranks exchange two
 * vectors three times. With the defect the job crashes; without it, it exits 0. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Datatype vector;
  MPI_Type_vector(3, 2, 4, MPI_INT, &vector);
  MPI_Type_commit(&vector);
  int out[24] = {0}, in[24] = {0};
  const int peer = 1 - rank;
  for (int i = 0; i < 3; ++i) {
    MPI_Request request;
    MPI_Isendrecv(out, 2, vector, peer, 5, in, 2, vector, peer, 5, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  MPI_Type_free(&vector);
  if (rank == 0) printf("no defect\n");
  MPI_Finalize();
  return 0;
}
