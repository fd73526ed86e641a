// The NCCL profiler plugin's events -> records, driven the way NCCL 2.28 calls a v5 plugin (and
// older versions' shapes), with a fake clock and a sink that keeps the records.
#include "nccl/profiler_events.hpp"
#include "monitor/sampling.hpp"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "interpose/function_table.hpp"
#include "record_sink.hpp"

namespace {

namespace abi = commtap::nccl::profiler_abi;
namespace np = commtap::nccl::profiler;
using commtap::interpose::Fn;
using commtap::monitor::InstanceRecord;
using commtap::monitor::RecordKind;

using commtap::nccl::test::g_now;
using commtap::nccl::test::records;
// The record's function number (named short: the expectations use it on every line).
std::uint32_t fn(Fn f) {
  return commtap::nccl::test::function_number(f);
}
std::uint64_t real_now() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000 +
         static_cast<std::uint64_t>(ts.tv_nsec);
}
void drop(const InstanceRecord&) noexcept {}

// Each test starts with a fresh sink and clock.
class NcclProfilerEvents : public ::testing::Test {
 protected:
  void SetUp() override { commtap::nccl::test::start_recording(1000); }
};

np::CommSetup full_setup(std::int64_t id, int rank, int nranks, commtap::world::CommState* state,
                         std::uint64_t sample = 1) {
  np::CommSetup s;
  s.id = id;
  s.rank = rank;
  s.nranks = nranks;
  s.state = state;
  s.owns_progress = true;
  s.record_instances = true;
  s.record_transfers = true;
  s.kernel_channels = true;
  s.sample = sample;
  s.pid = static_cast<int>(getpid());
  return s;
}

// NCCL's side of a v5 plugin, one call per helper, in the order of the research notes (§5).
template <int V = 5>
struct Nccl {
  using Descr = typename abi::Version<V>::Descr;
  using Args = typename abi::Version<V>::StateArgs;
  np::Comm* comm;

  void* start(Descr d) {
    void* handle = reinterpret_cast<void*>(0xdead);  // must be overwritten, declined or not
    np::start_event<V>(comm, &handle, &d);
    return handle;
  }
  static void stop(void* h) { np::stop_event(h); }
  static void state(void* h, abi::EventState s, Args* args) {
    np::record_event_state<V>(h, s, args);
  }

  // The application thread's part of one blocking collective: returns the Coll handle (whose
  // stop has happened: Coll stop means enqueued).
  void* collective(const char* func, std::size_t count, const char* datatype, int channels,
                   int root = 0) {
    void* group_api = nullptr;
    if constexpr (V >= 5) {
      Descr ga{};
      ga.type = abi::kGroupApi;
      ga.groupApi.groupDepth = 1;
      group_api = start(ga);
      EXPECT_EQ(group_api, nullptr);
      state(group_api, abi::kGroupStartApiStop, nullptr);
      Descr ca{};
      ca.type = abi::kCollApi;
      ca.parentObj = group_api;
      ca.collApi.func = func;
      ca.collApi.count = count;
      stop(start(ca));
      state(group_api, abi::kGroupEndApiStart, nullptr);
      Descr kl{};
      kl.type = abi::kKernelLaunch;
      kl.parentObj = group_api;
      stop(start(kl));
    }
    Descr g{};
    g.type = abi::kGroup;
    void* group = start(g);
    Descr c{};
    c.type = abi::kColl;
    c.rank = 0;
    c.coll.seqNumber = 0;
    c.coll.func = func;
    c.coll.count = count;
    c.coll.root = root;
    c.coll.datatype = datatype;
    c.coll.nChannels = static_cast<std::uint8_t>(channels);
    c.coll.algo = "RING";
    c.coll.proto = "SIMPLE";
    if constexpr (V >= 5) c.coll.parentGroup = group;
    void* coll = start(c);
    stop(coll);
    stop(group);
    stop(group_api);
    return coll;
  }

  void* proxy_op(void* parent, int channel, int peer, bool send, int steps) {
    Descr d{};
    d.type = abi::kProxyOp;
    d.parentObj = parent;
    d.proxyOp.pid = getpid();
    d.proxyOp.channelId = static_cast<std::uint8_t>(channel);
    d.proxyOp.peer = peer;
    d.proxyOp.nSteps = steps;
    d.proxyOp.chunkSize = 1 << 20;
    d.proxyOp.isSend = send ? 1 : 0;
    return start(d);
  }
  // One network step, with its states; `bytes` at SendWait / RecvFlushWait.
  void step(void* op, int index, bool send, std::size_t bytes, std::uint64_t t0, std::uint64_t t1) {
    g_now = t0;
    Descr d{};
    d.type = abi::kProxyStep;
    d.parentObj = op;
    d.proxyStep.step = index;
    void* s = start(d);
    Args a{};
    if constexpr (V >= 4) a.proxyStep.transSize = bytes;
    if (send) {
      state(s, abi::kProxyStepSendGpuWait, &a);
      g_now = t0 + 20;  // the GPU's data is there; then the receiver's buffer
      state(s, abi::kProxyStepSendPeerWait, &a);
      g_now = t0 + 30;  // posted to the network
      state(s, abi::kProxyStepSendWait, &a);
      g_now = t1;
    } else {
      state(s, abi::kProxyStepRecvWait, &a);
      g_now = t1;
      state(s, abi::kProxyStepRecvFlushWait, &a);
      g_now = t1 + 50;  // the GPU takes it later: not the transfer's end
      state(s, abi::kProxyStepRecvGpuWait, &a);
    }
    stop(s);
  }
  // One channel's kernel, as the proxy's profiler op reports it.
  void kernel_channel(void* coll, int channel, std::uint64_t host_start, std::uint64_t gpu_start,
                      std::uint64_t host_stop, std::uint64_t gpu_stop) {
    g_now = host_start;
    Descr d{};
    d.type = abi::kKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = static_cast<std::uint8_t>(channel);
    if constexpr (V >= 4) d.kernelCh.pTimer = gpu_start;
    void* k = start(d);
    g_now = host_stop;
    Args a{};
    if constexpr (V >= 4) a.kernelCh.pTimer = gpu_stop;
    if (k != nullptr) state(k, abi::kKernelChStop, &a);
    if (k != nullptr) stop(k);
  }
};

constexpr std::uint64_t kGpu = 1'756'135'989'724'672'000ull;  // %globaltimer: epoch ns

TEST_F(NcclProfilerEvents, SampledAllReduceGivesOneInstanceAndItsTransfers) {
  commtap::world::CommState state;
  np::Comm* comm = np::new_comm(5);
  np::configure(comm, full_setup(42, 0, 2, &state));
  Nccl<> nccl{comm};

  g_now = 1000;
  void* coll = nccl.collective("AllReduce", 256, "ncclFloat32", 2);
  ASSERT_NE(coll, nullptr);
  EXPECT_EQ(state.started.load(), 1u);
  EXPECT_EQ(state.completed.load(), 0u);  // enqueued only

  // Proxy thread: a send and a receive with the ring's next/previous rank on channel 0.
  void* send = nccl.proxy_op(coll, 0, 1, true, 2);
  void* recv = nccl.proxy_op(coll, 0, 1, false, 2);
  ASSERT_NE(send, nullptr);
  ASSERT_NE(recv, nullptr);
  nccl.step(send, 0, true, 512, 2000, 2100);
  nccl.step(recv, 0, false, 512, 2010, 2200);
  nccl.step(send, 1, true, 512, 2300, 2400);
  nccl.step(recv, 1, false, 512, 2310, 2500);
  // The kernels report with delay; the smallest delay (1000 ns at channel 0's start) is the
  // clocks' offset, so the exit is channel 1's GPU stop + that offset: 7500.
  nccl.kernel_channel(coll, 0, 5000, kGpu + 4000, 8000, kGpu + 6000);
  EXPECT_EQ(state.completed.load(), 0u);  // channel 1 still running
  nccl.kernel_channel(coll, 1, 5100, kGpu + 4050, 9000, kGpu + 6500);
  EXPECT_EQ(state.completed.load(), 1u);
  g_now = 9500;
  Nccl<>::stop(send);
  Nccl<>::stop(recv);

  const auto colls = records(RecordKind::collective);
  ASSERT_EQ(colls.size(), 1u);
  EXPECT_EQ(colls[0].comm_id, 42);
  EXPECT_EQ(colls[0].seq, 1u);
  EXPECT_EQ(colls[0].bytes, 1024u);
  EXPECT_EQ(colls[0].function, fn(Fn::ncclAllReduce));
  EXPECT_EQ(colls[0].root, -1);
  EXPECT_EQ(colls[0].enter_ns, 1000u);
  EXPECT_EQ(colls[0].exit_ns, 7500u);

  const auto sends = records(RecordKind::send);
  const auto recvs = records(RecordKind::recv);
  ASSERT_EQ(sends.size(), 1u);
  ASSERT_EQ(recvs.size(), 1u);
  EXPECT_EQ(sends[0].comm_id, 42);
  EXPECT_EQ(sends[0].seq, 1u);  // the collective's sequence number
  EXPECT_EQ(sends[0].tag, 0);   // its channel
  EXPECT_EQ(sends[0].root, 1);  // the peer
  // The row is the last step, one message over the link: the waits between steps (for the GPU,
  // for the ring's upstream) are not the link's.
  EXPECT_EQ(sends[0].bytes, 512u);
  EXPECT_EQ(sends[0].enter_ns, 2330u);  // the last step posted to the network (SendWait)
  EXPECT_EQ(sends[0].exit_ns, 2400u);   // ... and done
  EXPECT_EQ(sends[0].function, fn(Fn::ncclAllReduce));
  EXPECT_EQ(recvs[0].bytes, 512u);
  EXPECT_EQ(recvs[0].enter_ns, 2310u);  // the last step's receive posted
  EXPECT_EQ(recvs[0].exit_ns, 2500u);   // ... and its data arrived
}

TEST_F(NcclProfilerEvents, UnsampledCollectivesRecordNothingButComplete) {
  commtap::world::CommState state;
  np::Comm* comm = np::new_comm(5);
  np::configure(comm, full_setup(43, 0, 2, &state, /*sample*/ 4));
  Nccl<> nccl{comm};
  std::vector<std::uint64_t> chosen;  // one in 4, by (communicator, seq)
  for (int i = 1; i <= 8; ++i) {
    void* coll = nccl.collective("Broadcast", 4096, "ncclInt8", 1, /*root*/ 1);
    void* op = nccl.proxy_op(coll, 0, 1, true, 1);
    if (commtap::monitor::is_sampled(43, static_cast<std::uint64_t>(i), 4))
      chosen.push_back(static_cast<std::uint64_t>(i));
    if (chosen.empty() || chosen.back() != static_cast<std::uint64_t>(i)) {
      EXPECT_EQ(op, nullptr) << i;  // declined: and so are its steps
      nccl.step(op, 0, true, 4096, 100, 200);
    } else {
      EXPECT_NE(op, nullptr) << i;
      nccl.step(op, 0, true, 4096, 100, 200);
    }
    nccl.kernel_channel(coll, 0, 300, kGpu + 100, 400, kGpu + 200);
    Nccl<>::stop(op);
    EXPECT_EQ(state.completed.load(), static_cast<std::uint64_t>(i));
  }
  const auto colls = records(RecordKind::collective);
  ASSERT_EQ(chosen.size(), 2u);  // of 8 at one in 4 with this communicator's id
  ASSERT_EQ(colls.size(), 2u);
  EXPECT_EQ(colls[0].seq, chosen[0]);
  EXPECT_EQ(colls[1].seq, chosen[1]);
  EXPECT_EQ(colls[0].root, 1);
  EXPECT_EQ(colls[0].function, fn(Fn::ncclBroadcast));
  EXPECT_EQ(colls[0].bytes, 4096u);
  EXPECT_EQ(records(RecordKind::send).size(), 2u);
}

TEST_F(NcclProfilerEvents, CompletionWaitsForTheCollStopAndEveryChannel) {
  commtap::world::CommState state;
  np::Comm* comm = np::new_comm(5);
  np::configure(comm, full_setup(44, 0, 1, &state));
  Nccl<> nccl{comm};
  // The proxy may see the kernel on a channel before NCCL stops the Coll event.
  abi::v5::Descr c{};
  c.type = abi::kColl;
  c.coll.func = "ReduceScatter";
  c.coll.count = 10;
  c.coll.datatype = "ncclBfloat16";
  c.coll.nChannels = 2;
  void* coll = nccl.start(c);
  nccl.kernel_channel(coll, 0, 1100, kGpu, 1200, kGpu + 10);
  nccl.kernel_channel(coll, 1, 1100, kGpu, 1200, kGpu + 10);
  EXPECT_EQ(state.completed.load(), 0u);
  Nccl<>::stop(coll);
  EXPECT_EQ(state.completed.load(), 1u);
  const auto colls = records(RecordKind::collective);
  ASSERT_EQ(colls.size(), 1u);
  EXPECT_EQ(colls[0].bytes, 20u);
  EXPECT_EQ(colls[0].function, fn(Fn::ncclReduceScatter));
  // A stale KernelCh after completion changes nothing.
  nccl.kernel_channel(coll, 0, 1300, kGpu, 1400, kGpu + 10);
  EXPECT_EQ(records(RecordKind::collective).size(), 1u);
}

TEST_F(NcclProfilerEvents, NullAndForeignHandlesAreHarmless) {
  commtap::world::CommState state;
  np::Comm* comm = np::new_comm(5);
  np::configure(comm, full_setup(45, 0, 2, &state));
  Nccl<> nccl{comm};
  abi::v5::Descr d{};
  d.type = abi::kColl;
  d.coll.func = "AllReduce";
  void* h = reinterpret_cast<void*>(1);
  EXPECT_EQ(np::start_event<5>(nullptr, &h, &d), abi::kSuccess);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(np::start_event<5>(comm, nullptr, &d), abi::kSuccess);
  h = reinterpret_cast<void*>(1);
  EXPECT_EQ(np::start_event<5>(comm, &h, nullptr), abi::kSuccess);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(np::stop_event(nullptr), abi::kSuccess);  // NetPlugin stops without a check
  EXPECT_EQ(np::record_event_state<5>(nullptr, abi::kGroupStartApiStop, nullptr), abi::kSuccess);
  EXPECT_EQ(np::record_event_state<5>(nullptr, abi::kNetPluginUpdate, nullptr), abi::kSuccess);
  // Children of declined parents (parentObj NULL) are declined.
  EXPECT_EQ(nccl.proxy_op(nullptr, 0, 1, true, 1), nullptr);
  nccl.step(nullptr, 0, true, 1, 1, 2);
  nccl.kernel_channel(nullptr, 0, 1, 1, 2, 2);
  // A null or foreign (PXN) parent, a peer out of range, an unknown event type.
  void* coll = nccl.collective("AllReduce", 1, "ncclInt32", 1);
  abi::v5::Descr op{};
  op.type = abi::kProxyOp;
  op.parentObj = coll;
  op.proxyOp.pid = getpid() + 1;
  op.proxyOp.peer = 1;
  EXPECT_EQ(nccl.start(op), nullptr);
  op.proxyOp.pid = getpid();
  op.proxyOp.peer = 7;
  EXPECT_EQ(nccl.start(op), nullptr);
  abi::v5::Descr other{};
  other.type = abi::kProxyCtrl;
  EXPECT_EQ(nccl.start(other), nullptr);
  other.type = abi::kNetPlugin;
  EXPECT_EQ(nccl.start(other), nullptr);
  // A step state with NULL args still counts as the state.
  void* send = nccl.proxy_op(coll, 0, 1, false, 1);
  abi::v5::Descr s{};
  s.type = abi::kProxyStep;
  s.parentObj = send;
  void* step = nccl.start(s);
  Nccl<>::state(step, abi::kProxyStepRecvFlushWait, nullptr);
  Nccl<>::stop(step);
  Nccl<>::stop(send);
  nccl.kernel_channel(coll, 0, 1, kGpu, 2, kGpu);
  // Events of a finalized communicator and of one never configured are declined.
  np::close_comm(comm);
  EXPECT_EQ(nccl.collective("AllReduce", 1, "ncclInt32", 1), nullptr);
  Nccl<> silent{np::new_comm(5)};
  EXPECT_EQ(silent.collective("AllReduce", 1, "ncclInt32", 1), nullptr);
  // Stale handles of every kind: generation mismatch, never a crash.
  for (std::uint64_t bits : {0x1ull, 0x2ull, 0x3ull, 0x4ull, 0x5ull, 0x7ull, ~0ull}) {
    np::stop_event(reinterpret_cast<void*>(bits | (12345ull << 21)));
    abi::v5::StateArgs a{};
    np::record_event_state<5>(reinterpret_cast<void*>(bits), abi::kKernelChStop, &a);
  }
}

TEST_F(NcclProfilerEvents, TwoRanksNumberTheirMessagesAlike) {
  // Two ranks of one communicator in one process: rank 0 sends to 1 twice (point-to-point),
  // and both take part in an AllReduce; each send record must meet its receive's key.
  commtap::world::CommState s0, s1;
  np::Comm* r0 = np::new_comm(5);
  np::Comm* r1 = np::new_comm(5);
  np::configure(r0, full_setup(46, 0, 2, &s0));
  np::configure(r1, full_setup(46, 1, 2, &s1));
  Nccl<> n0{r0}, n1{r1};
  for (int i = 0; i < 2; ++i) {
    abi::v5::Descr p{};
    p.type = abi::kP2p;
    p.p2p.func = "Send";
    p.p2p.peer = 1;
    p.p2p.count = 100;
    p.p2p.datatype = "ncclFloat32";
    void* send = n0.start(p);
    p.p2p.func = "Recv";
    p.p2p.peer = 0;
    void* recv = n1.start(p);
    ASSERT_NE(send, nullptr);
    ASSERT_NE(recv, nullptr);
    for (int channel = 0; channel < 2; ++channel) {
      void* so = n0.proxy_op(send, channel, 1, true, 1);
      void* ro = n1.proxy_op(recv, channel, 0, false, 1);
      n0.step(so, 0, true, 200, 100, 200);
      n1.step(ro, 0, false, 200, 110, 220);
      Nccl<>::stop(so);
      Nccl<>::stop(ro);
    }
    Nccl<>::stop(send);
    Nccl<>::stop(recv);
  }
  void* c0 = n0.collective("AllReduce", 8, "ncclFloat64", 1);
  void* c1 = n1.collective("AllReduce", 8, "ncclFloat64", 1);
  void* o0 = n0.proxy_op(c0, 0, 1, true, 1);
  void* o1 = n1.proxy_op(c1, 0, 0, false, 1);
  n0.step(o0, 0, true, 64, 100, 200);
  n1.step(o1, 0, false, 64, 100, 200);
  Nccl<>::stop(o0);
  Nccl<>::stop(o1);

  const auto sends = records(RecordKind::send);
  const auto recvs = records(RecordKind::recv);
  ASSERT_EQ(sends.size(), 5u);
  ASSERT_EQ(recvs.size(), 5u);
  for (std::size_t i = 0; i < sends.size(); ++i) {
    EXPECT_EQ(sends[i].comm_id, recvs[i].comm_id);
    EXPECT_EQ(sends[i].tag, recvs[i].tag);
    EXPECT_EQ(sends[i].seq, recvs[i].seq);
    EXPECT_EQ(sends[i].root, 1);  // sender's peer
    EXPECT_EQ(recvs[i].root, 0);  // receiver's peer
  }
  EXPECT_EQ(sends[0].tag, 256);  // point-to-point, channel 0
  EXPECT_EQ(sends[1].tag, 257);
  EXPECT_EQ(sends[0].seq, 1u);
  EXPECT_EQ(sends[2].seq, 2u);
  EXPECT_EQ(sends[0].function, fn(Fn::ncclSend));
  EXPECT_EQ(recvs[0].function, fn(Fn::ncclRecv));
  EXPECT_EQ(sends[4].tag, 0);  // the AllReduce's channel 0
  EXPECT_EQ(sends[4].seq, 1u);
  EXPECT_EQ(sends[4].function, fn(Fn::ncclAllReduce));
}

TEST_F(NcclProfilerEvents, WithoutTransfersNoPeerIsNamed) {
  commtap::world::CommState state;
  np::Comm* comm = np::new_comm(5);
  np::CommSetup setup = full_setup(47, 3, 4, &state);
  setup.record_transfers = false;  // its ranks are not world ranks
  np::configure(comm, setup);
  Nccl<> nccl{comm};
  void* coll = nccl.collective("AllGather", 64, "ncclInt8", 1);
  EXPECT_EQ(nccl.proxy_op(coll, 0, 0, true, 1), nullptr);
  abi::v5::Descr p{};
  p.type = abi::kP2p;
  p.p2p.func = "Send";
  p.p2p.peer = 0;
  EXPECT_EQ(nccl.start(p), nullptr);
  nccl.kernel_channel(coll, 0, 2000, kGpu, 3000, kGpu + 10);
  EXPECT_EQ(records(RecordKind::collective).size(), 1u);
  EXPECT_EQ(records(RecordKind::send).size(), 0u);
}

TEST_F(NcclProfilerEvents, StatePublishedAfterInitIsKept) {
  // Under the constructor's wrapper the state arrives after init (the wrapper registers the
  // communicator when NCCL's init returned).
  np::Comm* comm = np::new_comm(5);
  np::configure(comm, full_setup(48, 0, 1, nullptr));
  commtap::world::CommState state;
  np::progress_state(comm)->store(&state);
  Nccl<> nccl{comm};
  void* coll = nccl.collective("AllReduce", 1, "ncclFloat16", 1);
  EXPECT_EQ(state.started.load(), 1u);
  nccl.kernel_channel(coll, 0, 2000, kGpu, 3000, kGpu + 10);
  EXPECT_EQ(state.completed.load(), 1u);
  EXPECT_EQ(records(RecordKind::collective).at(0).bytes, 2u);
}

TEST_F(NcclProfilerEvents, VersionOneCompletesAtEnqueueWithUnknownExit) {
  // 2.23: numeric codes, no KernelCh: the instance is known enqueued, never completed; the
  // proxy op reports its running byte count.
  np::Comm* comm = np::new_comm(1);
  np::CommSetup setup = full_setup(49, 0, 2, nullptr);
  setup.owns_progress = false;
  setup.kernel_channels = false;
  np::configure(comm, setup);
  Nccl<1> nccl{comm};
  abi::v1::Descr c{};
  c.type = abi::kColl;
  c.coll.commHash = 7;
  c.coll.func = abi::v1::kFuncAllReduce;
  c.coll.count = 3;
  c.coll.datatype = 8;  // ncclFloat64
  c.coll.nMaxChannels = 2;
  void* coll = nccl.start(c);
  ASSERT_NE(coll, nullptr);
  g_now = 1500;
  Nccl<1>::stop(coll);
  void* op = nccl.proxy_op(coll, 1, 1, true, 1);
  ASSERT_NE(op, nullptr);
  abi::v1::StateArgs a{};
  a.proxyOp.transSize = 24;
  Nccl<1>::state(op, abi::kProxyOpSendTransmitted, &a);
  nccl.step(op, 0, true, 0, 2000, 2100);
  Nccl<1>::stop(op);
  const auto colls = records(RecordKind::collective);
  ASSERT_EQ(colls.size(), 1u);
  EXPECT_EQ(colls[0].bytes, 24u);
  EXPECT_EQ(colls[0].exit_ns, 0u);
  const auto sends = records(RecordKind::send);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].bytes, 24u);
  EXPECT_EQ(sends[0].tag, 1);
}

np::Comm* g_lazy_comm = nullptr;
std::uint64_t g_lazy_hash = 0;
void configure_lazily(np::Comm* comm, int version, std::uint64_t hash, int rank) noexcept {
  EXPECT_EQ(version, 3);
  g_lazy_comm = comm;
  g_lazy_hash = hash;
  np::CommSetup setup = full_setup(static_cast<std::int64_t>(hash), rank, 4, nullptr);
  setup.record_transfers = false;
  np::configure(comm, setup);
}

TEST_F(NcclProfilerEvents, VersionThreeStartsAtTheFirstEventThatNamesTheCommunicator) {
  np::set_sink({commtap::nccl::test::fake_now, commtap::nccl::test::keep, configure_lazily,
                commtap::interpose::kNcclFunctionBase});
  np::Comm* comm = np::new_comm(3);
  Nccl<3> nccl{comm};
  abi::v3::Descr c{};
  c.type = abi::kColl;
  c.rank = 2;
  c.coll.commHash = 0xabc;
  c.coll.func = "AllReduce";
  c.coll.count = 1;
  c.coll.datatype = "ncclInt64";
  c.coll.nMaxChannels = 1;
  void* coll = nccl.start(c);
  ASSERT_NE(coll, nullptr);
  EXPECT_EQ(g_lazy_comm, comm);
  EXPECT_EQ(g_lazy_hash, 0xabcu);
  Nccl<3>::stop(coll);
  nccl.kernel_channel(coll, 0, 2000, 0, 3000, 0);  // v3: host times only
  const auto colls = records(RecordKind::collective);
  ASSERT_EQ(colls.size(), 1u);
  EXPECT_EQ(colls[0].comm_id, 0xabc);
  EXPECT_EQ(colls[0].exit_ns, 3000u);
  // A communicator whose events carry no hash stays silent.
  Nccl<3> nameless{np::new_comm(3)};
  c.coll.commHash = 0;
  EXPECT_EQ(nameless.start(c), nullptr);
  EXPECT_EQ(nameless.start(c), nullptr);
}

TEST_F(NcclProfilerEvents, ConcurrentThreadsKeepExactCounts) {
  // Per communicator, NCCL's launch thread starts and stops Coll events while its proxy thread
  // reports the kernels; two communicators run at once and share the pools.
  constexpr int kCollectives = 20000;
  // A collective the pools dropped (start_coll gave no handle) is counted, for the main thread
  // to check, and handed to the proxy thread as this marker, which it skips: a failed assertion
  // in the launch thread would leave the proxy thread waiting for it.
  static char dropped_marker;
  std::atomic<int> dropped{0};
  auto run = [&dropped](std::int64_t id, commtap::world::CommState* state) {
    np::Comm* comm = np::new_comm(5);
    np::configure(comm, full_setup(id, 0, 2, state, 16));
    std::vector<std::atomic<void*>> handles(kCollectives);
    std::atomic<int> consumed{0};
    std::thread proxy([&] {
      Nccl<> nccl{comm};
      for (int i = 0; i < kCollectives; ++i) {
        void* h = nullptr;
        while ((h = handles[static_cast<std::size_t>(i)].load(std::memory_order_acquire)) ==
               nullptr)
          std::this_thread::yield();
        if (h == &dropped_marker) {
          consumed.store(i + 1, std::memory_order_release);
          continue;
        }
        void* op = nccl.proxy_op(h, 0, 1, true, 1);
        nccl.step(op, 0, true, 8, 10, 20);
        nccl.kernel_channel(h, 0, 30, kGpu, 40, kGpu + 5);
        nccl.kernel_channel(h, 1, 30, kGpu, 40, kGpu + 5);
        Nccl<>::stop(op);
        consumed.store(i + 1, std::memory_order_release);
      }
    });
    Nccl<> nccl{comm};
    for (int i = 0; i < kCollectives; ++i) {
      // At most 1000 in flight per communicator (NCCL's queues bound them too).
      while (i - consumed.load(std::memory_order_acquire) > 1000) std::this_thread::yield();
      void* h = nccl.collective("AllReduce", 1, "ncclFloat32", 2);
      if (h == nullptr) {
        dropped.fetch_add(1, std::memory_order_relaxed);
        h = &dropped_marker;
      }
      handles[static_cast<std::size_t>(i)].store(h, std::memory_order_release);
    }
    proxy.join();
  };
  commtap::world::CommState a, b;
  std::thread ta(run, 50, &a), tb(run, 51, &b);
  ta.join();
  tb.join();
  EXPECT_EQ(dropped.load(), 0) << "collectives the pools dropped";
  EXPECT_EQ(a.started.load(), static_cast<std::uint64_t>(kCollectives));
  EXPECT_EQ(b.completed.load(), static_cast<std::uint64_t>(kCollectives));
  EXPECT_EQ(a.completed.load(), static_cast<std::uint64_t>(kCollectives));
  std::size_t sampled = 0;  // one in 16 of each communicator's, by (id, seq)
  for (std::uint64_t seq = 1; seq <= kCollectives; ++seq)
    sampled +=
        commtap::monitor::is_sampled(50, seq, 16) + commtap::monitor::is_sampled(51, seq, 16);
  EXPECT_NEAR(static_cast<double>(sampled), 2.0 * kCollectives / 16, 0.1 * 2 * kCollectives / 16);
  EXPECT_EQ(records(RecordKind::collective).size(), sampled);
  EXPECT_EQ(records(RecordKind::send).size(), sampled);
  EXPECT_EQ(np::dropped().collectives, 0u);
  EXPECT_EQ(np::dropped().proxy_ops, 0u);
}

TEST_F(NcclProfilerEvents, NamesAndSizes) {
  EXPECT_EQ(np::function_of("AllReduce"), fn(Fn::ncclAllReduce));
  EXPECT_EQ(np::function_of("AllGather"), fn(Fn::ncclAllGather));
  EXPECT_EQ(np::function_of("AlltoAll"), fn(Fn::ncclAlltoAll));
  EXPECT_EQ(np::function_of("Broadcast"), fn(Fn::ncclBroadcast));
  EXPECT_EQ(np::function_of("Reduce"), fn(Fn::ncclReduce));
  EXPECT_EQ(np::function_of("ReduceScatter"), fn(Fn::ncclReduceScatter));
  EXPECT_EQ(np::function_of("Gather"), fn(Fn::ncclGather));
  EXPECT_EQ(np::function_of("Scatter"), fn(Fn::ncclScatter));
  EXPECT_EQ(np::function_of("Send"), fn(Fn::ncclSend));
  EXPECT_EQ(np::function_of("Recv"), fn(Fn::ncclRecv));
  EXPECT_EQ(np::function_of("Nonsense"), commtap::interpose::kFunctionCount);
  EXPECT_EQ(np::function_of(nullptr), commtap::interpose::kFunctionCount);
  EXPECT_EQ(np::datatype_size("ncclInt8"), 1u);
  EXPECT_EQ(np::datatype_size("ncclUint32"), 4u);
  EXPECT_EQ(np::datatype_size("ncclInt64"), 8u);
  EXPECT_EQ(np::datatype_size("ncclFloat16"), 2u);
  EXPECT_EQ(np::datatype_size("ncclBfloat16"), 2u);
  EXPECT_EQ(np::datatype_size("ncclFloat32"), 4u);
  EXPECT_EQ(np::datatype_size("ncclFloat64"), 8u);
  EXPECT_EQ(np::datatype_size("ncclFloat8e4m3"), 1u);
  EXPECT_EQ(np::datatype_size("Unknown"), 1u);
  EXPECT_EQ(np::activation_mask(5), 2 + 4 + 8 + 16 + 64);
  EXPECT_EQ(np::activation_mask(2), 2 + 4 + 8 + 16);
}

// What each event costs on NCCL's hot paths: printed, and bounded loosely (a check that nothing
// on the path locks or allocates, not a benchmark gate).
TEST_F(NcclProfilerEvents, CostPerEvent) {
  np::set_sink({real_now, drop, nullptr, commtap::interpose::kNcclFunctionBase});
  commtap::world::CommState state;
  np::Comm* comm = np::new_comm(5);
  np::configure(comm, full_setup(60, 0, 2, &state, 16));
  Nccl<> nccl{comm};
  constexpr int kRounds = 200000;
  abi::v5::Descr c{};
  c.type = abi::kColl;
  c.coll.func = "AllReduce";
  c.coll.count = 1024;
  c.coll.datatype = "ncclFloat32";
  c.coll.nChannels = 1;
  abi::v5::Descr k{};
  k.type = abi::kKernelCh;
  abi::v5::StateArgs stop_args{};
  stop_args.kernelCh.pTimer = kGpu;
  // Coll start + stop, then its kernel channel start + state + stop (which completes it), in
  // batches: collectives in flight are bounded by the pool, as by NCCL's queues.
  constexpr int kBatch = 1000;
  std::vector<void*> colls(kBatch);
  std::chrono::steady_clock::duration coll_time{}, kernel_time{};
  for (int round = 0; round < kRounds / kBatch; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (void*& h : colls) {
      np::start_event<5>(comm, &h, &c);
      np::stop_event(h);
    }
    auto t1 = std::chrono::steady_clock::now();
    for (void* parent : colls) {
      void* h = nullptr;
      k.parentObj = parent;
      np::start_event<5>(comm, &h, &k);
      np::record_event_state<5>(h, abi::kKernelChStop, &stop_args);
      np::stop_event(h);
    }
    coll_time += t1 - t0;
    kernel_time += std::chrono::steady_clock::now() - t1;
  }
  auto per = [](std::chrono::steady_clock::duration d, int n) {
    return std::chrono::duration<double, std::nano>(d).count() / n;
  };
  const double coll_ns = per(coll_time, kRounds);
  const double kernel_ns = per(kernel_time, kRounds);
  EXPECT_EQ(state.completed.load(), static_cast<std::uint64_t>(kRounds));
  // A sampled op's steps: start, SendGpuWait, SendPeerWait, SendWait, stop.
  void* sampled = nccl.collective("AllReduce", 1, "ncclFloat32", 0);
  for (std::uint64_t seq = kRounds + 1; !commtap::monitor::is_sampled(60, seq, 16); ++seq)
    sampled = nccl.collective("AllReduce", 1, "ncclFloat32", 0);
  void* op = nccl.proxy_op(sampled, 0, 1, true, kRounds);
  ASSERT_NE(op, nullptr);
  abi::v5::Descr s{};
  s.type = abi::kProxyStep;
  s.parentObj = op;
  abi::v5::StateArgs a{};
  a.proxyStep.transSize = 4096;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) {
    void* h = nullptr;
    s.proxyStep.step = i;
    np::start_event<5>(comm, &h, &s);
    np::record_event_state<5>(h, abi::kProxyStepSendGpuWait, &a);
    np::record_event_state<5>(h, abi::kProxyStepSendPeerWait, &a);
    np::record_event_state<5>(h, abi::kProxyStepSendWait, &a);
    np::stop_event(h);
  }
  const double step_ns = per(std::chrono::steady_clock::now() - t0, kRounds);
  np::stop_event(op);
  // An unsampled collective's step: declined at its start (parent NULL).
  s.parentObj = nullptr;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) {
    void* h = nullptr;
    np::start_event<5>(comm, &h, &s);
    np::stop_event(h);
  }
  const double declined_ns = per(std::chrono::steady_clock::now() - t0, kRounds);
  std::printf(
      "ns per Coll start+stop %.1f, per KernelCh start+state+stop %.1f, per sampled ProxyStep "
      "(start, 3 states, stop) %.1f, per declined ProxyStep start+stop %.1f\n",
      coll_ns, kernel_ns, step_ns, declined_ns);
  EXPECT_LT(coll_ns, 5000);
  EXPECT_LT(step_ns, 5000);
}

}  // namespace
