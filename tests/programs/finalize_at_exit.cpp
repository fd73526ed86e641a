// MPI_Finalize from a global object's destructor, after main has returned and this thread's
// thread_local objects are gone: commtap must still count the call and write the database.
//
//   mpiexec -n 2 ./finalize_at_exit
#include <mpi.h>

#include <cstdio>

namespace {
struct MpiSession {
  ~MpiSession() { MPI_Finalize(); }
} session;
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, value = 3, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("sum %d\n", sum);
  return 0;
}
