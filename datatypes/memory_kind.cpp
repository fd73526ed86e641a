#include <mutex>

#include "datatypes/datatypes.hpp"

#if COMMTAP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace commtap::datatypes {

bool built_with_cuda() noexcept {
  return COMMTAP_HAVE_CUDA != 0;
}

#if COMMTAP_HAVE_CUDA
bool gpu_available() noexcept {
  static std::once_flag once;
  static bool available = false;
  std::call_once(once, [] {
    int count = 0;
    // Without a driver this returns cudaErrorInsufficientDriver (35) and count 0.
    available = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
    if (!available) cudaGetLastError();  // clear the sticky-free error so later calls start clean
  });
  return available;
}

MemoryKind memory_kind(const void* pointer) noexcept {
  if (pointer == nullptr || !gpu_available()) return MemoryKind::host;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    cudaGetLastError();
    return MemoryKind::host;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged
             ? MemoryKind::device
             : MemoryKind::host;
}
#else
bool gpu_available() noexcept {
  return false;
}
MemoryKind memory_kind(const void*) noexcept {
  return MemoryKind::host;
}
#endif

}  // namespace commtap::datatypes
