// The fake device: a test seam that stands for a GPU on machines without one (the test suite
// and `COMMTAP_TEST_FAKE_DEVICE`), not part of the datatypes' public interface (device.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

#include "datatypes/device.hpp"

namespace commtap::datatypes {

// Host memory registered with `mark` counts as device memory. Registered ranges that are
// whole pages are made inaccessible (PROT_NONE) while registered, and opened only inside the
// fake's own copies and kernels, so that an MPI library touching "device" memory crashes the
// test as a real GPU buffer would. Scratch from alloc_device is registered the same way.
class FakeDevice final : public DeviceMemory {
 public:
  void mark(const void* pointer, std::size_t bytes, bool device);
  const char* name() const override { return "fake"; }
  bool is_device(const void* pointer) override;
  void* alloc_host(std::size_t bytes) override;
  void free_host(void* pointer) override;
  void* alloc_device(std::size_t bytes) override;
  void free_device(void* pointer) override;
  bool copy(void* to, const void* from, std::size_t bytes) override;
  bool pack(const DeviceShape& shape, const void* typed, void* packed) override;
  bool unpack(const DeviceShape& shape, const void* packed, void* typed) override;
  bool synchronize() override { return true; }
  // Calls to the seam so far, for tests: copies, kernel launches.
  std::uint64_t copies() const { return copies_.load(); }
  std::uint64_t kernels() const { return kernels_.load(); }

 private:
  struct Range {
    std::size_t bytes;
    bool protectable;
  };
  // Opens the registered ranges that hold [pointer, pointer + bytes) for the scope's life.
  class Open;
  std::mutex mutex_;
  std::map<std::uintptr_t, Range> ranges_;  // by start address
  std::atomic<std::uint64_t> copies_{0}, kernels_{0};
};
FakeDevice& fake_device();

}  // namespace commtap::datatypes
