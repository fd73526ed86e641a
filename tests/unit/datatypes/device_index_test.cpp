// The device packer's index arithmetic (datatypes/device_index.hpp), run on the host: the same
// bodies the CUDA kernels run, against the host packer, on 10,000 random layouts per seed; the
// shapes made for the device, 64-bit offsets, the method model and the fake device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "datatypes/datatypes.hpp"
#include "datatypes/device.hpp"
#include "datatypes/device_index.hpp"
#include "datatypes/fake_device.hpp"

namespace commtap::datatypes {
namespace {

// Random layouts whose blocks never overlap (unpacking must be well defined), with negative
// strides, offsets below the origin, odd block sizes and nesting up to depth 4.
class RandomLayouts {
 public:
  explicit RandomLayouts(std::uint64_t seed) : rng_(seed) {}
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  // A layout and the half-open byte range [lo, hi) it touches.
  struct Made {
    LayoutPtr layout;
    std::int64_t lo, hi;
  };
  Made make(int depth) {
    if (depth == 0 || pick(0, 4) == 0) {
      static const int sizes[] = {1, 2, 3, 4, 8, 12, 16, 24, 32, 5, 64};
      const std::int64_t bytes = sizes[pick(0, 10)] * pick(1, 2);
      return {Layout::dense(bytes), 0, bytes};
    }
    switch (pick(0, 2)) {
      case 0: {  // stream
        Made child = make(depth - 1);
        const std::int64_t span = child.hi - child.lo;
        const std::int64_t count = pick(1, 5);
        std::int64_t stride = span + pick(0, 2) * pick(0, 24);
        if (pick(0, 3) == 0) stride = -stride;
        const std::int64_t last = (count - 1) * stride;
        return {Layout::stream(count, stride, child.layout),
                child.lo + std::min<std::int64_t>(0, last),
                child.hi + std::max<std::int64_t>(0, last)};
      }
      case 1: {  // list of items one after the other, with gaps
        std::vector<Layout::Item> items;
        std::int64_t at = pick(-40, 8), lo = INT64_MAX, hi = INT64_MIN;
        const int n = pick(1, 4);
        for (int i = 0; i < n; ++i) {
          Made child = make(depth - 1);
          const std::int64_t offset = at - child.lo;
          items.push_back({offset, child.layout});
          lo = std::min(lo, offset + child.lo);
          hi = std::max(hi, offset + child.hi);
          at = offset + child.hi + pick(0, 1) * pick(1, 16);
        }
        return {Layout::list(std::move(items)), lo, hi};
      }
      default: {  // one child at an offset
        Made child = make(depth - 1);
        const std::int64_t offset = pick(-24, 24);
        return {Layout::at(offset, child.layout), child.lo + offset, child.hi + offset};
      }
    }
  }

 private:
  std::mt19937_64 rng_;
};

// Runs the device bodies: emulated on the host, or on a real GPU through the device seam (the
// buffers mirrored at the same offsets in device memory).
class Runner {
 public:
  explicit Runner(DeviceMemory* gpu) : gpu_(gpu) {
    if (gpu_ != nullptr) {
      typed_ = static_cast<char*>(gpu_->alloc_device(kRoom));
      packed_ = static_cast<char*>(gpu_->alloc_device(kRoom));
    }
  }
  ~Runner() {
    if (gpu_ != nullptr) {
      gpu_->free_device(typed_);
      gpu_->free_device(packed_);
    }
  }
  static constexpr std::size_t kRoom = 64 << 20;
  // `typed`/`packed`: the host vectors; `origin`/`out`: positions inside them.
  void run(bool pack, const DeviceShape& shape, std::vector<char>& typed, char* origin,
           std::vector<char>& packed, char* out, device::Index3 threads) {
    if (gpu_ == nullptr) {
      if (pack)
        emulate_pack(shape, origin, out, threads);
      else
        emulate_unpack(shape, out, origin, threads);
      return;
    }
    ASSERT_LE(typed.size(), kRoom);
    ASSERT_LE(packed.size(), kRoom);
    ASSERT_TRUE(gpu_->copy(typed_, typed.data(), typed.size()));
    ASSERT_TRUE(gpu_->copy(packed_, packed.data(), packed.size()));
    char* g_origin = typed_ + (origin - typed.data());
    char* g_out = packed_ + (out - packed.data());
    ASSERT_TRUE(pack ? gpu_->pack(shape, g_origin, g_out) : gpu_->unpack(shape, g_out, g_origin));
    ASSERT_TRUE(gpu_->copy(typed.data(), typed_, typed.size()));
    ASSERT_TRUE(gpu_->copy(packed.data(), packed_, packed.size()));
    ASSERT_TRUE(gpu_->synchronize());
  }

 private:
  DeviceMemory* gpu_;
  char* typed_ = nullptr;
  char* packed_ = nullptr;
};

// The device bodies against PackPlan::pack/unpack for `types` random layouts.
void check_random_layouts(std::uint64_t seed, int types, DeviceMemory* gpu = nullptr) {
  Runner runner(gpu);
  RandomLayouts random(seed);
  std::mt19937 bytes_rng(static_cast<unsigned>(seed));
  std::map<std::string, int> seen;
  for (int t = 0; t < types; ++t) {
    const RandomLayouts::Made made = random.make(4);
    const LayoutPtr element = simplify(made.layout);
    const std::int64_t span = made.hi - made.lo;
    // Extent at least the span (elements do not overlap), sometimes more.
    const std::int64_t extent = span + random.pick(0, 1) * random.pick(0, 40);
    const PackPlan plan(element, extent);
    const std::int64_t count = random.pick(0, 4);
    const auto shape = make_shape(plan, count);
    ASSERT_TRUE(shape) << describe(*element);
    ASSERT_EQ(shape->bytes, plan.packed_bytes(count));
    const Span touched = span_of(plan.element(), extent, count);
    if (count > 0 && plan.packed_bytes(1) > 0) {
      ASSERT_EQ(touched.lo, made.lo + std::min<std::int64_t>(0, (count - 1) * extent));
      ASSERT_EQ(touched.hi, made.hi + std::max<std::int64_t>(0, (count - 1) * extent));
    }

    // Typed memory with the origin at a random misalignment, so that every word size occurs.
    const std::int64_t room = std::max<std::int64_t>(touched.hi - touched.lo, 0) + 64;
    std::vector<char> typed(static_cast<std::size_t>(room)), packed_ref(shape->bytes + 32),
        packed(shape->bytes + 32);
    for (char& c : typed) c = static_cast<char>(bytes_rng());
    const std::int64_t misalign = random.pick(0, 1) * random.pick(0, 15);
    char* origin = typed.data() + 16 + misalign - touched.lo;
    char* out = packed.data() + (random.pick(0, 1) ? 16 : random.pick(0, 15));
    plan.pack(origin, count, packed_ref.data());
    const device::Index3 threads{random.pick(1, 3), random.pick(1, 3), random.pick(1, 3)};
    runner.run(true, *shape, typed, origin, packed, out, threads);
    ASSERT_EQ(0, std::memcmp(out, packed_ref.data(), static_cast<std::size_t>(shape->bytes)))
        << "seed " << seed << " type " << t << ": " << describe(*element) << " extent " << extent
        << " count " << count;

    // Unpack into two equal buffers: the host packer's and the device bodies' must stay equal
    // everywhere, gaps included.
    std::vector<char> typed_ref = typed;
    std::memcpy(out, packed_ref.data(), static_cast<std::size_t>(shape->bytes));
    for (std::int64_t i = 0; i < shape->bytes; ++i) out[i] = static_cast<char>(out[i] ^ 0x5a);
    std::vector<char> in(out, out + shape->bytes);
    plan.unpack(in.data(), count, typed_ref.data() + (origin - typed.data()));
    runner.run(false, *shape, typed, origin, packed, out, threads);
    ASSERT_EQ(typed, typed_ref) << "seed " << seed << " type " << t << ": " << describe(*element);

    // The word size divides every address a strided copy touches.
    if (shape->strided && shape->bytes > 0) {
      const int word = device::word_size(shape->blocks, origin, out);
      ASSERT_EQ(shape->blocks.block % word, 0);
      for (std::int64_t b = 0; b < shape->block_count; ++b) {
        const auto at =
            reinterpret_cast<std::uintptr_t>(origin + device::block_offset(shape->blocks, b));
        ASSERT_EQ(at % static_cast<std::uintptr_t>(word), 0u);
      }
      ++seen["word " + std::to_string(word)];
    }
    if (shape->bytes > 0) ++seen[shape->strided ? "strided" : "list"];
    if (shape->strided && shape->blocks.ndims >= 3) ++seen["3+ dims"];
  }
  // The generator reached every kind of shape and word.
  for (const char* kind :
       {"strided", "list", "3+ dims", "word 1", "word 2", "word 4", "word 8", "word 16"})
    EXPECT_GT(seen[kind], 0) << kind;
}

TEST(DeviceIndex, MatchesHostPackerOnRandomLayoutsSeed1) {
  check_random_layouts(1, 10000);
}
TEST(DeviceIndex, MatchesHostPackerOnRandomLayoutsSeed2) {
  check_random_layouts(2, 10000);
}
TEST(DeviceIndex, MatchesHostPackerOnRandomLayoutsSeed3) {
  check_random_layouts(3, 10000);
}

// The CUDA kernels themselves, where a GPU is visible (scripts/gpu-check); skipped elsewhere.
TEST(DeviceKernels, MatchHostPackerOnRandomLayouts) {
  const auto gpu = cuda_device();
  if (!gpu) GTEST_SKIP() << "no GPU (built with CUDA: " << built_with_cuda() << ")";
  for (std::uint64_t seed : {1, 2, 3}) check_random_layouts(seed, 10000, gpu.get());
}

// A wrong offset must fail: a shape with a perturbed stride packs differently.
TEST(DeviceIndex, DetectsAWrongStride) {
  const PackPlan plan(Layout::stream(4, 16, Layout::dense(8)), 64);
  auto shape = make_shape(plan, 3);
  ASSERT_TRUE(shape);
  std::vector<char> typed(256), ref(plan.packed_bytes(3)), out(ref.size());
  for (std::size_t i = 0; i < typed.size(); ++i) typed[i] = static_cast<char>(i);
  plan.pack(typed.data(), 3, ref.data());
  emulate_pack(*shape, typed.data(), out.data());
  EXPECT_EQ(out, ref);
  shape->blocks.strides[shape->blocks.ndims - 1] += 1;
  emulate_pack(*shape, typed.data(), out.data());
  EXPECT_NE(out, ref);
}

TEST(DeviceIndex, OffsetsBeyondFourGiB) {
  device::StridedShape s;
  s.offset = -7;
  s.block = 8;
  s.ndims = 3;
  const std::int64_t counts[] = {3, 1000, 5};
  const std::int64_t strides[] = {std::int64_t{3} << 31, -(std::int64_t{1} << 22), 24};
  for (int k = 0; k < 3; ++k) {
    s.counts[k] = counts[k];
    s.strides[k] = strides[k];
  }
  ASSERT_EQ(device::block_count(s), 15000);
  std::int64_t b = 0;
  for (std::int64_t i = 0; i < counts[0]; ++i)
    for (std::int64_t j = 0; j < counts[1]; ++j)
      for (std::int64_t k = 0; k < counts[2]; ++k, ++b)
        ASSERT_EQ(device::block_offset(s, b),
                  -7 + i * strides[0] + j * strides[1] + k * strides[2]);
  EXPECT_GT(device::block_offset(s, 14999), std::int64_t{8} << 30);  // past 32 bits
  EXPECT_EQ(device::packed_bytes(s), 15000 * 8);
}

TEST(DeviceIndex, WordSizeFollowsAlignment) {
  device::StridedShape s;
  s.block = 32;
  s.ndims = 1;
  s.counts[0] = 4;
  s.strides[0] = 64;
  alignas(16) char buffer[512];
  EXPECT_EQ(device::word_size(s, buffer, buffer + 256), 16);
  EXPECT_EQ(device::word_size(s, buffer + 8, buffer + 256), 8);
  EXPECT_EQ(device::word_size(s, buffer, buffer + 258), 2);
  s.strides[0] = 36;
  EXPECT_EQ(device::word_size(s, buffer, buffer + 256), 4);
  s.counts[0] = 1;  // a count-1 dimension's stride never moves an address
  EXPECT_EQ(device::word_size(s, buffer, buffer + 256), 16);
  s.offset = 1;
  EXPECT_EQ(device::word_size(s, buffer, buffer + 256), 1);
}

TEST(DeviceShape, ElementsFoldIntoDimensions) {
  // Contiguous elements of a contiguous type: one block.
  auto one = make_shape(PackPlan(Layout::dense(12), 12), 100);
  ASSERT_TRUE(one);
  EXPECT_TRUE(one->contiguous());
  EXPECT_EQ(one->blocks.block, 1200);
  // A 2-D vector whose extent is its full rows: the elements extend the outer dimension.
  auto rows = make_shape(PackPlan(Layout::stream(4, 32, Layout::dense(8)), 128), 3);
  ASSERT_TRUE(rows);
  ASSERT_TRUE(rows->strided);
  ASSERT_EQ(rows->blocks.ndims, 1);
  EXPECT_EQ(rows->blocks.counts[0], 12);
  EXPECT_EQ(rows->blocks.strides[0], 32);
  EXPECT_EQ(rows->block_count, 12);
  // Resized: the elements are a dimension of their own.
  auto resized = make_shape(PackPlan(Layout::stream(4, 32, Layout::dense(8)), 1000), 3);
  ASSERT_TRUE(resized);
  EXPECT_EQ(resized->blocks.ndims, 2);
  // Irregular blocks: a list.
  auto irregular =
      make_shape(PackPlan(Layout::list({{0, Layout::dense(4)}, {16, Layout::dense(8)}}), 32), 2);
  ASSERT_TRUE(irregular);
  EXPECT_FALSE(irregular->strided);
  EXPECT_EQ(irregular->items.size(), 2u);
  EXPECT_EQ(irregular->block_count, 4);
  // More blocks than allowed: no shape (the host method takes it).
  EXPECT_FALSE(make_shape(
      PackPlan(Layout::list({{0, Layout::dense(4)}, {16, Layout::dense(8)}}), 32), 2, 1));
}

TEST(MethodModel, ChoosesByShapeAndNeverHostForReceives) {
  const MethodModel model;
  // Many small blocks: pack on the device.
  auto small = make_shape(PackPlan(Layout::stream(1, 64, Layout::dense(32)), 64), 100000);
  ASSERT_TRUE(small);
  const Span small_span{0, 64 * 100000};
  EXPECT_EQ(model.choose(*small, small_span.hi, true), Method::device);
  // Two large blocks: copy them as they are.
  auto large =
      make_shape(PackPlan(Layout::stream(2, 8 << 20, Layout::dense(4 << 20)), 16 << 20), 1);
  ASSERT_TRUE(large);
  EXPECT_EQ(model.choose(*large, 12 << 20, true), Method::blocks);
  // A slow device packer and a dense extent: the host method wins for a send, never a receive.
  MethodModel slow_kernels = model;
  slow_kernels.pack_gbs = 0.001;
  slow_kernels.block_us = 1000;
  EXPECT_EQ(slow_kernels.choose(*small, small_span.hi, false), Method::host);
  EXPECT_NE(slow_kernels.choose(*small, small_span.hi, true), Method::host);
}

TEST(MethodModel, ParsesParametersAndRejectsBadOnes) {
  MethodModel model;
  std::string problem;
  EXPECT_TRUE(model.parse("copy_gbs=25,launch_us=3.5", problem));
  EXPECT_EQ(model.copy_gbs, 25);
  EXPECT_EQ(model.launch_us, 3.5);
  EXPECT_EQ(model.pack_gbs, MethodModel{}.pack_gbs);
  EXPECT_TRUE(model.parse("", problem));
  for (const char* bad : {"copy_gbs", "copy_gbs=", "copy_gbs=-1", "speed=3", "copy_gbs=2x"}) {
    MethodModel untouched = model;
    EXPECT_FALSE(untouched.parse(bad, problem)) << bad;
    EXPECT_EQ(untouched.copy_gbs, 25) << bad;
    EXPECT_FALSE(problem.empty());
  }
  MethodModel again;
  EXPECT_TRUE(again.parse(model.describe(), problem));
  EXPECT_EQ(again.describe(), model.describe());
}

TEST(FakeDevice, RegisteredPagesAreDeviceMemoryAndInaccessible) {
  FakeDevice fake;
  const std::size_t page = 4096;
  void* memory = std::aligned_alloc(page, 2 * page);
  std::memset(memory, 7, 2 * page);
  char* p = static_cast<char*>(memory);
  EXPECT_FALSE(fake.is_device(p));
  fake.mark(p, 2 * page, true);
  EXPECT_TRUE(fake.is_device(p));
  EXPECT_TRUE(fake.is_device(p + 2 * page - 1));
  EXPECT_FALSE(fake.is_device(p + 2 * page));
  // Only the fake's own copies and kernels reach it; anything else crashes, as on a real GPU
  // buffer seen by an MPI library that is not CUDA-aware.
  EXPECT_DEATH({ std::printf("%d\n", *static_cast<volatile char*>(p)); }, "");
  char host[16] = {};
  ASSERT_TRUE(fake.copy(host, p + 100, sizeof host));
  EXPECT_EQ(host[15], 7);
  const PackPlan plan(Layout::stream(4, 16, Layout::dense(4)), 64);
  auto shape = make_shape(plan, 2);
  ASSERT_TRUE(shape);
  char packed[32];
  ASSERT_TRUE(fake.pack(*shape, p, packed));
  EXPECT_EQ(packed[31], 7);
  EXPECT_EQ(fake.copies(), 1u);
  EXPECT_EQ(fake.kernels(), 1u);
  fake.mark(p, 2 * page, false);
  EXPECT_FALSE(fake.is_device(p));
  EXPECT_EQ(p[0], 7);  // accessible again
  std::free(memory);
}

}  // namespace
}  // namespace commtap::datatypes
