// GPU pack throughput (scripts/gpu-check): commtap's pack kernels against the device's own
// device-to-device cudaMemcpy of the same bytes, and against one cudaMemcpyAsync per block (Open
// MPI's way), for 2-D strided objects of several block sizes; then the method model's measured
// parameters. Needs a GPU; exits 77 (skipped) without one.
//
//   gpu_pack [object MiB ...]      (default 4 64)
//
// One line per case: "pack block B object M MiB: kernel X GB/s, memcpy Y GB/s, ratio R,
// per-block Z GB/s"; the last line is "model ...".
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "datatypes/device.hpp"

using namespace commtap::datatypes;

namespace {

double seconds_of(DeviceMemory& device, int repeats, auto&& once) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    device.synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    once();
    device.synchronize();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  auto device = cuda_device();
  if (!device) {
    std::printf("skipped: no GPU (built with CUDA: %d)\n", built_with_cuda() ? 1 : 0);
    return 77;
  }
  std::vector<long> objects;
  for (int i = 1; i < argc; ++i) objects.push_back(std::atol(argv[i]));
  if (objects.empty()) objects = {4, 64};
  for (long mib : objects) {
    const std::size_t packed_bytes = static_cast<std::size_t>(mib) << 20;
    // Blocks every other slot: the typed object is twice the packed bytes.
    char* typed = static_cast<char*>(device->alloc_device(2 * packed_bytes));
    char* packed = static_cast<char*>(device->alloc_device(packed_bytes));
    if (typed == nullptr || packed == nullptr) return 1;
    const double memcpy_s =
        seconds_of(*device, 10, [&] { device->copy(packed, typed, packed_bytes); });
    const double memcpy_gbs = static_cast<double>(packed_bytes) / memcpy_s / 1e9;
    for (std::int64_t block : {8, 16, 32, 64, 128, 512, 4096}) {
      const std::int64_t blocks = static_cast<std::int64_t>(packed_bytes) / block;
      const PackPlan plan(Layout::stream(1, 2 * block, Layout::dense(block)), 2 * block);
      const auto shape = make_shape(plan, blocks);
      const double kernel_s = seconds_of(*device, 10, [&] { device->pack(*shape, typed, packed); });
      // One copy per block, on at most 20,000 blocks (extrapolated rate).
      const std::int64_t sample = std::min<std::int64_t>(blocks, 20000);
      const double per_block_s = seconds_of(*device, 3, [&] {
        for (std::int64_t b = 0; b < sample; ++b)
          device->copy(packed + b * block, typed + 2 * b * block, static_cast<std::size_t>(block));
      });
      const double kernel_gbs = static_cast<double>(packed_bytes) / kernel_s / 1e9;
      std::printf(
          "pack block %lld object %ld MiB: kernel %.1f GB/s, memcpy %.1f GB/s, ratio %.2f, "
          "per-block %.2f GB/s\n",
          static_cast<long long>(block), mib, kernel_gbs, memcpy_gbs, kernel_gbs / memcpy_gbs,
          static_cast<double>(sample * block) / per_block_s / 1e9);
    }
    device->free_device(typed);
    device->free_device(packed);
  }
  std::printf("model %s\n", measure_model(*device).describe().c_str());
  return 0;
}
