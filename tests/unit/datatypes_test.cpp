#include <gtest/gtest.h>

#include <vector>

#include "datatypes/datatypes.hpp"

using namespace commtap::datatypes;

TEST(Datatypes, BuildReportsItsCudaSupport) {
  EXPECT_EQ(built_with_cuda(), COMMTAP_HAVE_CUDA_BUILD != 0);
}

TEST(Datatypes, HostMemoryIsHostWithOrWithoutAGpu) {
  std::vector<char> heap(64);
  char stack[16];
  EXPECT_EQ(memory_kind(heap.data()), MemoryKind::host);
  EXPECT_EQ(memory_kind(stack), MemoryKind::host);
  EXPECT_EQ(memory_kind(nullptr), MemoryKind::host);
  // Without a driver (CI) the answer must be "no GPU", not an error or an exit.
  if (!gpu_available()) EXPECT_EQ(memory_kind(reinterpret_cast<void*>(0x1000)), MemoryKind::host);
}
