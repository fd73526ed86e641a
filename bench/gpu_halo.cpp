// A device-buffer send of a 3-D halo face of doubles between 2 ranks (scripts/gpu-check):
// commtap's staging (MPI_Send/MPI_Recv on the device buffer with the face's subarray type,
// preloaded) against the naive path a user writes without commtap (copy the whole extent to the
// host, MPI with the host datatype, copy the whole extent back). Needs a GPU on each rank and
// commtap preloaded; exits 77 (skipped) without a GPU.
//
//   mpiexec -n 2 -genv LD_PRELOAD libcommtap.so gpu_halo [n] [iterations]   (default 256 50)
//
// Rank 0 prints "halo n^3 face F: naive X us, commtap Y us, speedup S" for each face.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// One round trip of `bytes` through `send`; returns the best of `iterations` in us.
template <typename Once>
double best_us(int iterations, Once once) {
  double best = 1e300;
  for (int i = 0; i < iterations; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    once();
    best = std::min(
        best,
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, gpus = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0 || size != 2) {
    if (rank == 0) std::printf("skipped: needs 2 ranks and a GPU\n");
    MPI_Finalize();
    return 77;
  }
  cudaSetDevice(rank % gpus);
  const int n = argc > 1 ? std::atoi(argv[1]) : 256;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 50;
  const std::size_t bytes = static_cast<std::size_t>(n) * n * n * sizeof(double);
  double* field = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&field), bytes);
  cudaMemset(field, 0, bytes);
  std::vector<double> host(static_cast<std::size_t>(n) * n * n);
  const int sizes[] = {n, n, n};
  struct Face {
    const char* name;
    int sub[3];
  } faces[] = {{"x (n^2 rows of 1 double)", {n, n, 1}},
               {"y (n rows of n doubles)", {n, 1, n}},
               {"z (one contiguous plane)", {1, n, n}}};
  for (const Face& face : faces) {
    const int start[] = {0, 0, 0};
    MPI_Datatype type;
    MPI_Type_create_subarray(3, sizes, face.sub, start, MPI_ORDER_C, MPI_DOUBLE, &type);
    MPI_Type_commit(&type);
    const int peer = 1 - rank;
    // Ping-pong: rank 0 sends, rank 1 answers.
    auto exchange = [&](void* buffer) {
      if (rank == 0) {
        MPI_Send(buffer, 1, type, peer, 0, MPI_COMM_WORLD);
        MPI_Recv(buffer, 1, type, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(buffer, 1, type, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buffer, 1, type, peer, 0, MPI_COMM_WORLD);
      }
    };
    const double commtap = best_us(iterations, [&] { exchange(field); }) / 2;
    const double naive =
        best_us(iterations,
                [&] {
                  // The user's naive path: whole extent over, host datatype, back.
                  if (rank == 0) {
                    cudaMemcpy(host.data(), field, bytes, cudaMemcpyDeviceToHost);
                    MPI_Send(host.data(), 1, type, peer, 0, MPI_COMM_WORLD);
                    MPI_Recv(host.data(), 1, type, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    cudaMemcpy(field, host.data(), bytes, cudaMemcpyHostToDevice);
                  } else {
                    cudaMemcpy(host.data(), field, bytes, cudaMemcpyDeviceToHost);
                    MPI_Recv(host.data(), 1, type, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    cudaMemcpy(field, host.data(), bytes, cudaMemcpyHostToDevice);
                    cudaMemcpy(host.data(), field, bytes, cudaMemcpyDeviceToHost);
                    MPI_Send(host.data(), 1, type, peer, 0, MPI_COMM_WORLD);
                  }
                }) /
        2;
    if (rank == 0)
      std::printf("halo %d^3 face %s: naive %.1f us, commtap %.1f us, speedup %.1f\n", n, face.name,
                  naive, commtap, naive / commtap);
    MPI_Type_free(&type);
  }
  cudaFree(field);
  MPI_Finalize();
  return 0;
}
