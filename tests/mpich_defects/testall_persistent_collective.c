/* MPICH 4.0.2 defect: MPI_Testall over completed persistent collective requests returns
 * MPI_ERR_IN_STATUS, where MPI_Waitall over the same requests returns MPI_SUCCESS. Exits 1 when
 * the defect is present. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int in = rank, out = 0;
  MPI_Request request;
  MPI_Allreduce_init(&in, &out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &request);
  MPI_Start(&request);
  int flag = 0, rc = MPI_SUCCESS;
  MPI_Status status;
  while (!flag && (rc = MPI_Testall(1, &request, &flag, &status)) == MPI_SUCCESS) {
  }
  const int testall_rc = rc;
  MPI_Start(&request);
  const int waitall_rc = MPI_Waitall(1, &request, &status);
  MPI_Request_free(&request);
  int defect = testall_rc != waitall_rc, any = 0;
  MPI_Allreduce(&defect, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (rank == 0)
    printf("MPI_Testall rc %d, MPI_Waitall rc %d: %s\n", testall_rc, waitall_rc,
           any ? "DEFECT PRESENT" : "no defect");
  MPI_Finalize();
  return any;
}
