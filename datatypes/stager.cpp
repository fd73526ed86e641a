// The stager: device buffers of MPI calls staged through host memory, with the method model's
// method, and the requests whose receives finish later (device.hpp).
#include "datatypes/device.hpp"
#include "datatypes/fake_device.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace commtap::datatypes {

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
