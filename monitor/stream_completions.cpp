#include "monitor/stream_completions.hpp"

#include <algorithm>
#include <atomic>

namespace commtap::monitor {

namespace {

std::atomic<std::uint64_t> next_serial{1};

// One thread's open group: how deep, and the collectives waiting for its outermost end.
struct PendingCollective {
  InstanceRecord record;
  void* stream = nullptr;
  int device = 0;
};
struct GroupState {
  std::uint64_t owner = 0;
  int depth = 0;
  std::vector<PendingCollective> pending;
};
thread_local GroupState t_group;

GroupState& group_of(std::uint64_t serial) {
  if (t_group.owner != serial) t_group = GroupState{serial, 0, {}};
  return t_group;
}

}  // namespace

StreamCompletions::StreamCompletions(std::unique_ptr<StreamMarkers> markers,
                                     std::size_t max_in_flight)
    : markers_(std::move(markers)),
      max_in_flight_(max_in_flight),
      serial_(next_serial.fetch_add(1)) {}

void StreamCompletions::group_start() {
  ++group_of(serial_).depth;
}

void StreamCompletions::group_end(bool launched) {
  GroupState& group = group_of(serial_);
  if (group.depth == 0) return;  // an unmatched end: NCCL reports the error itself
  if (--group.depth > 0) return;
  std::vector<PendingCollective> pending;
  pending.swap(group.pending);
  std::lock_guard lock(mutex_);
  for (PendingCollective& p : pending) {
    InFlight entry{p.record, 0, false};
    if (launched) start_marker(entry, p.stream, p.device);
    if (!entry.has_marker) ++unknown_;
    in_flight_.push_back(entry);
  }
}

void StreamCompletions::enqueued(const InstanceRecord& record, void* stream, int device) {
  GroupState& group = group_of(serial_);
  if (group.depth > 0) {
    group.pending.push_back({record, stream, device});
    return;
  }
  std::lock_guard lock(mutex_);
  InFlight entry{record, 0, false};
  start_marker(entry, stream, device);
  if (!entry.has_marker) ++unknown_;
  in_flight_.push_back(entry);
}

void StreamCompletions::start_marker(InFlight& entry, void* stream, int device) {
  if (markers_ == nullptr || in_flight_.size() >= max_in_flight_) return;
  entry.has_marker = markers_->record(stream, device, entry.marker);
  if (entry.has_marker && std::find(devices_.begin(), devices_.end(), device) == devices_.end())
    devices_.push_back(device);
}

void StreamCompletions::collect(std::vector<InstanceRecord>& out, bool everything) {
  std::lock_guard lock(mutex_);
  auto keep = in_flight_.begin();
  for (InFlight& entry : in_flight_) {
    bool leaves = !entry.has_marker || everything;
    if (entry.has_marker) {
      std::uint64_t done_ns = 0;
      switch (markers_->poll(entry.marker, done_ns)) {
        case StreamMarkers::State::done:
          entry.record.exit_ns = std::max(done_ns, entry.record.enter_ns);
          leaves = true;
          break;
        case StreamMarkers::State::failed:
          ++unknown_;
          leaves = true;
          break;
        case StreamMarkers::State::pending:
          if (everything) ++unknown_;  // the run ends first: never wait for the stream
          break;
      }
      if (leaves) markers_->release(entry.marker);
    }
    if (leaves)
      out.push_back(entry.record);
    else
      *keep++ = entry;
  }
  in_flight_.erase(keep, in_flight_.end());
}

std::uint64_t StreamCompletions::unknown() const {
  std::lock_guard lock(mutex_);
  return unknown_;
}

std::vector<std::string> StreamCompletions::devices() {
  std::lock_guard lock(mutex_);
  // The writer asks every window; the driver is asked once per device.
  while (descriptions_.size() < devices_.size())
    descriptions_.push_back(markers_->describe(devices_[descriptions_.size()]));
  return descriptions_;
}

}  // namespace commtap::monitor
