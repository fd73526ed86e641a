// Shapes for the device packer, the host emulation of its kernels, the fake device, the method
// model and the stager (device.hpp).
#include "datatypes/device.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <sstream>

namespace commtap::datatypes {

// ---- Shapes
// ---------------------------------------------------------------------------------------

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

// ---- The fake device
// ------------------------------------------------------------------------------

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

// ---- The method model ---------------------------------------------------------------------------

const char* method_name(Method method) {
  switch (method) {
    case Method::device:
      return "device";
    case Method::host:
      return "host";
    case Method::blocks:
      return "blocks";
  }
  return "?";
}

double MethodModel::cost_us(Method method, const DeviceShape& shape,
                            std::int64_t span_bytes) const {
  const double bytes = static_cast<double>(shape.bytes);
  const double copy = copy_us + bytes / (copy_gbs * 1e3);
  switch (method) {
    case Method::device: {
      // Memory moves in 32-byte sectors: smaller blocks waste the rest of theirs.
      const double efficiency =
          std::min(1.0, static_cast<double>(std::max<std::int64_t>(shape.smallest_block, 1)) / 32);
      return launch_us + bytes / (pack_gbs * 1e3 * efficiency) + copy;
    }
    case Method::host:
      return copy_us + static_cast<double>(span_bytes) / (copy_gbs * 1e3) +
             bytes / (host_pack_gbs * 1e3);
    case Method::blocks:
      return copy +
             static_cast<double>(std::max<std::int64_t>(shape.block_count - 1, 0)) * block_us;
  }
  return 0;
}

Method MethodModel::choose(const DeviceShape& shape, std::int64_t span_bytes,
                           bool receiving) const {
  Method best = Method::device;
  for (Method m : {Method::blocks, Method::host}) {
    if (m == Method::host && receiving) continue;
    if (cost_us(m, shape, span_bytes) < cost_us(best, shape, span_bytes)) best = m;
  }
  return best;
}

namespace {
struct Parameter {
  const char* name;
  double MethodModel::*field;
};
constexpr Parameter kParameters[] = {
    {"launch_us", &MethodModel::launch_us},         {"copy_us", &MethodModel::copy_us},
    {"copy_gbs", &MethodModel::copy_gbs},           {"pack_gbs", &MethodModel::pack_gbs},
    {"host_pack_gbs", &MethodModel::host_pack_gbs}, {"block_us", &MethodModel::block_us},
};
}  // namespace

std::string MethodModel::describe() const {
  std::ostringstream out;
  for (const Parameter& p : kParameters)
    out << (&p == kParameters ? "" : ",") << p.name << "=" << this->*p.field;
  return out.str();
}

bool MethodModel::parse(const std::string& text, std::string& problem) {
  MethodModel parsed = *this;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const Parameter* found = nullptr;
    for (const Parameter& p : kParameters)
      if (key == p.name) found = &p;
    char* end = nullptr;
    const double value = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &end);
    if (found == nullptr || eq == std::string::npos || end == item.c_str() + eq + 1 ||
        *end != '\0' || !(value > 0)) {
      problem = "'" + item +
                "' is not name=positive number (names: launch_us, copy_us, "
                "copy_gbs, pack_gbs, host_pack_gbs, block_us)";
      return false;
    }
    parsed.*(found->field) = value;
  }
  *this = parsed;
  return true;
}

MethodModel measure_model(DeviceMemory& device) {
  using clock = std::chrono::steady_clock;
  auto us_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(clock::now() - t0).count();
  };
  MethodModel model;
  constexpr std::size_t kBig = 32 << 20;
  char* dev = static_cast<char*>(device.alloc_device(2 * kBig));
  char* host = static_cast<char*>(device.alloc_host(2 * kBig));
  if (dev == nullptr || host == nullptr) {
    if (dev != nullptr) device.free_device(dev);
    if (host != nullptr) device.free_host(host);
    return model;
  }
  auto best_of = [](int n, auto&& once) {
    double best = 1e300;
    for (int i = 0; i < n; ++i) best = std::min(best, once());
    return best;
  };
  // One small copy: its fixed cost.
  model.copy_us = best_of(20, [&] {
    const auto t0 = clock::now();
    device.copy(host, dev, 8);
    device.synchronize();
    return us_since(t0);
  });
  const double big = best_of(5, [&] {
    const auto t0 = clock::now();
    device.copy(host, dev, kBig);
    device.synchronize();
    return us_since(t0);
  });
  model.copy_gbs = static_cast<double>(kBig) / std::max(big - model.copy_us, 1.0) / 1e3;
  // Queued copies of 64 bytes: the cost of each further block.
  const double queued = best_of(5, [&] {
    const auto t0 = clock::now();
    for (int i = 0; i < 64; ++i) device.copy(host + i * 128, dev + i * 128, 64);
    device.synchronize();
    return us_since(t0);
  });
  model.block_us = std::max(0.1, (queued - model.copy_us) / 63);
  // A kernel on 32-byte blocks 64 bytes apart: launch cost, then bandwidth over 16 MiB packed.
  PackPlan row(Layout::stream(1, 64, Layout::dense(32)), 64);
  const auto tiny = make_shape(row, 1);
  if (tiny) {
    model.launch_us = best_of(20, [&] {
      const auto t0 = clock::now();
      device.pack(*tiny, dev, dev + kBig);
      device.synchronize();
      return us_since(t0);
    });
    // Packing from device to device memory within the device's half.
    PackPlan half(Layout::stream(1, 64, Layout::dense(32)), 64);
    const auto inside = make_shape(half, static_cast<std::int64_t>(kBig / 64));
    const double pack = best_of(5, [&] {
      const auto t0 = clock::now();
      device.pack(*inside, dev, dev + kBig);
      device.synchronize();
      return us_since(t0);
    });
    model.pack_gbs =
        static_cast<double>(inside->bytes) / std::max(pack - model.launch_us, 1.0) / 1e3;
    std::vector<char> typed(kBig), packed(kBig / 2);
    const double host_pack = best_of(3, [&] {
      const auto t0 = clock::now();
      half.pack(typed.data(), static_cast<std::int64_t>(kBig / 64), packed.data());
      return us_since(t0);
    });
    model.host_pack_gbs = static_cast<double>(kBig / 2) / std::max(host_pack, 1.0) / 1e3;
  }
  device.free_device(dev);
  device.free_host(host);
  return model;
}

// ---- The stager ---------------------------------------------------------------------------------

Stager::Stager(DeviceMemory& device, PlanCache& plans, MethodModel model,
               std::optional<Method> forced)
    : device_(device), plans_(plans), model_(model), forced_(forced) {}

void Stager::fail(const char* what) {
  if (!failed_once_.exchange(true))
    std::fprintf(stderr, "commtap: staging a device buffer failed (%s, device %s)\n", what,
                 device_.name());
}

namespace {
std::size_t size_class(std::size_t bytes) {
  return std::bit_ceil(std::max<std::size_t>(bytes, 4096));
}
constexpr std::size_t kMaxPooledBytes = std::size_t{256} << 20;
}  // namespace

char* Stager::take_buffer(std::size_t bytes, bool device_memory) {
  if (bytes == 0) return nullptr;
  const std::size_t size = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    auto& pool = pool_[device_memory ? 1 : 0];
    if (auto it = pool.find(size); it != pool.end()) {
      char* buffer = it->second;
      pool.erase(it);
      pooled_bytes_ -= size;
      return buffer;
    }
  }
  return static_cast<char*>(device_memory ? device_.alloc_device(size) : device_.alloc_host(size));
}

void Stager::give_buffer(char* buffer, std::size_t bytes, bool device_memory) {
  if (buffer == nullptr) return;
  const std::size_t size = size_class(bytes);
  {
    std::lock_guard lock(mutex_);
    if (pooled_bytes_ + size <= kMaxPooledBytes) {
      pool_[device_memory ? 1 : 0].emplace(size, buffer);
      pooled_bytes_ += size;
      return;
    }
  }
  if (device_memory)
    device_.free_device(buffer);
  else
    device_.free_host(buffer);
}

MPI_Datatype Stager::element_type(const Staged& staged) {
  const std::int64_t element_size = staged.plan ? staged.plan->packed_bytes(1) : 1;
  if (element_size == 1) return MPI_BYTE;
  std::lock_guard lock(mutex_);
  const auto [it, made] = wire_types_.try_emplace(element_size, MPI_DATATYPE_NULL);
  MPI_Datatype& type = it->second;
  if (made) {
    // The user's elements as contiguous bytes: counts stay the user's (no overflow of an int
    // count), and the status counts bytes, so MPI_Get_count with the user's type is right.
    PMPI_Type_contiguous_c(element_size, MPI_BYTE, &type);
    PMPI_Type_commit(&type);
  }
  return type;
}

Method Stager::pick(const DeviceShape& shape, std::int64_t span_bytes, bool receiving) const {
  if (forced_ && !(receiving && *forced_ == Method::host)) return *forced_;
  return model_.choose(shape, span_bytes, receiving);
}

bool Stager::blocks(const DeviceShape& shape, char* typed, char* packed, bool packing) {
  bool ok = true;
  auto one = [&](std::int64_t offset, std::int64_t bytes, std::int64_t at) {
    ok = (packing ? device_.copy(packed + at, typed + offset, static_cast<std::size_t>(bytes))
                  : device_.copy(typed + offset, packed + at, static_cast<std::size_t>(bytes))) &&
         ok;
  };
  if (shape.strided) {
    for (std::int64_t b = 0; b < shape.block_count; ++b)
      one(device::block_offset(shape.blocks, b), shape.blocks.block, b * shape.blocks.block);
  } else {
    for (std::int64_t e = 0; e < shape.list.elements; ++e)
      for (const device::ListItem& item : shape.items)
        one(e * shape.list.extent + item.offset, item.bytes,
            e * shape.list.element_size + item.packed);
  }
  return ok;
}

bool Stager::to_host(const PackPlan& plan, const DeviceShape& shape, const void* typed_in,
                     char* packed, std::int64_t count, Method method) {
  char* typed = const_cast<char*>(static_cast<const char*>(typed_in));
  if (shape.bytes == 0) return true;
  if (shape.contiguous())
    return device_.copy(packed, typed + shape.blocks.offset,
                        static_cast<std::size_t>(shape.bytes)) &&
           device_.synchronize();
  switch (method) {
    case Method::device: {
      char* scratch = take_buffer(static_cast<std::size_t>(shape.bytes), true);
      if (scratch == nullptr) return false;
      const bool ok = device_.pack(shape, typed, scratch) &&
                      device_.copy(packed, scratch, static_cast<std::size_t>(shape.bytes)) &&
                      device_.synchronize();
      give_buffer(scratch, static_cast<std::size_t>(shape.bytes), true);
      return ok;
    }
    case Method::host: {
      const Span span = span_of(plan.element(), plan.extent(), count);
      const auto bytes = static_cast<std::size_t>(span.hi - span.lo);
      char* bounce = take_buffer(bytes, false);
      if (bounce == nullptr) return false;
      const bool ok = device_.copy(bounce, typed + span.lo, bytes) && device_.synchronize();
      if (ok) plan.pack(bounce - span.lo, count, packed);
      give_buffer(bounce, bytes, false);
      return ok;
    }
    case Method::blocks:
      return blocks(shape, typed, packed, true) && device_.synchronize();
  }
  return false;
}

bool Stager::to_device(const PackPlan& plan, const DeviceShape& shape, const char* packed_in,
                       void* typed_out, std::int64_t count, Method method) {
  char* typed = static_cast<char*>(typed_out);
  char* packed = const_cast<char*>(packed_in);
  if (shape.bytes == 0) return true;
  if (shape.contiguous())
    return device_.copy(typed + shape.blocks.offset, packed,
                        static_cast<std::size_t>(shape.bytes)) &&
           device_.synchronize();
  switch (method) {
    case Method::device: {
      char* scratch = take_buffer(static_cast<std::size_t>(shape.bytes), true);
      if (scratch == nullptr) return false;
      const bool ok = device_.copy(scratch, packed, static_cast<std::size_t>(shape.bytes)) &&
                      device_.unpack(shape, scratch, typed) && device_.synchronize();
      give_buffer(scratch, static_cast<std::size_t>(shape.bytes), true);
      return ok;
    }
    case Method::host: {  // read, modify, write the whole extent (only without another way)
      const Span span = span_of(plan.element(), plan.extent(), count);
      const auto bytes = static_cast<std::size_t>(span.hi - span.lo);
      char* bounce = take_buffer(bytes, false);
      if (bounce == nullptr) return false;
      bool ok = device_.copy(bounce, typed + span.lo, bytes) && device_.synchronize();
      if (ok) {
        plan.unpack(packed, count, bounce - span.lo);
        ok = device_.copy(typed + span.lo, bounce, bytes) && device_.synchronize();
      }
      give_buffer(bounce, bytes, false);
      return ok;
    }
    case Method::blocks:
      return blocks(shape, typed, packed, false) && device_.synchronize();
  }
  return false;
}

namespace {
// A shape too irregular for the device packer (more blocks than make_shape lists): only the
// host method takes it.
DeviceShape irregular(const PackPlan& plan, std::int64_t count) {
  DeviceShape shape;
  shape.strided = false;
  shape.bytes = plan.packed_bytes(count);
  shape.block_count = 2;
  shape.smallest_block = 1;
  return shape;
}
}  // namespace

bool Stager::pack_to_host(const PackPlan& plan, const void* typed, char* packed,
                          std::int64_t count) {
  const auto shape = make_shape(plan, count);
  if (!shape) return to_host(plan, irregular(plan, count), typed, packed, count, Method::host);
  const Span span = span_of(plan.element(), plan.extent(), count);
  return to_host(plan, *shape, typed, packed, count, pick(*shape, span.hi - span.lo, false));
}

bool Stager::unpack_to_device(const PackPlan& plan, const char* packed, void* typed,
                              std::int64_t count) {
  const auto shape = make_shape(plan, count);
  if (!shape) return to_device(plan, irregular(plan, count), packed, typed, count, Method::host);
  const Span span = span_of(plan.element(), plan.extent(), count);
  return to_device(plan, *shape, packed, typed, count, pick(*shape, span.hi - span.lo, true));
}

int Stager::stage(const void* buffer, MPI_Count count, MPI_Datatype datatype, bool send,
                  bool receive, Staged& out) {
  out = Staged{};
  out.plan = plans_.find(datatype);
  if (out.plan) {
    const std::int64_t bytes = out.plan->packed_bytes(count);
    if (bytes <= 0) return MPI_SUCCESS;  // nothing to move: the library never reads the buffer
    out.host = take_buffer(static_cast<std::size_t>(bytes), false);
    if (out.host == nullptr) return fail("no pinned memory"), MPI_ERR_NO_MEM;
    out.capacity = static_cast<std::size_t>(bytes);
    out.wire_type = MPI_BYTE;
    out.wire_count = bytes;
    out.wire_buffer = out.host;
  } else {
    // No plan (darray, types with holes, a type the library does not let commtap decode): the
    // span of bytes it touches goes through a host copy with the user's own type.
    MPI_Count true_lb = 0, true_extent = 0, lb = 0, extent = 0, size = 0;
    if (PMPI_Type_size_c(datatype, &size) != MPI_SUCCESS || size * count == 0) return MPI_SUCCESS;
    PMPI_Type_get_true_extent_c(datatype, &true_lb, &true_extent);
    PMPI_Type_get_extent_c(datatype, &lb, &extent);
    const std::int64_t last = (count - 1) * extent;
    out.span = {true_lb + std::min<std::int64_t>(0, last),
                true_lb + true_extent + std::max<std::int64_t>(0, last)};
    out.capacity = static_cast<std::size_t>(out.span.hi - out.span.lo);
    out.host = take_buffer(out.capacity, false);
    if (out.host == nullptr) return fail("no pinned memory"), MPI_ERR_NO_MEM;
    out.wire_type = datatype;
    out.wire_buffer = out.host - out.span.lo;
  }
  out.user = const_cast<void*>(buffer);
  out.count = count;
  out.receive = receive;
  if (!send && !(receive && !out.plan)) return MPI_SUCCESS;
  // Sends, and receives without a plan (whose gaps must come back unchanged), read the buffer.
  const bool ok = out.plan ? pack_to_host(*out.plan, buffer, out.host, count)
                           : device_.copy(out.host, static_cast<const char*>(buffer) + out.span.lo,
                                          out.capacity) &&
                                 device_.synchronize();
  if (!ok) {
    release(out);
    fail("device to host");
    return MPI_ERR_OTHER;
  }
  return MPI_SUCCESS;
}

int Stager::stage_send(const void* buffer, MPI_Count count, MPI_Datatype datatype, Staged& out) {
  return stage(buffer, count, datatype, true, false, out);
}
int Stager::stage_receive(void* buffer, MPI_Count count, MPI_Datatype datatype, Staged& out,
                          bool whole) {
  const int rc = stage(buffer, count, datatype, whole, true, out);
  out.whole = whole;
  return rc;
}
int Stager::stage_replace(void* buffer, MPI_Count count, MPI_Datatype datatype, Staged& out,
                          bool whole) {
  const int rc = stage(buffer, count, datatype, true, true, out);
  out.whole = whole;
  return rc;
}

void Stager::finish_receive(Staged& staged, const MPI_Status& status, int rc) {
  if (staged.user == nullptr) return;
  int cancelled = 0;
  if (!staged.whole) PMPI_Test_cancelled(&status, &cancelled);
  int error = rc == MPI_ERR_IN_STATUS && !staged.whole ? status.MPI_ERROR : rc;
  int error_class = MPI_SUCCESS;
  if (error != MPI_SUCCESS) PMPI_Error_class(error, &error_class);
  // A truncated message filled the buffer as far as it goes, as the library would have.
  if (!cancelled && (error == MPI_SUCCESS || error_class == MPI_ERR_TRUNCATE)) {
    bool ok = true;
    if (staged.plan) {
      MPI_Count received = static_cast<MPI_Count>(staged.capacity);
      if (!staged.whole) PMPI_Get_count_c(&status, MPI_BYTE, &received);
      received = std::clamp<MPI_Count>(received, 0, static_cast<MPI_Count>(staged.capacity));
      const PackPlan& plan = *staged.plan;
      const std::int64_t size = plan.packed_bytes(1);
      const std::int64_t full = received / size, rest = received % size;
      auto move = [&](const char* packed, char* typed, std::int64_t count) {
        return unpack_to_device(plan, packed, typed, count);
      };
      char* user = static_cast<char*>(staged.user);
      ok = move(staged.host, user, full);
      if (ok && rest > 0) {
        // A part of an element arrived: its first `rest` packed bytes change, the rest of the
        // element stays (what the library's unpack does).
        std::vector<char> element(static_cast<std::size_t>(size));
        char* last = user + full * plan.extent();
        ok = pack_to_host(plan, last, element.data(), 1);
        if (ok) {
          std::memcpy(element.data(), staged.host + full * size, static_cast<std::size_t>(rest));
          ok = move(element.data(), last, 1);
        }
      }
    } else {
      ok = device_.copy(static_cast<char*>(staged.user) + staged.span.lo, staged.host,
                        staged.capacity) &&
           device_.synchronize();
    }
    if (!ok) fail("host to device");
  }
  release(staged);
}

void Stager::release(Staged& staged) {
  give_buffer(staged.host, staged.capacity, false);
  staged = Staged{};
}

// ---- Requests
// -------------------------------------------------------------------------------------

void Stager::track(MPI_Request request, Operation operation) {
  std::lock_guard lock(mutex_);
  requests_.emplace(request,
                    Entry{sequence_.fetch_add(1, std::memory_order_acq_rel), std::move(operation)});
  tracked_.fetch_add(1, std::memory_order_relaxed);
}

std::optional<Stager::Operation> Stager::take(MPI_Request request, std::uint64_t epoch) {
  std::lock_guard lock(mutex_);
  auto [first, last] = requests_.equal_range(request);
  auto oldest = requests_.end();
  for (auto it = first; it != last; ++it)
    if (it->second.sequence < epoch &&
        (oldest == requests_.end() || it->second.sequence < oldest->second.sequence))
      oldest = it;
  if (oldest == requests_.end()) return std::nullopt;
  Operation operation = std::move(oldest->second.operation);
  requests_.erase(oldest);
  tracked_.fetch_sub(1, std::memory_order_relaxed);
  return operation;
}

bool Stager::tracks(MPI_Request request) {
  std::lock_guard lock(mutex_);
  return requests_.count(request) > 0;
}

void Stager::finish(Operation& operation, const MPI_Status& status, int rc) {
  release(operation.send);
  finish_receive(operation.receive, status, rc);
}

void Stager::orphan(MPI_Request request) {
  auto operation = take(request, ~std::uint64_t{0});
  if (!operation) return;
  std::lock_guard lock(mutex_);
  orphans_.emplace_back(request, std::move(*operation));
  have_orphans_.store(true, std::memory_order_release);
  tracked_.fetch_add(1, std::memory_order_relaxed);  // completion calls keep checking
}

void Stager::progress() {
  if (!have_orphans_.load(std::memory_order_acquire)) return;
  std::vector<std::pair<MPI_Request, Operation>> orphans;
  {
    std::lock_guard lock(mutex_);
    if (orphans_.empty()) return;
    orphans.swap(orphans_);
    have_orphans_.store(false, std::memory_order_relaxed);
  }
  std::vector<std::pair<MPI_Request, Operation>> pending;
  for (auto& [request, operation] : orphans) {
    int done = 0;
    MPI_Status status{};
    const int rc = PMPI_Test(&request, &done, &status);
    if (done || rc != MPI_SUCCESS) {
      finish(operation, status, rc);
      tracked_.fetch_sub(1, std::memory_order_relaxed);
    } else {
      pending.emplace_back(request, std::move(operation));
    }
  }
  std::lock_guard lock(mutex_);
  for (auto& p : pending) orphans_.push_back(std::move(p));
  if (!orphans_.empty()) have_orphans_.store(true, std::memory_order_release);
}

std::unique_ptr<Stager> make_stager(const DatatypeSettings& settings, PlanCache& plans,
                                    std::vector<std::string>& problems) {
  if (!settings.device_staging) return nullptr;
  const std::string& method = settings.device_method;
  const std::string& model = settings.device_model;
  DeviceMemory* device = nullptr;
  if (settings.test_fake_device) {
    device = &fake_device();
  } else {
    static DeviceMemory* cuda = cuda_device().release();  // never destroyed
    device = cuda;
  }
  if (device == nullptr) return nullptr;
  std::optional<Method> forced;
  if (method == "device")
    forced = Method::device;
  else if (method == "host")
    forced = Method::host;
  else if (method == "blocks")
    forced = Method::blocks;
  else if (method != "auto" && !method.empty())
    problems.push_back("commtap: COMMTAP_DEVICE_METHOD=" + method +
                       " is not auto, device, host or blocks; using auto");
  MethodModel parameters;
  std::string problem;
  if (model == "measure")
    parameters = measure_model(*device);
  else if (!parameters.parse(model, problem))
    problems.push_back("commtap: COMMTAP_DEVICE_MODEL: " + problem + "; using the built-in model");
  return std::make_unique<Stager>(*device, plans, parameters, forced);
}

#if !COMMTAP_HAVE_CUDA
std::unique_ptr<DeviceMemory> cuda_device() {
  return nullptr;
}
#endif

}  // namespace commtap::datatypes
