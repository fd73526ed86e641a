// The real NCCL on a real GPU, 1-rank communicator, under MPI (commtap starts at MPI_Init), or
// with --no-mpi as torchrun starts a process (no MPI call at all: commtap starts at the
// communicator): three single all-reduces of 64 MiB and one group of two, then the stream is
// synchronized once at the end. Out of place: on one rank NCCL then copies the buffer (at least ~40
// us for 64 MiB read and written even at 3.35 TB/s), where in place it has nothing to do and the
// test's lower bound on each completion would not hold. Prints "no gpu" and exits 0 where there is
// no usable device, so the test script can skip.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  const bool with_mpi = !(argc > 1 && std::strcmp(argv[1], "--no-mpi") == 0);
  if (with_mpi) MPI_Init(&argc, &argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no gpu\n");
    if (with_mpi) MPI_Finalize();
    return 0;
  }
  cudaSetDevice(0);
  const size_t count = 16u << 20;  // floats: 64 MiB, a few hundred microseconds on the GPU
  float *data = nullptr, *result = nullptr;
  cudaMalloc(&data, count * sizeof(float));
  cudaMalloc(&result, count * sizeof(float));
  cudaMemset(data, 0, count * sizeof(float));
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    std::printf("nccl init failed\n");
    if (with_mpi) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
  for (int i = 0; i < 3; ++i) ncclAllReduce(data, result, count, ncclFloat, ncclSum, comm, stream);
  ncclGroupStart();
  ncclAllReduce(data, result, count, ncclFloat, ncclSum, comm, stream);
  ncclAllReduce(data, result, count / 2, ncclFloat, ncclSum, comm, stream);
  ncclGroupEnd();
  cudaStreamSynchronize(stream);
  ncclCommDestroy(comm);
  cudaFree(data);
  cudaFree(result);
  std::printf("done\n");
  if (with_mpi) MPI_Finalize();
  return 0;
}
