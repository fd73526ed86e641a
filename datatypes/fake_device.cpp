// The fake device: host pages that count as device memory, for the tests (fake_device.hpp).
#include "datatypes/fake_device.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace commtap::datatypes {

namespace {
std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}
}  // namespace

class FakeDevice::Open {
 public:
  Open(FakeDevice& fake, std::initializer_list<std::pair<const void*, std::size_t>> areas)
      : lock_(fake.mutex_) {
    for (const auto& [pointer, bytes] : areas) {
      const auto at = reinterpret_cast<std::uintptr_t>(pointer);
      auto it = fake.ranges_.upper_bound(at + std::max<std::size_t>(bytes, 1) - 1);
      while (it != fake.ranges_.begin()) {
        --it;
        if (it->first + it->second.bytes <= at) break;
        if (it->second.protectable && opened_count_ < opened_.size()) {
          ::mprotect(reinterpret_cast<void*>(it->first), it->second.bytes, PROT_READ | PROT_WRITE);
          opened_[opened_count_++] = {it->first, it->second.bytes};
        }
      }
    }
  }
  ~Open() {
    for (std::size_t i = 0; i < opened_count_; ++i)
      ::mprotect(reinterpret_cast<void*>(opened_[i].first), opened_[i].second, PROT_NONE);
  }
  Open(const Open&) = delete;
  Open& operator=(const Open&) = delete;

 private:
  std::lock_guard<std::mutex> lock_;
  std::array<std::pair<std::uintptr_t, std::size_t>, 16> opened_{};
  std::size_t opened_count_ = 0;
};

void FakeDevice::mark(const void* pointer, std::size_t bytes, bool device) {
  std::lock_guard lock(mutex_);
  const auto at = reinterpret_cast<std::uintptr_t>(pointer);
  if (device) {
    if (bytes == 0) return;
    const bool protectable = at % page_size() == 0 && bytes % page_size() == 0;
    ranges_[at] = {bytes, protectable};
    if (protectable) ::mprotect(const_cast<void*>(pointer), bytes, PROT_NONE);
  } else {
    const auto it = ranges_.find(at);
    if (it == ranges_.end()) return;
    if (it->second.protectable)
      ::mprotect(const_cast<void*>(pointer), it->second.bytes, PROT_READ | PROT_WRITE);
    ranges_.erase(it);
  }
}

bool FakeDevice::is_device(const void* pointer) {
  const auto at = reinterpret_cast<std::uintptr_t>(pointer);
  std::lock_guard lock(mutex_);
  auto it = ranges_.upper_bound(at);
  if (it == ranges_.begin()) return false;
  --it;
  return at < it->first + it->second.bytes;
}

void* FakeDevice::alloc_host(std::size_t bytes) {
  return std::malloc(std::max<std::size_t>(bytes, 1));
}
void FakeDevice::free_host(void* pointer) {
  std::free(pointer);
}

void* FakeDevice::alloc_device(std::size_t bytes) {
  const std::size_t rounded =
      (std::max<std::size_t>(bytes, 1) + page_size() - 1) / page_size() * page_size();
  void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  mark(p, rounded, true);
  return p;
}

void FakeDevice::free_device(void* pointer) {
  std::size_t bytes = 0;
  {
    std::lock_guard lock(mutex_);
    const auto it = ranges_.find(reinterpret_cast<std::uintptr_t>(pointer));
    if (it == ranges_.end()) return;
    bytes = it->second.bytes;
  }
  mark(pointer, bytes, false);
  ::munmap(pointer, bytes);
}

bool FakeDevice::copy(void* to, const void* from, std::size_t bytes) {
  copies_.fetch_add(1, std::memory_order_relaxed);
  if (bytes == 0) return true;
  Open open(*this, {{to, bytes}, {from, bytes}});
  std::memmove(to, from, bytes);
  return true;
}

bool FakeDevice::pack(const DeviceShape& shape, const void* typed, void* packed) {
  kernels_.fetch_add(1, std::memory_order_relaxed);
  // The typed side is opened as a whole: the kernel may touch any registered range.
  Open open(*this, {{typed, 1}, {packed, static_cast<std::size_t>(shape.bytes)}});
  // An odd launch (3 x 2 x 2 threads) so that the grid-stride loops are exercised too.
  emulate_pack(shape, typed, packed, {3, 2, 2});
  return true;
}

bool FakeDevice::unpack(const DeviceShape& shape, const void* packed, void* typed) {
  kernels_.fetch_add(1, std::memory_order_relaxed);
  Open open(*this, {{typed, 1}, {packed, static_cast<std::size_t>(shape.bytes)}});
  emulate_unpack(shape, packed, typed, {3, 2, 2});
  return true;
}

FakeDevice& fake_device() {
  static FakeDevice* fake = new FakeDevice;  // never destroyed (MPI calls at exit)
  return *fake;
}

}  // namespace commtap::datatypes
