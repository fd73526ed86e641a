// StreamMarkers with CUDA events. A marker's completion time on this host's clock comes from
// the GPU's own timestamps: cudaEventElapsedTime between a reference event, whose host time is
// known, and the marker. The reference is recorded on a private non-blocking stream and waited
// for (that stream is idle, so the wait is microseconds and never touches the application's
// streams); its host time is the middle of [before record, after the wait], so completion
// times are good to half that interval (a few microseconds). References are renewed at most
// once a second, which keeps the float milliseconds of the elapsed time fine-grained.
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "monitor/stream_completions.hpp"

#if COMMTAP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace commtap::monitor {

#if COMMTAP_HAVE_CUDA
namespace {

// Runs `body` with `device` current on this thread, then restores the thread's device.
template <typename Body>
auto on_device(int device, Body body) {
  int previous = -1;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device &&
                        cudaSetDevice(device) == cudaSuccess;
  auto result = body();
  if (switched) cudaSetDevice(previous);
  return result;
}

struct Reference {
  cudaEvent_t event = nullptr;
  std::uint64_t host_ns = 0;
  ~Reference() {
    if (event != nullptr) cudaEventDestroy(event);
  }
};

class CudaMarkers final : public StreamMarkers {
 public:
  bool record(void* stream, int device, std::uint64_t& marker) override {
    std::lock_guard lock(mutex_);
    Device* state = device_state(device);
    if (state == nullptr) return false;
    const std::shared_ptr<Reference> reference = current_reference(*state, device);
    if (reference == nullptr) return false;
    cudaEvent_t event = nullptr;
    if (!state->spare.empty()) {
      event = state->spare.back();
      state->spare.pop_back();
    } else if (on_device(device, [&] { return cudaEventCreate(&event); }) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    // An event records on the stream's device whatever the thread's current device is, but
    // it must have been created there: the spare pool is per device.
    if (cudaEventRecord(event, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
      cudaGetLastError();
      state->spare.push_back(event);
      return false;
    }
    marker = next_++;
    markers_[marker] = Marker{event, device, reference};
    return true;
  }

  State poll(std::uint64_t marker, std::uint64_t& done_ns) override {
    std::lock_guard lock(mutex_);
    auto found = markers_.find(marker);
    if (found == markers_.end()) return State::failed;
    const Marker& m = found->second;
    const cudaError_t status = cudaEventQuery(m.event);
    if (status == cudaErrorNotReady) return State::pending;
    float ms = 0.0f;
    if (status != cudaSuccess ||
        cudaEventElapsedTime(&ms, m.reference->event, m.event) != cudaSuccess || ms < 0.0f) {
      cudaGetLastError();
      return State::failed;
    }
    done_ns = m.reference->host_ns + static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6);
    return State::done;
  }

  void release(std::uint64_t marker) override {
    std::lock_guard lock(mutex_);
    auto found = markers_.find(marker);
    if (found == markers_.end()) return;
    devices_[found->second.device].spare.push_back(found->second.event);
    markers_.erase(found);
  }

  std::string describe(int device) override {
    char bus_id[32] = {};
    cudaDeviceProp properties{};
    std::string text = "device " + std::to_string(device);
    const bool named = cudaGetDeviceProperties(&properties, device) == cudaSuccess;
    const bool located = cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) == cudaSuccess;
    cudaGetLastError();
    if (named || located)
      text += std::string(" (") + (named ? properties.name : "?") + ", PCI " +
              (located ? bus_id : "?") + ")";
    return text;
  }

 private:
  struct Device {
    cudaStream_t reference_stream = nullptr;
    std::shared_ptr<Reference> reference;
    std::vector<cudaEvent_t> spare;
    bool usable = false;
  };
  struct Marker {
    cudaEvent_t event = nullptr;
    int device = 0;
    std::shared_ptr<Reference> reference;  // recorded before the marker: elapsed time >= 0
  };

  Device* device_state(int device) {
    auto [it, inserted] = devices_.try_emplace(device);
    if (inserted)
      it->second.usable =
          on_device(device, [&] {
            return cudaStreamCreateWithFlags(&it->second.reference_stream, cudaStreamNonBlocking);
          }) == cudaSuccess;
    if (!it->second.usable) cudaGetLastError();
    return it->second.usable ? &it->second : nullptr;
  }

  std::shared_ptr<Reference> current_reference(Device& state, int device) {
    const std::uint64_t now = now_ns();
    if (state.reference != nullptr && now < state.reference->host_ns + 1'000'000'000)
      return state.reference;
    auto reference = std::make_shared<Reference>();
    const bool made = on_device(device, [&] {
      if (cudaEventCreate(&reference->event) != cudaSuccess) return false;
      const std::uint64_t before = now_ns();
      if (cudaEventRecord(reference->event, state.reference_stream) != cudaSuccess ||
          cudaEventSynchronize(reference->event) != cudaSuccess)
        return false;
      const std::uint64_t after = now_ns();
      reference->host_ns = before + (after - before) / 2;
      return true;
    });
    if (!made) {
      cudaGetLastError();
      return state.reference;  // keep the old one if there is one
    }
    state.reference = reference;
    return reference;
  }

  std::mutex mutex_;
  std::unordered_map<int, Device> devices_;
  std::unordered_map<std::uint64_t, Marker> markers_;
  std::uint64_t next_ = 1;
};

}  // namespace

std::unique_ptr<StreamMarkers> make_cuda_markers() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return nullptr;
  }
  return std::make_unique<CudaMarkers>();
}

#else

std::unique_ptr<StreamMarkers> make_cuda_markers() {
  return nullptr;
}

#endif

}  // namespace commtap::monitor
