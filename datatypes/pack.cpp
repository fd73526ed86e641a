// The host packer: N-D strided blocks with the innermost loop specialized for small fixed block
// sizes (a constant-size memcpy compiles to one or two moves), and a tree walker for the rest.
#include <cstring>
#include <type_traits>

#include "datatypes/datatypes.hpp"

namespace commtap::datatypes {

namespace {

template <std::size_t B, bool gather>
inline void copy_block(char* p, char* strided) {
  if constexpr (gather)
    std::memcpy(p, strided, B);
  else
    std::memcpy(strided, p, B);
}

// Four blocks per iteration: for blocks of a few bytes the loop overhead is the cost.
template <std::size_t B, bool gather>
void run_fixed(char*& packed, char* strided, std::int64_t count, std::int64_t stride) {
  char* p = packed;
  std::int64_t i = 0;
  for (; i + 4 <= count; i += 4, strided += 4 * stride, p += 4 * B) {
    copy_block<B, gather>(p, strided);
    copy_block<B, gather>(p + B, strided + stride);
    copy_block<B, gather>(p + 2 * B, strided + 2 * stride);
    copy_block<B, gather>(p + 3 * B, strided + 3 * stride);
  }
  for (; i < count; ++i, strided += stride, p += B) copy_block<B, gather>(p, strided);
  packed = p;
}

template <bool gather>
void run_any(char*& packed, char* strided, std::int64_t count, std::int64_t stride,
             std::int64_t block) {
  const auto n = static_cast<std::size_t>(block);
  char* p = packed;
  for (std::int64_t i = 0; i < count; ++i, strided += stride, p += block) {
    if constexpr (gather)
      std::memcpy(p, strided, n);
    else
      std::memcpy(strided, p, n);
  }
  packed = p;
}

// Calls `loop(std::integral_constant<std::size_t, B>{})` for the block sizes that have a
// fixed-size loop, and returns false for the others.
template <typename Loop>
bool with_fixed_block(std::int64_t block, Loop loop) {
  switch (block) {
#define COMMTAP_FIXED_BLOCK(B)                      \
  case B:                                           \
    loop(std::integral_constant<std::size_t, B>{}); \
    return true;
    COMMTAP_FIXED_BLOCK(1)
    COMMTAP_FIXED_BLOCK(2)
    COMMTAP_FIXED_BLOCK(4)
    COMMTAP_FIXED_BLOCK(8)
    COMMTAP_FIXED_BLOCK(12)
    COMMTAP_FIXED_BLOCK(16)
    COMMTAP_FIXED_BLOCK(24)
    COMMTAP_FIXED_BLOCK(32)
    COMMTAP_FIXED_BLOCK(48)
    COMMTAP_FIXED_BLOCK(64)
#undef COMMTAP_FIXED_BLOCK
    default:
      return false;
  }
}

// `count` blocks of `block` bytes, `stride` apart.
template <bool gather>
void run(char*& packed, char* strided, std::int64_t count, std::int64_t stride,
         std::int64_t block) {
  if (stride == block) {  // contiguous after all
    const auto n = static_cast<std::size_t>(count * block);
    if constexpr (gather)
      std::memcpy(packed, strided, n);
    else
      std::memcpy(strided, packed, n);
    packed += n;
    return;
  }
  if (!with_fixed_block(block, [&](auto b) {
        run_fixed<decltype(b)::value, gather>(packed, strided, count, stride);
      }))
    run_any<gather>(packed, strided, count, stride, block);
}

// Two dimensions with the block size dispatched once, so that short inner rows (a few blocks of
// a few bytes) do not pay a dispatch per row.
template <bool gather>
void run2(char*& packed, char* base, std::int64_t c0, std::int64_t s0, std::int64_t c1,
          std::int64_t s1, std::int64_t block) {
  if (s1 == block) return run<gather>(packed, base, c0, s0, c1 * block);
  if (!with_fixed_block(block, [&](auto b) {
        for (std::int64_t i = 0; i < c0; ++i)
          run_fixed<decltype(b)::value, gather>(packed, base + i * s0, c1, s1);
      }))
    for (std::int64_t i = 0; i < c0; ++i) run_any<gather>(packed, base + i * s0, c1, s1, block);
}

// dims[level..] of a strided block, starting at `base`.
template <bool gather>
void strided(char*& packed, char* base, const StridedBlock::Dim* dims, std::size_t levels,
             std::int64_t block) {
  if (levels == 0) {
    run<gather>(packed, base, 1, block, block);
  } else if (levels == 1) {
    run<gather>(packed, base, dims[0].count, dims[0].stride, block);
  } else if (levels == 2) {
    run2<gather>(packed, base, dims[0].count, dims[0].stride, dims[1].count, dims[1].stride, block);
  } else {
    for (std::int64_t i = 0; i < dims[0].count; ++i)
      strided<gather>(packed, base + i * dims[0].stride, dims + 1, levels - 1, block);
  }
}

template <bool gather>
void tree(char*& packed, char* base, const Layout& node) {
  switch (node.kind) {
    case Layout::Kind::dense:
      run<gather>(packed, base, 1, node.bytes, node.bytes);
      return;
    case Layout::Kind::stream:
      if (node.child->kind == Layout::Kind::dense) {
        run<gather>(packed, base, node.count, node.stride, node.child->bytes);
      } else {
        for (std::int64_t i = 0; i < node.count; ++i)
          tree<gather>(packed, base + i * node.stride, *node.child);
      }
      return;
    case Layout::Kind::list:
      for (const Layout::Item& item : node.items)
        tree<gather>(packed, base + item.offset, *item.layout);
      return;
  }
}

template <bool gather>
void transfer(const LayoutPtr& element, const std::optional<StridedBlock>& shape,
              std::int64_t extent, char* base, std::int64_t count, char* packed) {
  if (shape) {
    // The elements are one more (outermost) dimension; folded into the next when they line up,
    // so that contiguous elements of a strided type become one longer loop.
    StridedBlock::Dim dims[16];
    std::size_t levels = 0;
    if (shape->dims.size() + 1 <= std::size(dims)) {
      if (shape->dims.empty() && extent == shape->block) {
        run<gather>(packed, base + shape->offset, 1, count * shape->block, count * shape->block);
        return;
      }
      if (!shape->dims.empty() && extent == shape->dims[0].count * shape->dims[0].stride) {
        dims[levels++] = {count * shape->dims[0].count, shape->dims[0].stride};
        for (std::size_t k = 1; k < shape->dims.size(); ++k) dims[levels++] = shape->dims[k];
      } else {
        dims[levels++] = {count, extent};
        for (const StridedBlock::Dim& d : shape->dims) dims[levels++] = d;
      }
      strided<gather>(packed, base + shape->offset, dims, levels, shape->block);
      return;
    }
  }
  for (std::int64_t i = 0; i < count; ++i) tree<gather>(packed, base + i * extent, *element);
}

}  // namespace

PackPlan::PackPlan(LayoutPtr element, std::int64_t extent)
    : element_(std::move(element)), extent_(extent), strided_(as_strided(element_)) {}

void PackPlan::pack(const void* in, std::int64_t count, void* out) const {
  transfer<true>(element_, strided_, extent_, const_cast<char*>(static_cast<const char*>(in)),
                 count, static_cast<char*>(out));
}

void PackPlan::unpack(const void* in, std::int64_t count, void* out) const {
  transfer<false>(element_, strided_, extent_, static_cast<char*>(out), count,
                  const_cast<char*>(static_cast<const char*>(in)));
}

template <typename Count>
std::optional<int> try_pack(PlanCache& plans, bool packing, const void* in, Count count,
                            MPI_Datatype datatype, void* out, Count size, Count* position,
                            MPI_Comm comm) {
  if (count < 0 || position == nullptr || comm == MPI_COMM_NULL || *position < 0)
    return std::nullopt;
  auto plan = plans.find(datatype);
  if (!plan) return std::nullopt;
  const std::int64_t bytes = plan->packed_bytes(count);
  if (static_cast<std::int64_t>(size) - static_cast<std::int64_t>(*position) < bytes)
    return std::nullopt;
  if (bytes > 0 && (memory_kind(in) != MemoryKind::host || memory_kind(out) != MemoryKind::host))
    return std::nullopt;
  if (packing)
    plan->pack(in, count, static_cast<char*>(out) + *position);
  else
    plan->unpack(static_cast<const char*>(in) + *position, count, out);
  *position += static_cast<Count>(bytes);
  return MPI_SUCCESS;
}

template std::optional<int> try_pack<int>(PlanCache&, bool, const void*, int, MPI_Datatype, void*,
                                          int, int*, MPI_Comm);
template std::optional<int> try_pack<MPI_Count>(PlanCache&, bool, const void*, MPI_Count,
                                                MPI_Datatype, void*, MPI_Count, MPI_Count*,
                                                MPI_Comm);

}  // namespace commtap::datatypes
