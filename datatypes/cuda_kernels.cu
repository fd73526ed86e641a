// The CUDA pack kernels: each thread runs the bodies of device_index.hpp (the same code the host
// tests check against the host packer) at its place in the grid. x: the words of a block (a
// few lanes of a warp), y: the innermost dimension, z: every outer row (grid-stride loops, so
// any shape fits the grid limits).
#include <cuda_runtime.h>

#include <algorithm>

#include "datatypes/cuda_kernels.hpp"

namespace commtap::datatypes::device {

namespace {

__device__ Index3 place() {
  return {static_cast<std::int64_t>(threadIdx.x),
          static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y,
          static_cast<std::int64_t>(blockIdx.y)};
}
__device__ Index3 extent() {
  return {static_cast<std::int64_t>(blockDim.x), static_cast<std::int64_t>(gridDim.x) * blockDim.y,
          static_cast<std::int64_t>(gridDim.y)};
}

template <typename Word, bool pack>
__global__ void strided_kernel(StridedShape shape, char* typed, char* packed) {
  strided_body<Word, pack>(shape, typed, packed, place(), extent());
}

template <typename Word, bool pack>
__global__ void list_kernel(ListShape shape, char* typed, char* packed) {
  list_body<Word, pack>(shape, typed, packed, place(), extent());
}

// Enough blocks to fill a large GPU several times over, never more than the rows need.
void grid_for(std::int64_t rows, std::int64_t count, const Index3& threads, dim3& grid,
              dim3& block) {
  block = dim3(static_cast<unsigned>(threads.x), static_cast<unsigned>(threads.y), 1);
  const std::int64_t y = std::min<std::int64_t>(std::max<std::int64_t>(rows, 1), 65535);
  const std::int64_t x_needed = (std::max<std::int64_t>(count, 1) + threads.y - 1) / threads.y;
  const std::int64_t x = std::max<std::int64_t>(1, std::min(x_needed, 16384 / y));
  grid = dim3(static_cast<unsigned>(x), static_cast<unsigned>(y), 1);
}

template <typename Word>
int launch_strided_as(const StridedShape& shape, char* typed, char* packed, bool pack,
                      cudaStream_t stream) {
  dim3 grid, block;
  const Index3 threads = block_threads(shape.block / static_cast<std::int64_t>(sizeof(Word)));
  grid_for(outer_count(shape), inner_count(shape), threads, grid, block);
  if (pack)
    strided_kernel<Word, true><<<grid, block, 0, stream>>>(shape, typed, packed);
  else
    strided_kernel<Word, false><<<grid, block, 0, stream>>>(shape, typed, packed);
  return static_cast<int>(cudaGetLastError());
}

template <typename Word>
int launch_list_as(const ListShape& shape, char* typed, char* packed, bool pack,
                   cudaStream_t stream) {
  dim3 grid, block;
  const Index3 threads = block_threads(2);  // items are often short: a few lanes each
  grid_for(shape.elements, shape.nitems, threads, grid, block);
  if (pack)
    list_kernel<Word, true><<<grid, block, 0, stream>>>(shape, typed, packed);
  else
    list_kernel<Word, false><<<grid, block, 0, stream>>>(shape, typed, packed);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

int launch_strided(const StridedShape& shape, char* typed, char* packed, bool pack, void* stream) {
  int rc = 0;
  const auto s = static_cast<cudaStream_t>(stream);
  with_word(word_size(shape, typed, packed),
            [&](auto w) { rc = launch_strided_as<decltype(w)>(shape, typed, packed, pack, s); });
  return rc;
}

int launch_list(const ListShape& shape, int word, char* typed, char* packed, bool pack,
                void* stream) {
  int rc = 0;
  const auto s = static_cast<cudaStream_t>(stream);
  with_word(word, [&](auto w) { rc = launch_list_as<decltype(w)>(shape, typed, packed, pack, s); });
  return rc;
}

}  // namespace commtap::datatypes::device
