/* MPICH 4.0.2 defect: MPI_Type_get_envelope on a type made by a large-count constructor is an
 * error ("use MPI_Type_get_envelope_c"), fatal under the default error handler. Here the error
 * handler of MPI_COMM_WORLD and MPI_COMM_SELF is MPI_ERRORS_RETURN so that the program can say
 * so; exits 1 when the defect is present. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Datatype big;
  MPI_Type_contiguous_c((MPI_Count)1 << 32, MPI_BYTE, &big);
  MPI_Type_commit(&big);
  int ni, na, nt, combiner;
  const int rc = MPI_Type_get_envelope(big, &ni, &na, &nt, &combiner);
  MPI_Count ci, ca, cc, ct;
  const int rc_c = MPI_Type_get_envelope_c(big, &ci, &ca, &cc, &ct, &combiner);
  printf("MPI_Type_get_envelope rc %d, MPI_Type_get_envelope_c rc %d (large counts %lld)\n", rc,
         rc_c, (long long)cc);
  MPI_Type_free(&big);
  printf(rc != MPI_SUCCESS ? "DEFECT PRESENT\n" : "no defect\n");
  MPI_Finalize();
  return rc != MPI_SUCCESS;
}
