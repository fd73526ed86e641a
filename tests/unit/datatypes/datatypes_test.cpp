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
  if (!gpu_available()) {
    EXPECT_EQ(memory_kind(reinterpret_cast<void*>(0x1000)), MemoryKind::host);
  }
}

// ---- Canonical layouts ---------------------------------------------------------------------

namespace {
std::string canonical(const LayoutPtr& layout) {
  return describe(*simplify(layout));
}
LayoutPtr ints(std::int64_t n) {
  return Layout::stream(n, 4, Layout::dense(4));
}
}  // namespace

TEST(Layout, ContiguousConstructionsFoldToOneDenseBlock) {
  // contiguous(8, int), contiguous(2, contiguous(4, int)), vector(2, 4, 4, int), a list of
  // eight adjacent ints, and a struct of two 4-int blocks are all 32 contiguous bytes.
  const std::string expected = "dense(32)";
  EXPECT_EQ(canonical(ints(8)), expected);
  EXPECT_EQ(canonical(Layout::stream(2, 16, ints(4))), expected);
  EXPECT_EQ(canonical(Layout::stream(2, 16, Layout::stream(4, 4, Layout::dense(4)))), expected);
  std::vector<Layout::Item> eight;
  for (int i = 0; i < 8; ++i) eight.push_back({4 * i, Layout::dense(4)});
  EXPECT_EQ(canonical(Layout::list(eight)), expected);
  EXPECT_EQ(canonical(Layout::list({{0, ints(4)}, {16, ints(4)}})), expected);
}

TEST(Layout, TwoDimensionalConstructionsAgree) {
  // A 4x2 block of ints out of a 4x5 array, three ways: vector(4, 2, 5, int); hvector(4, 1, 20,
  // contiguous(2, int)); indexed with displacements 0, 5, 10, 15 and blocks of 2.
  const std::string expected = "stream(4, 20, dense(8))";
  EXPECT_EQ(canonical(Layout::stream(4, 20, ints(2))), expected);
  EXPECT_EQ(canonical(Layout::stream(4, 20, Layout::stream(1, 8, ints(2)))), expected);
  std::vector<Layout::Item> rows;
  for (int i = 0; i < 4; ++i) rows.push_back({20 * i, ints(2)});
  EXPECT_EQ(canonical(Layout::list(rows)), expected);
}

TEST(Layout, OffsetsAreHoistedAndCountOneLevelsDropped) {
  EXPECT_EQ(canonical(Layout::stream(3, 100, Layout::at(8, Layout::stream(1, 0, ints(2))))),
            "@8 stream(3, 100, dense(8))");
  EXPECT_EQ(canonical(Layout::stream(0, 4, Layout::dense(4))), "[]");
  EXPECT_EQ(canonical(Layout::list({{0, Layout::dense(0)}, {4, Layout::dense(2)}})), "@4 dense(2)");
}

TEST(Layout, IrregularLayoutsStayTrees) {
  const LayoutPtr irregular = simplify(
      Layout::list({{0, Layout::dense(4)}, {12, Layout::dense(8)}, {40, Layout::dense(4)}}));
  EXPECT_EQ(describe(*irregular), "[@0 dense(4), @12 dense(8), @40 dense(4)]");
  EXPECT_FALSE(as_strided(irregular).has_value());
  const auto strided = as_strided(simplify(Layout::at(8, Layout::stream(3, 100, ints(2)))));
  ASSERT_TRUE(strided.has_value());
  EXPECT_EQ(strided->offset, 8);
  EXPECT_EQ(strided->block, 8);
  ASSERT_EQ(strided->dims.size(), 1u);
  EXPECT_EQ(strided->dims[0].count, 3);
  EXPECT_EQ(strided->dims[0].stride, 100);
}

TEST(PackPlan, PacksAndUnpacksStridedAndTreeLayoutsInTypeMapOrder) {
  // A 3x2 block of shorts from a 3x4 array with a negative row stride, and an irregular list.
  std::vector<std::uint8_t> array(64);
  for (std::size_t i = 0; i < array.size(); ++i) array[i] = static_cast<std::uint8_t>(i);
  const PackPlan rows(simplify(Layout::stream(3, -8, Layout::stream(2, 2, Layout::dense(2)))), -24);
  EXPECT_TRUE(rows.strided());
  std::vector<std::uint8_t> packed(static_cast<std::size_t>(rows.packed_bytes(2)));
  rows.pack(array.data() + 40, 2, packed.data());
  const std::vector<std::uint8_t> expected = {40, 41, 42, 43, 32, 33, 34, 35, 24, 25, 26, 27,
                                              16, 17, 18, 19, 8,  9,  10, 11, 0,  1,  2,  3};
  EXPECT_EQ(packed, expected);
  std::vector<std::uint8_t> back(64, 0);
  rows.unpack(packed.data(), 2, back.data() + 40);
  for (std::size_t i = 0; i < 64; ++i)
    EXPECT_EQ(back[i], (i % 8) < 4 && i <= 43 ? array[i] : 0) << i;

  const PackPlan tree(simplify(Layout::list({{5, Layout::dense(3)}, {0, Layout::dense(1)}})), 9);
  EXPECT_FALSE(tree.strided());
  std::vector<std::uint8_t> out(8);
  tree.pack(array.data(), 2, out.data());
  EXPECT_EQ(out, (std::vector<std::uint8_t>{5, 6, 7, 0, 14, 15, 16, 9}));
}
