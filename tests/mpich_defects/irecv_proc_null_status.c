/* MPICH 4.0.2 defect: a receive from MPI_PROC_NULL posted with MPI_Irecv completes with
 * source 0 and tag 0; MPI defines source MPI_PROC_NULL and tag MPI_ANY_TAG, which the
 * blocking MPI_Recv (and MPI_Imrecv of MPI_MESSAGE_NO_PROC) return. Exits 1 when the defect is
 * present. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int data[4];
  MPI_Status blocking, nonblocking;
  MPI_Request request;
  MPI_Recv(data, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &blocking);
  MPI_Irecv(data, 4, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, &nonblocking);
  printf("MPI_Recv: source %d tag %d; MPI_Irecv + MPI_Wait: source %d tag %d\n",
         blocking.MPI_SOURCE, blocking.MPI_TAG, nonblocking.MPI_SOURCE, nonblocking.MPI_TAG);
  const int defect = nonblocking.MPI_SOURCE != MPI_PROC_NULL || nonblocking.MPI_TAG != MPI_ANY_TAG;
  printf(defect ? "DEFECT PRESENT\n" : "no defect\n");
  MPI_Finalize();
  return defect;
}
