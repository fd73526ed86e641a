// Shapes for the device packer: a layout made strided or listed for the kernels, and the host
// emulation of those kernels (device.hpp).
#include "datatypes/device.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace commtap::datatypes {

namespace {

using device::ListItem;
using device::StridedShape;

// Drops count-1 dimensions, merges dimensions that line up and folds an innermost dimension of
// touching blocks into the block, until nothing changes.
void normalize(std::vector<StridedBlock::Dim>& dims, std::int64_t& block) {
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t k = 0; k < dims.size(); ++k)
      if (dims[k].count == 1) {
        dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(k));
        changed = true;
        break;
      }
    for (std::size_t k = 0; k + 1 < dims.size() && !changed; ++k)
      if (dims[k].stride == dims[k + 1].count * dims[k + 1].stride) {
        dims[k] = {dims[k].count * dims[k + 1].count, dims[k + 1].stride};
        dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        changed = true;
      }
    if (!changed && !dims.empty() && dims.back().stride == block) {
      block *= dims.back().count;
      dims.pop_back();
      changed = true;
    }
  }
}

// The element's blocks in type-map order, touching ones merged. False past `max_items`.
bool flatten(const Layout& node, std::int64_t base, std::vector<ListItem>& items,
             std::int64_t& packed, std::int64_t max_items) {
  switch (node.kind) {
    case Layout::Kind::dense:
      if (node.bytes == 0) return true;
      if (!items.empty() && items.back().offset + items.back().bytes == base) {
        items.back().bytes += node.bytes;
      } else {
        if (static_cast<std::int64_t>(items.size()) >= max_items) return false;
        items.push_back({base, node.bytes, packed});
      }
      packed += node.bytes;
      return true;
    case Layout::Kind::stream:
      for (std::int64_t i = 0; i < node.count; ++i)
        if (!flatten(*node.child, base + i * node.stride, items, packed, max_items)) return false;
      return true;
    case Layout::Kind::list:
      for (const Layout::Item& item : node.items)
        if (!flatten(*item.layout, base + item.offset, items, packed, max_items)) return false;
      return true;
  }
  return false;
}

bool strided_shape(std::int64_t offset, std::int64_t block, std::vector<StridedBlock::Dim> dims,
                   DeviceShape& shape) {
  normalize(dims, block);
  if (dims.size() > static_cast<std::size_t>(device::kMaxDims)) return false;
  shape.strided = true;
  shape.blocks = StridedShape{};
  shape.blocks.offset = offset;
  shape.blocks.block = block;
  shape.blocks.ndims = static_cast<int>(dims.size());
  for (std::size_t k = 0; k < dims.size(); ++k) {
    shape.blocks.counts[k] = dims[k].count;
    shape.blocks.strides[k] = dims[k].stride;
  }
  shape.block_count = device::block_count(shape.blocks);
  shape.smallest_block = block;
  return true;
}

void bounds(const Layout& node, std::int64_t base, std::int64_t& lo, std::int64_t& hi) {
  switch (node.kind) {
    case Layout::Kind::dense:
      if (node.bytes == 0) return;
      lo = std::min(lo, base);
      hi = std::max(hi, base + node.bytes);
      return;
    case Layout::Kind::stream: {
      if (node.count == 0) return;
      std::int64_t clo = INT64_MAX, chi = INT64_MIN;
      bounds(*node.child, 0, clo, chi);
      if (clo > chi) return;
      const std::int64_t last = (node.count - 1) * node.stride;
      lo = std::min(lo, base + clo + std::min<std::int64_t>(0, last));
      hi = std::max(hi, base + chi + std::max<std::int64_t>(0, last));
      return;
    }
    case Layout::Kind::list:
      for (const Layout::Item& item : node.items) bounds(*item.layout, base + item.offset, lo, hi);
      return;
  }
}

}  // namespace

std::optional<DeviceShape> make_shape(const PackPlan& plan, std::int64_t count,
                                      std::int64_t max_items) {
  DeviceShape shape;
  shape.bytes = plan.packed_bytes(count);
  if (shape.bytes == 0) {
    shape.blocks = StridedShape{};
    shape.block_count = 0;
    return shape;
  }
  if (const auto& element = plan.strided_block()) {
    std::vector<StridedBlock::Dim> dims{{count, plan.extent()}};
    dims.insert(dims.end(), element->dims.begin(), element->dims.end());
    if (strided_shape(element->offset, element->block, std::move(dims), shape)) return shape;
  }
  std::int64_t packed = 0;
  if (!flatten(plan.element(), 0, shape.items, packed, max_items)) return std::nullopt;
  if (shape.items.size() == 1 &&
      strided_shape(shape.items[0].offset, shape.items[0].bytes, {{count, plan.extent()}}, shape)) {
    shape.items.clear();
    return shape;
  }
  shape.strided = false;
  shape.list.nitems = static_cast<std::int64_t>(shape.items.size());
  shape.list.elements = count;
  shape.list.extent = plan.extent();
  shape.list.element_size = plan.packed_bytes(1);
  shape.block_count = shape.list.nitems * count;
  shape.smallest_block = INT64_MAX;
  for (const ListItem& item : shape.items)
    shape.smallest_block = std::min(shape.smallest_block, item.bytes);
  return shape;
}

Span span_of(const Layout& element, std::int64_t extent, std::int64_t count) {
  std::int64_t lo = INT64_MAX, hi = INT64_MIN;
  bounds(element, 0, lo, hi);
  if (count <= 0 || lo > hi) return {};
  const std::int64_t last = (count - 1) * extent;
  return {lo + std::min<std::int64_t>(0, last), hi + std::max<std::int64_t>(0, last)};
}

namespace {

template <bool pack>
void emulate(const DeviceShape& shape, char* typed, char* packed, device::Index3 threads) {
  if (shape.bytes == 0) return;
  device::ListShape list = shape.list;
  list.items = shape.items.data();
  const int word = shape.strided ? device::word_size(shape.blocks, typed, packed)
                                 : device::word_size(list, shape.items.data(), typed, packed);
  device::with_word(word, [&](auto w) {
    using Word = decltype(w);
    for (std::int64_t z = 0; z < threads.z; ++z)
      for (std::int64_t y = 0; y < threads.y; ++y)
        for (std::int64_t x = 0; x < threads.x; ++x) {
          if (shape.strided)
            device::strided_body<Word, pack>(shape.blocks, typed, packed, {x, y, z}, threads);
          else
            device::list_body<Word, pack>(list, typed, packed, {x, y, z}, threads);
        }
  });
}

}  // namespace

void emulate_pack(const DeviceShape& shape, const void* typed, void* packed,
                  device::Index3 threads) {
  emulate<true>(shape, const_cast<char*>(static_cast<const char*>(typed)),
                static_cast<char*>(packed), threads);
}

void emulate_unpack(const DeviceShape& shape, const void* packed, void* typed,
                    device::Index3 threads) {
  emulate<false>(shape, static_cast<char*>(typed),
                 const_cast<char*>(static_cast<const char*>(packed)), threads);
}

}  // namespace commtap::datatypes
