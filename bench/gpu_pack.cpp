// GPU pack throughput (scripts/gpu-check): commtap's pack kernels against the device's own
// device-to-device cudaMemcpy of the same bytes, against the driver's own strided copy of the
// same layout (cudaMemcpy2DAsync: what the hardware does for this shape without commtap), and
// against one cudaMemcpyAsync per block (Open MPI's way), for 2-D strided objects of several
// block sizes (every other block-sized slot); then the method model's measured parameters.
// Every figure is the best of 7 timings of back-to-back operations, at least 20 and enough for
// a millisecond or more (one operation of 4 MiB takes a few microseconds, little more than a
// launch). Needs a GPU; exits 77 (skipped) without.
//
//   gpu_pack [object MiB ...]      (default 4 64)
//
// One line per case: "pack block B object M MiB: kernel X GB/s, memcpy Y GB/s, ratio R,
// per-block Z GB/s, 2-D memcpy W GB/s"; the last line is "model ...".
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "datatypes/device.hpp"

using namespace commtap::datatypes;

namespace {

// Seconds per call of `once`: the best of `repeats` timings of `batch` calls in a row.
double seconds_of(DeviceMemory& device, int repeats, auto&& once, int batch = 20) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    device.synchronize();
    cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < batch; ++b) once();
    device.synchronize();
    cudaDeviceSynchronize();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / batch);
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
    const int batch = static_cast<int>(std::clamp(20 * 64 / std::max(mib, 1L), 20L, 400L));
    const double memcpy_s = seconds_of(
        *device, 7, [&] { device->copy(packed, typed, packed_bytes); }, batch);
    const double memcpy_gbs = static_cast<double>(packed_bytes) / memcpy_s / 1e9;
    for (std::int64_t block : {8, 16, 32, 64, 128, 512, 4096}) {
      const std::int64_t blocks = static_cast<std::int64_t>(packed_bytes) / block;
      const PackPlan plan(Layout::stream(1, 2 * block, Layout::dense(block)), 2 * block);
      const auto shape = make_shape(plan, blocks);
      const double kernel_s = seconds_of(
          *device, 7, [&] { device->pack(*shape, typed, packed); }, batch);
      const double copy_2d_s = seconds_of(
          *device, 7,
          [&] {
            cudaMemcpy2DAsync(packed, static_cast<std::size_t>(block), typed,
                              static_cast<std::size_t>(2 * block), static_cast<std::size_t>(block),
                              static_cast<std::size_t>(blocks), cudaMemcpyDeviceToDevice, nullptr);
          },
          batch);
      // One copy per block, on at most 20,000 blocks (extrapolated rate).
      const std::int64_t sample = std::min<std::int64_t>(blocks, 20000);
      const double per_block_s = seconds_of(
          *device, 3,
          [&] {
            for (std::int64_t b = 0; b < sample; ++b)
              device->copy(packed + b * block, typed + 2 * b * block,
                           static_cast<std::size_t>(block));
          },
          1);
      const double kernel_gbs = static_cast<double>(packed_bytes) / kernel_s / 1e9;
      std::printf(
          "pack block %lld object %ld MiB: kernel %.1f GB/s, memcpy %.1f GB/s, ratio %.2f, "
          "per-block %.2f GB/s, 2-D memcpy %.1f GB/s\n",
          static_cast<long long>(block), mib, kernel_gbs, memcpy_gbs, kernel_gbs / memcpy_gbs,
          static_cast<double>(sample * block) / per_block_s / 1e9,
          static_cast<double>(packed_bytes) / copy_2d_s / 1e9);
    }
    device->free_device(typed);
    device->free_device(packed);
  }
  std::printf("model %s\n", measure_model(*device).describe().c_str());
  // What asking where a buffer lives costs (every point-to-point call asks, with staging on):
  // commtap's memory_kind on a stack, a brk-heap, an mmap'd host and a device buffer, and the
  // driver's own query, in ns per call.
  double on_stack = 0;
  std::vector<char> small_heap(64);
  std::vector<char> large_host(64 << 20);  // mmap'd by malloc
  void* gpu = device->alloc_device(4096);
  auto ns_per_query = [](const void* pointer, auto&& query) {
    constexpr int kCalls = 200000;
    const auto t0 = std::chrono::steady_clock::now();
    int device_kind = 0;
    for (int i = 0; i < kCalls; ++i) device_kind += query(pointer);
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return std::pair{ns / kCalls, device_kind > 0};
  };
  auto commtap = [](const void* p) { return memory_kind(p) == MemoryKind::device ? 1 : 0; };
  auto driver = [](const void* p) {
    cudaPointerAttributes a{};
    return cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeDevice ? 1 : 0;
  };
  std::printf("pointer query ns:");
  for (const auto& [name, pointer] : {std::pair<const char*, const void*>{"stack", &on_stack},
                                      {"heap", small_heap.data()},
                                      {"mmap", large_host.data()},
                                      {"device", gpu}}) {
    const auto [ours, ours_device] = ns_per_query(pointer, commtap);
    const auto [theirs, theirs_device] = ns_per_query(pointer, driver);
    std::printf(" %s %.1f (driver %.1f%s)", name, ours, theirs,
                ours_device != theirs_device ? ", DISAGREE" : "");
  }
  std::printf("\n");
  device->free_device(gpu);
  return 0;
}
