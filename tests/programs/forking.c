/* A rank that forks: one child runs a shell command through system(), another stays alive past
 * the parent's MPI_Finalize and then calls exit(), which runs atexit handlers. Neither child may
 * record anything or touch the rank's trace database.
 *
 *   mpiexec -n 2 ./forking */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, value = 1, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  if (system("true") != 0) fprintf(stderr, "system() failed\n");

  int gate[2];
  if (pipe(gate) != 0) MPI_Abort(MPI_COMM_WORLD, 2);
  pid_t child = fork();
  if (child == 0) {
    /* Wait until the parent has finalized, then leave through exit() and its atexit handlers. */
    close(gate[1]);
    char byte;
    while (read(gate[0], &byte, 1) > 0) {
    }
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF); /* must not be counted */
    exit(0);
  }
  close(gate[0]);
  for (int i = 0; i < 4; ++i) MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  close(gate[1]);
  int status = 0;
  waitpid(child, &status, 0);
  if (rank == 0)
    printf("sum %d, child exit %d\n", sum, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
