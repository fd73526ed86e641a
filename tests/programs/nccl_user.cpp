// An MPI+NCCL program in the style of a data-parallel trainer, run against the fake NCCL in CI
// (tests/fake_nccl/). It prints how many calls reached the NCCL library, which must
// be the same with and without commtap preloaded.
//
//   mpiexec -n 1 ./nccl_user [steps]
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

extern "C" int fake_nccl_calls(const char* name);

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 5;

  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  ncclCommInitRank(&comm, size, id, rank);
  float buffer[256] = {};
  for (int step = 0; step < steps; ++step) {
    ncclAllReduce(buffer, buffer, 256, ncclFloat32, ncclSum, comm, nullptr);
    ncclGroupStart();
    ncclSend(buffer, 16, ncclFloat32, (rank + 1) % size, comm, nullptr);
    ncclRecv(buffer, 16, ncclFloat32, (rank + size - 1) % size, comm, nullptr);
    ncclGroupEnd();
  }
  ncclBroadcast(buffer, buffer, 256, ncclFloat32, 0, comm, nullptr);
  ncclCommDestroy(comm);
  if (rank == 0)
    for (const char* name :
         {"ncclAllReduce", "ncclSend", "ncclRecv", "ncclGroupStart", "ncclGroupEnd",
          "ncclBroadcast", "ncclCommInitRank", "ncclCommDestroy"})
      std::printf("%s reached the library %d times\n", name, fake_nccl_calls(name));
  MPI_Finalize();
  return 0;
}
