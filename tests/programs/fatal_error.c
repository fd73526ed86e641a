/* An MPI call that fails where the error handler is MPI_ERRORS_ARE_FATAL: MPI aborts the job.
 * On a communicator that orders the ranks backwards (comm rank = size - 1 - world rank), world
 * rank 1 sends to world rank 0 with a negative tag (MPI_ERR_TAG) while the others wait in a
 * barrier. Before that every rank checks what the error handlers look like to it (MPI_ERRORS_ARE_
 * FATAL on MPI_COMM_WORLD, MPI_COMM_SELF and the new communicator, by MPI_Comm_get_errhandler and
 * MPI_Errhandler_get) and that a communicator given MPI_ERRORS_RETURN gets the error back.
 *
 *   mpiexec -n 2+ ./fatal_error [returned]   (returned: no fatal error; every rank finalizes) */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int shows_fatal(MPI_Comm comm, int old_call) {
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  if (old_call)
    MPI_Errhandler_get(comm, &handler);
  else
    MPI_Comm_get_errhandler(comm, &handler);
  const int fatal = handler == MPI_ERRORS_ARE_FATAL;
  MPI_Errhandler_free(&handler);
  return fatal;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int fatal_error = !(argc > 1 && strcmp(argv[1], "returned") == 0);
  int rank = 0, size = 1, value = 7;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm backwards;
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &backwards);
  const int shown = shows_fatal(MPI_COMM_WORLD, 0) + shows_fatal(MPI_COMM_SELF, 0) +
                    shows_fatal(backwards, 0) + shows_fatal(backwards, 1);
  MPI_Comm returning;
  MPI_Comm_dup(MPI_COMM_WORLD, &returning);
  MPI_Comm_set_errhandler(returning, MPI_ERRORS_RETURN);
  const int returned = MPI_Send(&value, 1, MPI_INT, 0, -5, returning) != MPI_SUCCESS;
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(returning, &handler);
  const int kept = handler == MPI_ERRORS_RETURN;
  MPI_Errhandler_free(&handler);
  int all = 0, mine = shown == 4 && returned && kept;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    printf("ranks that saw the error handlers as they set them: %d of %d\n", all, size);
  fflush(stdout);
  if (fatal_error && rank == 1) MPI_Send(&value, 1, MPI_INT, size - 1, -5, backwards);
  if (fatal_error) MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&returning);
  MPI_Comm_free(&backwards);
  MPI_Finalize();
  return 0;
}
