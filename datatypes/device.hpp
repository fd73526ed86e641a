// datatypes on CUDA device buffers over an MPI that is not CUDA-aware: the device-memory seam
// (the CUDA runtime, or a fake that treats registered host memory as device memory so that CI
// without a GPU runs every path), the shapes the device packer runs, the method model that
// chooses how a transfer reaches pinned host memory, and the stager that moves a point-to-point
// buffer through pinned host staging and back.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "datatypes/datatypes.hpp"
#include "datatypes/device_index.hpp"
#include "settings/module_settings.hpp"

namespace commtap::datatypes {

// ---- Shapes
// ---------------------------------------------------------------------------------------

// `count` elements of a plan as the device packer sees them: one N-D strided block (elements
// folded in as the outermost dimension, dimensions that line up merged), or a block list.
struct DeviceShape {
  bool strided = true;
  device::StridedShape blocks;
  std::vector<device::ListItem> items;  // list shapes, host copy
  device::ListShape list;               // list shapes; `list.items` is set by whoever launches
  std::int64_t bytes = 0;               // packed bytes
  std::int64_t block_count = 0;         // contiguous blocks (the cost of copying block by block)
  std::int64_t smallest_block = 0;
  bool contiguous() const { return block_count <= 1; }
};
// nullopt when the list would have more than `max_items` blocks per element.
std::optional<DeviceShape> make_shape(const PackPlan& plan, std::int64_t count,
                                      std::int64_t max_items = 1 << 20);
// Byte range [lo, hi) that `count` elements touch, relative to the buffer.
struct Span {
  std::int64_t lo = 0, hi = 0;
};
Span span_of(const Layout& element, std::int64_t extent, std::int64_t count);

// The device kernels' bodies run on the host, on host memory (the fake device and the tests):
// a launch of `threads` x `grid` threads emulated one thread after the other.
void emulate_pack(const DeviceShape& shape, const void* typed, void* packed,
                  device::Index3 threads = {1, 1, 1});
void emulate_unpack(const DeviceShape& shape, const void* packed, void* typed,
                    device::Index3 threads = {1, 1, 1});

// ---- The device-memory seam -------------------------------------------------------------------

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual const char* name() const = 0;
  virtual bool is_device(const void* pointer) = 0;
  // Pinned host memory (staging) and device memory (scratch); nullptr on failure.
  virtual void* alloc_host(std::size_t bytes) = 0;
  virtual void free_host(void* pointer) = 0;
  virtual void* alloc_device(std::size_t bytes) = 0;
  virtual void free_device(void* pointer) = 0;
  // Queued in order on commtap's own stream; false on an error. Either side may be host or
  // device memory.
  virtual bool copy(void* to, const void* from, std::size_t bytes) = 0;
  // The pack kernels between a typed device buffer and a packed device buffer.
  virtual bool pack(const DeviceShape& shape, const void* typed, void* packed) = 0;
  virtual bool unpack(const DeviceShape& shape, const void* packed, void* typed) = 0;
  // Waits for everything queued.
  virtual bool synchronize() = 0;
};

// The CUDA runtime; nullptr in a build without CUDA or where no GPU is visible.
std::unique_ptr<DeviceMemory> cuda_device();

// ---- The method model
// -----------------------------------------------------------------------------

// How a device buffer's bytes reach packed host memory (and back), TEMPI's three:
//   device  pack on the device into scratch, one copy of the packed bytes
//   host    one copy of the whole extent, pack on the host (sends only: copying a receive's
//           extent back would overwrite gaps the application may be writing meanwhile)
//   blocks  one copy per contiguous block
enum class Method : std::uint8_t { device, host, blocks };
const char* method_name(Method method);

struct MethodModel {
  // Built-in values: safe (never a disaster) on PCIe 3 to 5 and NVLink-C2C machines.
  double launch_us = 8;      // a kernel launch and its synchronization
  double copy_us = 10;       // one host<->device copy, its fixed cost
  double copy_gbs = 12;      // host<->device bandwidth, pinned memory
  double pack_gbs = 300;     // device packing of blocks of >= 32 B (less for smaller blocks)
  double host_pack_gbs = 4;  // commtap's host packer
  double block_us = 4;       // each further copy queued for the copy-per-block method
  // Estimated microseconds of moving `shape` with `method`.
  double cost_us(Method method, const DeviceShape& shape, std::int64_t span_bytes) const;
  // The cheapest method; `receiving` rules out `host`.
  Method choose(const DeviceShape& shape, std::int64_t span_bytes, bool receiving) const;
  std::string describe() const;
  // "launch_us=8,copy_gbs=20,..." (any subset); false with `problem` set on a bad item.
  bool parse(const std::string& text, std::string& problem);
};

// Times each parameter on `device` (a few milliseconds with a GPU).
MethodModel measure_model(DeviceMemory& device);

// ---- Staging ------------------------------------------------------------------------------------

// One side of a staged transfer: where the library reads or writes instead of the device buffer.
struct Staged {
  void* user = nullptr;    // the application's device buffer
  std::int64_t count = 0;  // its elements
  std::shared_ptr<const PackPlan>
      plan;  // null: no plan; the span goes through with the user's type
  // What the library is given: buffer, type and count (-1: the user's count). With a plan,
  // MPI_BYTE and the packed bytes (the library's fastest path, and no derived type for MPICH's
  // MPI_Isendrecv to trip over); where that count does not fit the call's count type,
  // element_type() and the user's count.
  MPI_Datatype wire_type = MPI_DATATYPE_NULL;
  MPI_Count wire_count = -1;
  void* wire_buffer = nullptr;
  char* host = nullptr;  // pinned staging
  std::size_t capacity = 0;
  Span span;  // without a plan: the host copy holds these bytes of the user's buffer
  bool receive = false;
  // Staging holds the buffer's packed bytes before the receive too, and all of it goes back
  // whatever the status says: MPI_Isendrecv(_replace), whose statuses MPICH 4.0.2 leaves
  // unwritten (tests/mpich_defects/isendrecv_status.c).
  bool whole = false;
};

class Stager {
 public:
  // `forced`: a method to use whenever it applies (tests, benchmarks), else the model decides.
  Stager(DeviceMemory& device, PlanCache& plans, MethodModel model, std::optional<Method> forced);
  bool is_device(const void* pointer) { return device_.is_device(pointer); }
  DeviceMemory& device() { return device_; }
  const MethodModel& model() const { return model_; }

  // Send: the device buffer's elements packed into staging. MPI_SUCCESS, or MPI_ERR_OTHER (one
  // line on stderr) when the device fails.
  int stage_send(const void* buffer, MPI_Count count, MPI_Datatype datatype, Staged& out);
  // Receive: staging for `count` elements; nothing moves yet (see finish_receive).
  int stage_receive(void* buffer, MPI_Count count, MPI_Datatype datatype, Staged& out,
                    bool whole = false);
  // Contiguous bytes of one element of `staged`'s plan (made once per size, never freed).
  MPI_Datatype element_type(const Staged& staged);
  // Sendrecv_replace: the send's staging doubles as the receive's.
  int stage_replace(void* buffer, MPI_Count count, MPI_Datatype datatype, Staged& out,
                    bool whole = false);
  // After the library completed the receive with `status` (`rc`: the call's error, if any):
  // what arrived goes to the device buffer (none if cancelled or failed), then staging is freed.
  void finish_receive(Staged& staged, const MPI_Status& status, int rc);
  void release(Staged& staged);

  // ---- Requests: nonblocking staged operations, completed by whichever Wait/Test completes
  // the library's request (the application holds the library's own handle: no fake handles).
  struct Operation {
    Staged send, receive;  // either may be empty (user == nullptr)
  };
  std::uint64_t epoch() const { return sequence_.load(std::memory_order_acquire); }
  bool tracking() const { return tracked_.load(std::memory_order_relaxed) != 0; }
  void track(MPI_Request request, Operation operation);
  // The oldest operation of `request` made before `epoch` (a handle can be shared by sends
  // that completed at once), removed from the table.
  std::optional<Operation> take(MPI_Request request, std::uint64_t epoch);
  bool tracks(MPI_Request request);
  // The operation completed with `status`.
  void finish(Operation& operation, const MPI_Status& status, int rc);
  // MPI_Request_free of a staged request: the library keeps the request (staging must live
  // until the transfer is over); it is finished by a later progress().
  void orphan(MPI_Request request);
  // Tests orphaned requests (PMPI_Test) and finishes those that completed.
  void progress();

 private:
  int stage(const void* buffer, MPI_Count count, MPI_Datatype datatype, bool send, bool receive,
            Staged& out);
  // Packed bytes between the device buffer and host memory, by `method`.
  bool to_host(const PackPlan& plan, const DeviceShape& shape, const void* typed, char* packed,
               std::int64_t count, Method method);
  bool to_device(const PackPlan& plan, const DeviceShape& shape, const char* packed, void* typed,
                 std::int64_t count, Method method);
  // The same with the shape and method chosen here.
  bool pack_to_host(const PackPlan& plan, const void* typed, char* packed, std::int64_t count);
  bool unpack_to_device(const PackPlan& plan, const char* packed, void* typed, std::int64_t count);
  bool blocks(const DeviceShape& shape, char* typed, char* packed, bool packing);
  Method pick(const DeviceShape& shape, std::int64_t span_bytes, bool receiving) const;
  // Pooled pinned and device buffers (allocating pinned memory costs milliseconds).
  char* take_buffer(std::size_t bytes, bool device_memory);
  void give_buffer(char* buffer, std::size_t bytes, bool device_memory);

  void fail(const char* what);

  DeviceMemory& device_;
  PlanCache& plans_;
  MethodModel model_;
  std::optional<Method> forced_;
  std::mutex mutex_;  // pools, wire types, requests
  std::multimap<std::size_t, char*> pool_[2];
  std::size_t pooled_bytes_ = 0;
  std::unordered_map<std::int64_t, MPI_Datatype> wire_types_;
  struct Entry {
    std::uint64_t sequence;
    Operation operation;
  };
  std::unordered_multimap<MPI_Request, Entry> requests_;
  std::vector<std::pair<MPI_Request, Operation>> orphans_;
  // orphans_ is not empty: progress(), called by every staged call, takes no lock without any.
  std::atomic<bool> have_orphans_{false};
  std::atomic<std::uint64_t> sequence_{1};
  std::atomic<std::size_t> tracked_{0};
  std::atomic<bool> failed_once_{false};
};

// The stager the settings ask for (COMMTAP_DEVICE_STAGING, _METHOD, _MODEL and
// COMMTAP_TEST_FAKE_DEVICE), or nullptr: staging off, or neither a GPU nor the fake. A bad value
// adds one line to `problems` and its default is used.
std::unique_ptr<Stager> make_stager(const DatatypeSettings& settings, PlanCache& plans,
                                    std::vector<std::string>& problems);

}  // namespace commtap::datatypes
