// StreamCompletions with fake stream markers: when markers are recorded (at the call, or at the
// outermost group end), when records leave (completed, failed, at the end), and the bounds.
#include <gtest/gtest.h>

#include <map>
#include <thread>
#include <vector>

#include "monitor/stream_completions.hpp"

namespace {

using commtap::monitor::InstanceRecord;
using commtap::monitor::StreamCompletions;
using commtap::monitor::StreamMarkers;

// Markers that complete when the test says so. Shared state outlives the object handed over.
struct FakeGpu {
  struct Marker {
    void* stream = nullptr;
    int device = 0;
    StreamMarkers::State state = StreamMarkers::State::pending;
    std::uint64_t done_ns = 0;
    bool released = false;
  };
  std::map<std::uint64_t, Marker> markers;  // in recording order
  std::uint64_t next = 1;
  bool refuse = false;
};

class FakeMarkers : public StreamMarkers {
 public:
  explicit FakeMarkers(FakeGpu& gpu) : gpu_(gpu) {}
  bool record(void* stream, int device, std::uint64_t& marker) override {
    if (gpu_.refuse) return false;
    marker = gpu_.next++;
    gpu_.markers[marker] = {stream, device};
    return true;
  }
  State poll(std::uint64_t marker, std::uint64_t& done_ns) override {
    const auto& m = gpu_.markers.at(marker);
    done_ns = m.done_ns;
    return m.state;
  }
  void release(std::uint64_t marker) override { gpu_.markers.at(marker).released = true; }
  std::string describe(int device) override { return "fake " + std::to_string(device); }

 private:
  FakeGpu& gpu_;
};

InstanceRecord collective(std::uint64_t seq, std::uint64_t enter_ns) {
  InstanceRecord record;
  record.comm_id = 7;
  record.seq = seq;
  record.enter_ns = enter_ns;
  return record;
}

void* stream(std::uintptr_t n) {
  return reinterpret_cast<void*>(n);
}

TEST(StreamCompletions, OutsideAGroupTheMarkerFollowsTheCall) {
  FakeGpu gpu;
  StreamCompletions completions(std::make_unique<FakeMarkers>(gpu));
  completions.enqueued(collective(1, 100), stream(0xA), 3);
  ASSERT_EQ(gpu.markers.size(), 1u);
  EXPECT_EQ(gpu.markers[1].stream, stream(0xA));
  EXPECT_EQ(gpu.markers[1].device, 3);

  std::vector<InstanceRecord> out;
  completions.collect(out, false);
  EXPECT_TRUE(out.empty()) << "still running on the stream: held, not written";

  gpu.markers[1].state = StreamMarkers::State::done;
  gpu.markers[1].done_ns = 5'000;
  completions.collect(out, false);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seq, 1u);
  EXPECT_EQ(out[0].exit_ns, 5'000u);
  EXPECT_TRUE(gpu.markers[1].released);
  EXPECT_EQ(completions.unknown(), 0u);
  EXPECT_EQ(completions.devices(), std::vector<std::string>{"fake 3"});
}

TEST(StreamCompletions, InsideAGroupMarkersWaitForTheOutermostEnd) {
  FakeGpu gpu;
  StreamCompletions completions(std::make_unique<FakeMarkers>(gpu));
  completions.group_start();
  completions.enqueued(collective(1, 100), stream(0xA), 0);
  completions.group_start();
  completions.enqueued(collective(2, 110), stream(0xB), 0);
  completions.group_end(true);
  EXPECT_TRUE(gpu.markers.empty()) << "a marker before the launch completes before the work";
  completions.group_end(true);
  ASSERT_EQ(gpu.markers.size(), 2u);
  EXPECT_EQ(gpu.markers[1].stream, stream(0xA));
  EXPECT_EQ(gpu.markers[2].stream, stream(0xB));

  gpu.markers[2].state = StreamMarkers::State::done;
  gpu.markers[2].done_ns = 900;
  std::vector<InstanceRecord> out;
  completions.collect(out, false);
  ASSERT_EQ(out.size(), 1u);  // out of order: each leaves when its own stream is done
  EXPECT_EQ(out[0].seq, 2u);
  EXPECT_EQ(out[0].exit_ns, 900u);
}

TEST(StreamCompletions, AFailedGroupLeavesCompletionsUnknown) {
  FakeGpu gpu;
  StreamCompletions completions(std::make_unique<FakeMarkers>(gpu));
  completions.group_start();
  completions.enqueued(collective(1, 100), stream(0xA), 0);
  completions.enqueued(collective(2, 100), stream(0xA), 0);
  completions.group_end(false);
  EXPECT_TRUE(gpu.markers.empty());
  std::vector<InstanceRecord> out;
  completions.collect(out, false);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].exit_ns, 0u);
  EXPECT_EQ(out[1].exit_ns, 0u);
  EXPECT_EQ(completions.unknown(), 2u);
}

TEST(StreamCompletions, GroupsArePerThread) {
  FakeGpu gpu;
  StreamCompletions completions(std::make_unique<FakeMarkers>(gpu));
  completions.group_start();
  std::thread other([&] { completions.enqueued(collective(5, 100), stream(0xC), 1); });
  other.join();
  EXPECT_EQ(gpu.markers.size(), 1u) << "another thread's group does not hold this call back";
  completions.group_end(true);
}

TEST(StreamCompletions, TheEndNeverWaitsForTheStream) {
  FakeGpu gpu;
  StreamCompletions completions(std::make_unique<FakeMarkers>(gpu));
  completions.enqueued(collective(1, 100), stream(0xA), 0);
  completions.enqueued(collective(2, 200), stream(0xA), 0);
  gpu.markers[1].state = StreamMarkers::State::done;
  gpu.markers[1].done_ns = 150;
  std::vector<InstanceRecord> out;
  completions.collect(out, true);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].exit_ns, 150u);
  EXPECT_EQ(out[1].exit_ns, 0u);
  EXPECT_TRUE(gpu.markers[2].released);
  EXPECT_EQ(completions.unknown(), 1u);
}

TEST(StreamCompletions, FailuresLimitsAndClockStepsGiveUnknownOrClampedTimes) {
  FakeGpu gpu;
  StreamCompletions completions(std::make_unique<FakeMarkers>(gpu), 2);
  completions.enqueued(collective(1, 1'000), stream(0xA), 0);
  completions.enqueued(collective(2, 1'000), stream(0xA), 0);
  completions.enqueued(collective(3, 1'000), stream(0xA), 0);  // over the limit: no marker
  EXPECT_EQ(gpu.markers.size(), 2u);
  gpu.markers[1].state = StreamMarkers::State::failed;
  gpu.markers[2].state = StreamMarkers::State::done;
  gpu.markers[2].done_ns = 990;  // a few ns before the enqueue: the clocks' error
  std::vector<InstanceRecord> out;
  completions.collect(out, false);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].exit_ns, 0u);
  EXPECT_EQ(out[1].exit_ns, 1'000u);
  EXPECT_EQ(out[2].exit_ns, 0u);
  EXPECT_EQ(completions.unknown(), 2u);

  gpu.refuse = true;
  completions.enqueued(collective(4, 1'000), stream(0xA), 0);
  out.clear();
  completions.collect(out, false);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].exit_ns, 0u);
}

TEST(StreamCompletions, WithoutAGpuEveryCompletionIsUnknown) {
  StreamCompletions completions(nullptr);
  completions.group_start();
  completions.enqueued(collective(1, 100), stream(0xA), 0);
  completions.group_end(true);
  completions.enqueued(collective(2, 100), stream(0xA), 0);
  std::vector<InstanceRecord> out;
  completions.collect(out, false);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].exit_ns, 0u);
  EXPECT_EQ(out[1].exit_ns, 0u);
  EXPECT_TRUE(completions.devices().empty());
}

}  // namespace
