// Completion times of work the application enqueues on GPU streams (NCCL collectives), found
// without ever synchronizing the application's stream: a marker (a CUDA event) is recorded on
// the stream right after the work, and the trace writer polls the markers each window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "monitor/call_counters.hpp"
#include "monitor/clock.hpp"

namespace commtap::monitor {

// Markers on streams: CUDA events in production, a fake in the unit tests.
class StreamMarkers {
 public:
  virtual ~StreamMarkers() = default;
  // Records a marker after the work enqueued on `stream` (of `device`) so far. False if it
  // cannot; the completion then stays unknown.
  virtual bool record(void* stream, int device, std::uint64_t& marker) = 0;
  enum class State { pending, done, failed };
  // Never blocks. done: `done_ns` is when the marker's work completed, on now_ns()'s scale.
  virtual State poll(std::uint64_t marker, std::uint64_t& done_ns) = 0;
  // The marker will not be polled again.
  virtual void release(std::uint64_t marker) = 0;
  // "device 0 (NVIDIA H100 80GB HBM3, PCI 0000:19:00.0)", or "" if unknown.
  virtual std::string describe(int device) = 0;
};

// CUDA events, or nullptr where there is no usable GPU (built without the toolkit, no driver,
// no device): callers then record completions as unknown.
std::unique_ptr<StreamMarkers> make_cuda_markers();

// The instance records of sampled stream collectives, held until their markers complete.
// Thread safe: collectives arrive from any application thread, collect() runs on the writer.
class StreamCompletions {
 public:
  explicit StreamCompletions(std::unique_ptr<StreamMarkers> markers,
                             std::size_t max_in_flight = 4096);

  // ncclGroupStart/ncclGroupEnd on the calling thread. Inside a group NCCL only queues the
  // collectives and launches them at the outermost group end, so markers recorded at the
  // call would complete before the work: they are recorded when the outermost group ends.
  void group_start();
  // `launched`: the group end succeeded, so the group's work is on its streams now.
  void group_end(bool launched);

  // A sampled collective on `stream` was enqueued; `record` has no exit time yet.
  void enqueued(const InstanceRecord& record, void* stream, int device);

  // Moves out the records whose completion is known by now (exit_ns set, or 0 when the marker
  // failed). `everything`: the last window; the records still pending leave too, exit unknown.
  void collect(std::vector<InstanceRecord>& out, bool everything);

  // Records that left with an unknown completion (marker failed, or not recorded: the limit of
  // markers in flight, a failed group, the end of the run).
  std::uint64_t unknown() const;
  // The devices that markers were recorded on, each described once (see describe()).
  std::vector<std::string> devices();

 private:
  struct InFlight {
    InstanceRecord record;
    std::uint64_t marker = 0;
    bool has_marker = false;
  };
  void start_marker(InFlight& entry, void* stream, int device);

  std::unique_ptr<StreamMarkers> markers_;
  std::size_t max_in_flight_;
  mutable std::mutex mutex_;
  std::vector<InFlight> in_flight_;
  std::vector<int> devices_;
  std::vector<std::string> descriptions_;  // of devices_, in order, each made once
  std::uint64_t unknown_ = 0;
  std::uint64_t serial_;  // tells a thread's group state of another instance apart
};

}  // namespace commtap::monitor
