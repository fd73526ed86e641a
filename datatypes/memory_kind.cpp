#include <mutex>

#include "datatypes/datatypes.hpp"

#if COMMTAP_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#endif

#if COMMTAP_HAVE_CUDA
extern "C" void* __curbrk;  // glibc's current program break (exported since 2.2.5)
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

namespace {

// Address ranges that can never be device memory, checked before asking the driver: a
// cudaPointerGetAttributes call costs about 150 ns on an H100 host (scripts/gpu-check measured
// +451 ns per Irecv+Send+Wait on host buffers with staging on), which every point-to-point call
// would pay. The executable's own mappings (static and COMMON arrays), the brk heap (contiguous
// from its start to the current break: no other mapping can lie inside it) and the calling
// thread's stack hold most small messages; anything else (mmap'd buffers, shared libraries'
// data) gets the driver's answer.
struct Range {
  std::uintptr_t lo = 0, hi = 0;
  bool contains(std::uintptr_t a) const { return a >= lo && a < hi; }
};

struct ProcessRanges {
  Range image;                 // the executable's mappings, first to last
  std::uintptr_t heap_lo = 0;  // the [heap]'s start (0: none when read)
};

ProcessRanges read_process_ranges() {
  ProcessRanges ranges;
  char executable[4096] = {};
  const ssize_t length = readlink("/proc/self/exe", executable, sizeof executable - 1);
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return ranges;
  char line[4352];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
    const char* path = std::strchr(line, '/');
    const bool heap = std::strstr(line, "[heap]") != nullptr;
    if (heap && ranges.heap_lo == 0) ranges.heap_lo = lo;
    if (length > 0 && path != nullptr &&
        std::strncmp(path, executable, static_cast<std::size_t>(length)) == 0 &&
        (path[length] == '\n' || path[length] == '\0')) {
      if (ranges.image.lo == 0 || lo < ranges.image.lo) ranges.image.lo = lo;
      ranges.image.hi = std::max<std::uintptr_t>(ranges.image.hi, hi);
    }
  }
  std::fclose(maps);
  return ranges;
}

Range stack_of_this_thread() {
  Range stack;
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) return stack;
  void* base = nullptr;
  std::size_t size = 0;
  if (pthread_attr_getstack(&attributes, &base, &size) == 0) {
    stack.lo = reinterpret_cast<std::uintptr_t>(base);
    stack.hi = stack.lo + size;
  }
  pthread_attr_destroy(&attributes);
  return stack;
}

bool surely_host(const void* pointer) {
  static const ProcessRanges process = read_process_ranges();
  const auto a = reinterpret_cast<std::uintptr_t>(pointer);
  if (process.image.contains(a)) return true;
  // The break as the C library last set it, read rather than asked for: in an MPI process UCX's
  // memory hooks (libucm) take over sbrk, and calling it cost more than the driver's query.
  // Where they bypass the C library the value stays behind the real break, which only narrows
  // the range.
  if (process.heap_lo != 0 &&
      Range{process.heap_lo, reinterpret_cast<std::uintptr_t>(__curbrk)}.contains(a))
    return true;
  thread_local const Range stack = stack_of_this_thread();
  return stack.contains(a);
}

}  // namespace

MemoryKind memory_kind(const void* pointer) noexcept {
  if (pointer == nullptr || !gpu_available() || surely_host(pointer)) return MemoryKind::host;
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
