// The index arithmetic of the device packer, in __host__ __device__ functions: the CUDA kernels
// (device_kernels.cu) run exactly these bodies with their thread and grid indices, and the host
// runs them too (tests/unit/device_index_test.cpp against the host packer on random types, and
// the fake device behind COMMTAP_TEST_FAKE_DEVICE), so a wrong offset fails on a CPU. Plain
// C++ without CUDA: this header needs nothing but <cstdint>.
//
// Offsets, strides and counts are 64-bit everywhere (TEMPI's 32-bit offsets make objects over
// 4 GiB unsafe), dimensions are any number up to kMaxDims (TEMPI stops at 3), and the word
// moved per thread step (1, 2, 4, 8 or 16 bytes) follows the alignment of both base addresses,
// the offset, every stride and the block, not only the block length.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define COMMTAP_HD __host__ __device__
#else
#define COMMTAP_HD
#endif

namespace commtap::datatypes::device {

inline constexpr int kMaxDims = 12;

// `block` bytes at offset + sum_k i_k * strides[k] for every i_k < counts[k]; dims outermost
// first, the elements of a send already folded in as dimensions (make_shape in device.hpp).
struct StridedShape {
  std::int64_t offset = 0;
  std::int64_t block = 0;
  int ndims = 0;
  std::int64_t counts[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};
};

// An irregular element as a list of blocks, repeated `elements` times `extent` apart.
struct ListItem {
  std::int64_t offset;  // in the typed buffer, from the element's origin
  std::int64_t bytes;
  std::int64_t packed;  // in the packed buffer, from the element's start
};
struct ListShape {
  const ListItem* items = nullptr;  // device memory for the kernels
  std::int64_t nitems = 0;
  std::int64_t elements = 0;
  std::int64_t extent = 0;
  std::int64_t element_size = 0;  // packed bytes of one element
};

// A thread's place in the launch and the launch's size, per axis: x runs over the words of a
// block, y over the innermost dimension (or the items of a list), z over everything outside.
struct Index3 {
  std::int64_t x = 0, y = 0, z = 0;
};

// A 16-byte word that the compiler may move with one vector load and store.
struct alignas(16) Word16 {
  std::uint64_t low, high;
};

// ---- Strided shapes -----------------------------------------------------------------------------

COMMTAP_HD inline std::int64_t inner_count(const StridedShape& s) {
  return s.ndims > 0 ? s.counts[s.ndims - 1] : 1;
}
COMMTAP_HD inline std::int64_t inner_stride(const StridedShape& s) {
  return s.ndims > 0 ? s.strides[s.ndims - 1] : 0;
}
// Rows of the innermost dimension: the product of every other count.
COMMTAP_HD inline std::int64_t outer_count(const StridedShape& s) {
  std::int64_t n = 1;
  for (int k = 0; k + 1 < s.ndims; ++k) n *= s.counts[k];
  return n;
}
// Typed offset of row z (its first block): z decomposed over dims 0..ndims-2, the last of them
// fastest (type-map order).
COMMTAP_HD inline std::int64_t row_offset(const StridedShape& s, std::int64_t z) {
  std::int64_t offset = s.offset;
  for (int k = s.ndims - 2; k >= 0; --k) {
    const std::int64_t c = s.counts[k];
    offset += (z % c) * s.strides[k];
    z /= c;
  }
  return offset;
}
COMMTAP_HD inline std::int64_t block_count(const StridedShape& s) {
  return outer_count(s) * inner_count(s);
}
// Typed offset of block b in packed order; its packed offset is b * block.
COMMTAP_HD inline std::int64_t block_offset(const StridedShape& s, std::int64_t b) {
  const std::int64_t c = inner_count(s);
  return row_offset(s, b / c) + (b % c) * inner_stride(s);
}
COMMTAP_HD inline std::int64_t packed_bytes(const StridedShape& s) {
  return block_count(s) * s.block;
}

// The widest word (16, 8, 4, 2 or 1 bytes) that every address the copy touches is aligned to.
COMMTAP_HD inline int word_for(std::uint64_t bits) {
  int word = 16;
  while (word > 1 && (bits & static_cast<std::uint64_t>(word - 1)) != 0) word /= 2;
  return word;
}
COMMTAP_HD inline int word_size(const StridedShape& s, const void* typed, const void* packed) {
  std::uint64_t bits =
      reinterpret_cast<std::uintptr_t>(typed) + static_cast<std::uint64_t>(s.offset);
  bits |= reinterpret_cast<std::uintptr_t>(packed) | static_cast<std::uint64_t>(s.block);
  for (int k = 0; k < s.ndims; ++k)
    if (s.counts[k] > 1) bits |= static_cast<std::uint64_t>(s.strides[k]);
  return word_for(bits);
}

// The body of one kernel thread: the words of `s` between typed and packed buffers, moved by
// the thread at `at` of a launch of `size` threads (grid-stride loops on every axis, so any
// launch covers any shape). Pack: typed to packed; unpack: the reverse. No division per word:
// one decomposition per row.
template <typename Word, bool pack>
COMMTAP_HD void strided_body(const StridedShape& s, char* typed, char* packed, Index3 at,
                             Index3 size) {
  const std::int64_t words = s.block / static_cast<std::int64_t>(sizeof(Word));
  const std::int64_t rows = outer_count(s), count = inner_count(s), stride = inner_stride(s);
  for (std::int64_t z = at.z; z < rows; z += size.z) {
    char* const row = typed + row_offset(s, z);
    for (std::int64_t y = at.y; y < count; y += size.y) {
      Word* const t = reinterpret_cast<Word*>(row + y * stride);
      Word* const p = reinterpret_cast<Word*>(packed + (z * count + y) * s.block);
      for (std::int64_t x = at.x; x < words; x += size.x) {
        if constexpr (pack)
          p[x] = t[x];
        else
          t[x] = p[x];
      }
    }
  }
}

// ---- Block lists --------------------------------------------------------------------------------

COMMTAP_HD inline int word_size(const ListShape& s, const ListItem* host_items, const void* typed,
                                const void* packed) {
  std::uint64_t bits = reinterpret_cast<std::uintptr_t>(typed) |
                       reinterpret_cast<std::uintptr_t>(packed) |
                       static_cast<std::uint64_t>(s.element_size);
  if (s.elements > 1) bits |= static_cast<std::uint64_t>(s.extent);
  for (std::int64_t j = 0; j < s.nitems; ++j)
    bits |= static_cast<std::uint64_t>(host_items[j].offset) |
            static_cast<std::uint64_t>(host_items[j].bytes) |
            static_cast<std::uint64_t>(host_items[j].packed);
  return word_for(bits);
}

template <typename Word, bool pack>
COMMTAP_HD void list_body(const ListShape& s, char* typed, char* packed, Index3 at, Index3 size) {
  for (std::int64_t e = at.z; e < s.elements; e += size.z) {
    for (std::int64_t j = at.y; j < s.nitems; j += size.y) {
      const ListItem item = s.items[j];
      Word* const t = reinterpret_cast<Word*>(typed + e * s.extent + item.offset);
      Word* const p = reinterpret_cast<Word*>(packed + e * s.element_size + item.packed);
      const std::int64_t words = item.bytes / static_cast<std::int64_t>(sizeof(Word));
      for (std::int64_t x = at.x; x < words; x += size.x) {
        if constexpr (pack)
          p[x] = t[x];
        else
          t[x] = p[x];
      }
    }
  }
}

// Calls f(Word{}) with the word type of `word` bytes (host code: picks the kernel to launch).
template <typename F>
void with_word(int word, F&& f) {
  switch (word) {
    case 16:
      f(Word16{});
      break;
    case 8:
      f(std::uint64_t{});
      break;
    case 4:
      f(std::uint32_t{});
      break;
    case 2:
      f(std::uint16_t{});
      break;
    default:
      f(std::uint8_t{});
      break;
  }
}

// A launch's block shape for a shape whose blocks have `words` words: x covers a block's words
// (up to a warp), y takes the rest of 256 threads.
COMMTAP_HD inline Index3 block_threads(std::int64_t words) {
  std::int64_t x = 1;
  while (x < words && x < 32) x *= 2;
  return {x, 256 / x, 1};
}

}  // namespace commtap::datatypes::device
