// The device-memory seam over the CUDA runtime: pinned staging, device scratch, copies and
// kernels queued on one private stream (never the application's streams).
#include <cuda_runtime_api.h>

#include <mutex>

#include "datatypes/cuda_kernels.hpp"
#include "datatypes/device.hpp"

namespace commtap::datatypes {

namespace {

class CudaDevice final : public DeviceMemory {
 public:
  explicit CudaDevice(cudaStream_t stream) : stream_(stream) {}
  const char* name() const override { return "cuda"; }
  bool is_device(const void* pointer) override {
    return memory_kind(pointer) == MemoryKind::device;
  }
  void* alloc_host(std::size_t bytes) override {
    void* p = nullptr;
    // Mapped: a kernel can also write packed bytes straight into it.
    if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void free_host(void* pointer) override { cudaFreeHost(pointer); }
  void* alloc_device(std::size_t bytes) override {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return p;
  }
  void free_device(void* pointer) override { cudaFree(pointer); }
  bool copy(void* to, const void* from, std::size_t bytes) override {
    return bytes == 0 ||
           cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream_) == cudaSuccess;
  }
  bool pack(const DeviceShape& shape, const void* typed, void* packed) override {
    return launch(shape, const_cast<void*>(typed), packed, true);
  }
  bool unpack(const DeviceShape& shape, const void* packed, void* typed) override {
    return launch(shape, typed, const_cast<void*>(packed), false);
  }
  bool synchronize() override { return cudaStreamSynchronize(stream_) == cudaSuccess; }

 private:
  bool launch(const DeviceShape& shape, void* typed, void* packed, bool pack) {
    if (shape.bytes == 0) return true;
    auto* t = static_cast<char*>(typed);
    auto* p = static_cast<char*>(packed);
    if (shape.strided) return device::launch_strided(shape.blocks, t, p, pack, stream_) == 0;
    // A list's items go to device memory first, in stream order before the kernel.
    std::lock_guard lock(mutex_);
    const std::size_t bytes = shape.items.size() * sizeof(device::ListItem);
    if (bytes > items_bytes_) {
      cudaStreamSynchronize(stream_);  // the previous kernel may still read the old table
      if (items_ != nullptr) cudaFree(items_);
      items_ = nullptr;
      items_bytes_ = 0;
      if (cudaMalloc(&items_, bytes) != cudaSuccess) return false;
      items_bytes_ = bytes;
    }
    if (cudaMemcpyAsync(items_, shape.items.data(), bytes, cudaMemcpyHostToDevice, stream_) !=
        cudaSuccess)
      return false;
    device::ListShape list = shape.list;
    list.items = static_cast<const device::ListItem*>(items_);
    const int word = device::word_size(list, shape.items.data(), t, p);
    return device::launch_list(list, word, t, p, pack, stream_) == 0;
  }

  cudaStream_t stream_;
  std::mutex mutex_;
  void* items_ = nullptr;
  std::size_t items_bytes_ = 0;
};

}  // namespace

std::unique_ptr<DeviceMemory> cuda_device() {
  if (!gpu_available()) return nullptr;
  // A blocking stream, not a non-blocking one: its work is ordered after what the application
  // queued on the legacy default stream. A synchronous cudaMemcpy from pageable host memory
  // returns before its DMA has landed (the CUDA runtime's documented behaviour), and an
  // application that fills a buffer that way and then sends it expects the filled bytes to
  // go; on a non-blocking stream commtap read some of them early (seen on an H100:
  // scripts/gpu-check's send/recv matrix differed from the native run in 2-20 of 700 lines,
  // from run to run, wherever commtap read freshly filled device memory).
  cudaStream_t stream = nullptr;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamDefault) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return std::make_unique<CudaDevice>(stream);
}

}  // namespace commtap::datatypes
