/* MPI_Init, argv[1] barriers on MPI_COMM_WORLD, MPI_Finalize, and no other MPI call: whatever
 * point-to-point message a preloaded tool sends is the tool's own (tests/mpi/message_census.sh).
 *
 *   mpiexec -n 16 ./world_barriers 40 */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int barriers = argc > 1 ? atoi(argv[1]) : 1;
  for (int i = 0; i < barriers; ++i) MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
