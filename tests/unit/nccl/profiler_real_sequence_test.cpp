// Network transfers as real NCCL reports them (2.28.9 through v5, 2.30.7 through v6, 2.27 through
// v4): the event sequences below are the ones NCCL's proxy thread raises, taken from its sources
// (docs/nccl.md, "What NCCL raises for a network transfer"):
//   proxy.cc:ncclProxyOpToArgs             ProxyOp start, one per sub, when appended
//   transport/net.cc:sendProxyProgress     InProgress; per step start + SendGPUWait when posted
//                                          (up to 8 ahead), SendPeerWait (repeated while isend
//                                          has no request), SendWait, stop when test() is done
//   transport/net.cc:recvProxyProgress     InProgress; per step start (again on a failed post)
//                                          + RecvWait, RecvFlushWait at arrival, RecvGPUWait,
//                                          stop when the GPU consumed it
//   plugin/profiler.cc                     states only under a live op and step, each with the
//                                          sub's transSize (right only at SendWait and
//                                          RecvFlushWait, stale elsewhere); steps of a declined
//                                          op started with a null parent; op stops for every
//                                          sub once all are done
// Each is replayed through the plugin's entry points of every version those releases use, and
// the transfer rows are checked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/function_table.hpp"
#include "nccl/profiler_events.hpp"
#include "record_sink.hpp"

namespace {

namespace abi = commtap::nccl::profiler_abi;
namespace np = commtap::nccl::profiler;
using commtap::interpose::Fn;
using commtap::monitor::InstanceRecord;
using commtap::monitor::RecordKind;

using commtap::nccl::test::function_number;
using commtap::nccl::test::g_now;
using commtap::nccl::test::records;
const InstanceRecord* row_with_peer(const std::vector<InstanceRecord>& all, int peer) {
  for (const InstanceRecord& r : all)
    if (r.root == peer) return &r;
  return nullptr;
}

np::Comm* recording_comm(int version, int rank, int nranks) {
  np::Comm* comm = np::new_comm(version);
  np::CommSetup s;
  s.id = 77;
  s.rank = rank;
  s.nranks = nranks;
  s.owns_progress = false;
  s.record_instances = true;
  s.record_transfers = true;
  s.kernel_channels = true;
  s.sample = 1;
  s.pid = static_cast<int>(getpid());
  np::configure(comm, s);
  return comm;
}

// NCCL's side, keeping handles where NCCL keeps them: per sub the op handle, per step slot
// (step % NCCL_STEPS) the step handle, overwritten by a repeated start as NCCL's pHandles are.
template <int V>
struct Proxy {
  using Descr = typename abi::Version<V>::Descr;
  using Args = typename abi::Version<V>::StateArgs;
  np::Comm* comm;
  struct Sub {
    void* op = nullptr;
    void* steps[8] = {};
    std::size_t trans_size = 0;  // NCCL's sub->transSize
  };
  std::map<std::string, Sub> subs;

  void* start(Descr d) {
    void* handle = reinterpret_cast<void*>(0xbad);
    np::start_event<V>(comm, &handle, &d);
    return handle;
  }

  // Application thread: the Coll event (started and stopped at the plan's launch).
  void* coll(const char* func, std::size_t count, int channels) {
    Descr d{};
    d.type = abi::kColl;
    d.coll.func = func;
    d.coll.count = count;
    d.coll.datatype = "ncclFloat32";
    d.coll.nChannels = static_cast<std::uint8_t>(channels);
    d.coll.algo = "RING";
    d.coll.proto = "SIMPLE";
    void* h = start(d);
    np::stop_event(h);
    return h;
  }
  void* p2p(const char* func, int peer) {
    Descr d{};
    d.type = abi::kP2p;
    d.p2p.func = func;
    d.p2p.count = 1 << 20;
    d.p2p.datatype = "ncclInt8";
    d.p2p.peer = peer;
    void* h = start(d);
    np::stop_event(h);
    return h;
  }

  // ncclProfilerStartProxyOpEvent; `stale` is what the pooled sub's transSize still holds.
  void op_start(const std::string& name, void* parent, int channel, int peer, bool send, int nsteps,
                std::size_t stale, int pid = getpid()) {
    Descr d{};
    d.type = abi::kProxyOp;
    d.parentObj = parent;
    d.proxyOp.pid = pid;
    d.proxyOp.channelId = static_cast<std::uint8_t>(channel);
    d.proxyOp.peer = peer;
    d.proxyOp.nSteps = nsteps;
    d.proxyOp.chunkSize = 1024;
    d.proxyOp.isSend = send ? 1 : 0;
    Sub& s = subs[name];
    s.op = start(d);
    s.trans_size = stale;
  }
  // ncclProfilerRecordProxyOpEventState(InProgress): 2.30's v5 adapter hands over an
  // uninitialized copy of the args for this state, so they are garbage here.
  void in_progress(const std::string& name) {
    Sub& s = subs[name];
    if (s.op == nullptr) return;
    Args garbage;
    std::memset(static_cast<void*>(&garbage), 0xa5, sizeof garbage);
    np::record_event_state<V>(s.op, abi::kProxyOpInProgress, &garbage);
  }
  // ncclProfilerStart{Send,Recv}ProxyStepEvent: started whatever the op handle (its parent).
  void step_start(const std::string& name, int step) {
    Sub& s = subs[name];
    Descr d{};
    d.type = abi::kProxyStep;
    d.parentObj = s.op;
    d.proxyStep.step = step;
    s.steps[step % 8] = start(d);
    if (s.op == nullptr) {
      EXPECT_EQ(s.steps[step % 8], nullptr) << "a declined op's step";
    }
  }
  // ncclProfilerRecordProxyStepEventState: under a live op and step, with the sub's transSize.
  void state(const std::string& name, int step, abi::EventState st) {
    Sub& s = subs[name];
    if (s.op == nullptr || s.steps[step % 8] == nullptr) return;
    Args a{};
    if constexpr (V >= 4) a.proxyStep.transSize = s.trans_size;
    np::record_event_state<V>(s.steps[step % 8], st, &a);
  }
  // The net transport sets sub->transSize just before SendWait / RecvFlushWait.
  void sized_state(const std::string& name, int step, abi::EventState st, std::size_t bytes) {
    subs[name].trans_size = bytes;
    state(name, step, st);
  }
  void step_stop(const std::string& name, int step) {
    Sub& s = subs[name];
    if (s.steps[step % 8] == nullptr) return;
    np::stop_event(s.steps[step % 8]);
    s.steps[step % 8] = nullptr;
  }
  void op_stop(const std::string& name) {
    Sub& s = subs[name];
    if (s.op != nullptr) np::stop_event(s.op);
    s.op = nullptr;
  }
  void kernel(void* coll, int channel) {
    Descr d{};
    d.type = abi::kKernelCh;
    d.parentObj = coll;
    d.kernelCh.channelId = static_cast<std::uint8_t>(channel);
    void* k = start(d);
    Args a{};
    if (k != nullptr) np::record_event_state<V>(k, abi::kKernelChStop, &a);
    if (k != nullptr) np::stop_event(k);
  }
};

class NcclRealSequence : public ::testing::Test {
 protected:
  void SetUp() override { commtap::nccl::test::start_recording(1000); }
};

// A ring all-reduce's network part on one channel, 2 ranks on two hosts: one send sub to the
// next rank and one receive sub from the previous one, 4 network steps each, the last one
// partial (512 of 1024 bytes). The proxy thread interleaves the two args as its loop does.
template <int V>
void ring_all_reduce() {
  SCOPED_TRACE("v" + std::to_string(V));
  commtap::nccl::test::start_recording(g_now);
  np::Comm* comm = recording_comm(V, 0, 2);
  Proxy<V> nccl{comm, {}};
  g_now = 1000;
  void* coll = nccl.coll("AllReduce", 896, 1);
  ASSERT_NE(coll, nullptr);

  // ProxyAppend: both subs' ProxyOp starts (after the Coll stop), then the progress loop. The
  // pooled subs still hold sizes of earlier operations (777, 999).
  g_now = 1900;
  nccl.op_start("send", coll, 0, 1, true, 4, 777);
  nccl.op_start("recv", coll, 0, 1, false, 4, 999);
  nccl.in_progress("send");
  nccl.in_progress("recv");
  // Posting comes first on every pass: all 4 sends posted to the GPU, all 4 receives posted to
  // the network (step 2's and step 3's first irecv gave no request: started again).
  const std::uint64_t posts[] = {2000, 2010, 2020, 2030};
  for (int k = 0; k < 4; ++k) {
    g_now = posts[k];
    nccl.step_start("send", k);
    nccl.state("send", k, abi::kProxyStepSendGpuWait);
    g_now = posts[k] + 5;
    nccl.step_start("recv", k);
    if (k >= 2) {
      g_now = posts[k] + 30;
      nccl.step_start("recv", k);
    }
    nccl.state("recv", k, abi::kProxyStepRecvWait);
  }
  // Step 0 and 1: the GPU's data is there, isend accepted; the first receives arrive.
  g_now = 2100;
  nccl.state("send", 0, abi::kProxyStepSendPeerWait);
  g_now = 2110;
  nccl.sized_state("send", 0, abi::kProxyStepSendWait, 1024);
  g_now = 2150;
  nccl.sized_state("recv", 0, abi::kProxyStepRecvFlushWait, 1024);
  g_now = 2160;
  nccl.state("recv", 0, abi::kProxyStepRecvGpuWait);
  g_now = 2200;
  nccl.state("send", 1, abi::kProxyStepSendPeerWait);
  nccl.sized_state("send", 1, abi::kProxyStepSendWait, 1024);
  g_now = 2250;
  nccl.step_stop("send", 0);
  nccl.sized_state("recv", 1, abi::kProxyStepRecvFlushWait, 1024);
  g_now = 2270;
  nccl.state("recv", 1, abi::kProxyStepRecvGpuWait);
  g_now = 2280;
  nccl.step_stop("recv", 0);
  g_now = 2300;
  nccl.state("send", 2, abi::kProxyStepSendPeerWait);
  nccl.sized_state("send", 2, abi::kProxyStepSendWait, 1024);
  g_now = 2350;
  nccl.step_stop("send", 1);
  nccl.sized_state("recv", 2, abi::kProxyStepRecvFlushWait, 1024);
  // Step 3: the receiver's buffer is not ready at first: isend gives no request twice.
  g_now = 2400;
  nccl.state("send", 3, abi::kProxyStepSendPeerWait);
  g_now = 2410;
  nccl.state("send", 3, abi::kProxyStepSendPeerWait);
  g_now = 2420;
  nccl.sized_state("send", 3, abi::kProxyStepSendWait, 512);
  g_now = 2450;
  nccl.step_stop("send", 2);
  g_now = 2500;
  nccl.step_stop("send", 3);
  g_now = 2520;
  nccl.sized_state("recv", 3, abi::kProxyStepRecvFlushWait, 512);
  // Step 2 reaches the GPU after step 3 arrived: its state carries step 3's size.
  g_now = 2530;
  nccl.state("recv", 2, abi::kProxyStepRecvGpuWait);
  g_now = 2540;
  nccl.state("recv", 3, abi::kProxyStepRecvGpuWait);
  g_now = 2550;
  nccl.step_stop("recv", 1);
  nccl.step_stop("recv", 2);
  g_now = 2580;
  nccl.step_stop("recv", 3);
  // The kernel's channel is reported before the proxy's args finish: the collective is
  // complete while its ops are still open.
  g_now = 2590;
  nccl.kernel(coll, 0);
  g_now = 2600;
  nccl.op_stop("send");
  nccl.op_stop("recv");

  ASSERT_EQ(records(RecordKind::collective).size(), 1u);
  const auto sends = records(RecordKind::send);
  const auto recvs = records(RecordKind::recv);
  ASSERT_EQ(sends.size(), 1u);
  ASSERT_EQ(recvs.size(), 1u);
  const std::uint32_t all_reduce = function_number(Fn::ncclAllReduce);
  for (const InstanceRecord* r : {&sends[0], &recvs[0]}) {
    EXPECT_EQ(r->comm_id, 77);
    EXPECT_EQ(r->seq, 1u);  // the collective's number
    EXPECT_EQ(r->tag, 0);   // channel 0
    EXPECT_EQ(r->root, 1);  // the peer
    EXPECT_EQ(r->function, all_reduce);
    // The last step's size, from SendWait / RecvFlushWait: not a stale 777/999, not 1024.
    EXPECT_EQ(r->bytes, 512u);
  }
  // Send: the last step from its SendWait (after the peer waits) to its completion.
  EXPECT_EQ(sends[0].enter_ns, 2420u);
  EXPECT_EQ(sends[0].exit_ns, 2500u);
  // Receive: the last step from its (last) post to its arrival, not to the GPU's consumption.
  EXPECT_EQ(recvs[0].enter_ns, 2060u);
  EXPECT_EQ(recvs[0].exit_ns, 2520u);
  np::close_comm(comm);
}

TEST_F(NcclRealSequence, RingAllReduceSendAndReceiveEveryVersion) {
  ring_all_reduce<4>();  // 2.27
  ring_all_reduce<5>();  // 2.28 (native), 2.29-2.30 (adapter)
  ring_all_reduce<6>();  // 2.29-2.30 (native)
}

// Point-to-point with shared buffers: two sends to two peers appended to one ncclProxyArgs as
// two subs (window 16 / 2 = 8 steps each), one finishing long before the other; both ops stop
// only when both are done. A third op run for another process (PXN) is declined: NCCL still
// starts its steps, with a null parent, and records nothing under them. A single-step receive
// (first step also the last) completes the picture.
template <int V>
void shared_point_to_point() {
  SCOPED_TRACE("v" + std::to_string(V));
  commtap::nccl::test::start_recording(g_now);
  np::Comm* comm = recording_comm(V, 0, 3);
  Proxy<V> nccl{comm, {}};
  g_now = 1000;
  void* to1 = nccl.p2p("Send", 1);
  void* to2 = nccl.p2p("Send", 2);
  void* from2 = nccl.p2p("Recv", 2);
  ASSERT_NE(to1, nullptr);
  ASSERT_NE(to2, nullptr);
  ASSERT_NE(from2, nullptr);

  g_now = 1100;
  nccl.op_start("a", to1, 1, 1, true, 2, 0);
  nccl.op_start("b", to2, 1, 2, true, 2, 64);
  nccl.op_start("pxn", to1, 1, 1, true, 2, 0, getpid() + 1);
  nccl.op_start("r", from2, 1, 2, false, 1, 4096);
  EXPECT_EQ(nccl.subs["pxn"].op, nullptr);
  nccl.in_progress("a");
  nccl.in_progress("b");
  nccl.in_progress("pxn");
  nccl.in_progress("r");
  g_now = 1200;
  for (const char* sub : {"a", "b", "pxn"}) {
    nccl.step_start(sub, 0);
    nccl.state(sub, 0, abi::kProxyStepSendGpuWait);
  }
  nccl.step_start("r", 0);
  nccl.state("r", 0, abi::kProxyStepRecvWait);
  g_now = 1210;
  for (const char* sub : {"a", "b", "pxn"}) {
    nccl.step_start(sub, 1);
    nccl.state(sub, 1, abi::kProxyStepSendGpuWait);
  }
  g_now = 1300;
  nccl.state("a", 0, abi::kProxyStepSendPeerWait);
  nccl.sized_state("a", 0, abi::kProxyStepSendWait, 1024);
  g_now = 1310;
  nccl.state("a", 1, abi::kProxyStepSendPeerWait);
  nccl.sized_state("a", 1, abi::kProxyStepSendWait, 100);
  g_now = 1350;
  nccl.step_stop("a", 0);
  g_now = 1360;
  nccl.step_stop("a", 1);  // sub a is done; its op stays open
  g_now = 1400;
  nccl.sized_state("r", 0, abi::kProxyStepRecvFlushWait, 300);
  g_now = 1410;
  nccl.state("r", 0, abi::kProxyStepRecvGpuWait);
  g_now = 1450;
  nccl.step_stop("r", 0);
  nccl.op_stop("r");
  g_now = 5000;  // the second peer is slow
  nccl.state("b", 0, abi::kProxyStepSendPeerWait);
  nccl.sized_state("b", 0, abi::kProxyStepSendWait, 1024);
  nccl.state("pxn", 0, abi::kProxyStepSendPeerWait);
  g_now = 5100;
  nccl.state("b", 1, abi::kProxyStepSendPeerWait);
  nccl.sized_state("b", 1, abi::kProxyStepSendWait, 200);
  g_now = 5150;
  nccl.step_stop("b", 0);
  g_now = 5200;
  nccl.step_stop("b", 1);
  nccl.step_stop("pxn", 0);
  nccl.step_stop("pxn", 1);
  g_now = 5300;
  nccl.op_stop("a");
  nccl.op_stop("b");
  nccl.op_stop("pxn");

  const auto sends = records(RecordKind::send);
  const auto recvs = records(RecordKind::recv);
  ASSERT_EQ(sends.size(), 2u);  // not the PXN op's
  ASSERT_EQ(recvs.size(), 1u);
  const InstanceRecord* a = row_with_peer(sends, 1);
  const InstanceRecord* b = row_with_peer(sends, 2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const std::uint32_t send_fn = function_number(Fn::ncclSend);
  for (const InstanceRecord* r : {a, b}) {
    EXPECT_EQ(r->seq, 1u);   // the first message to that peer
    EXPECT_EQ(r->tag, 257);  // point-to-point, channel 1
    EXPECT_EQ(r->function, send_fn);
  }
  EXPECT_EQ(a->bytes, 100u);
  EXPECT_EQ(a->enter_ns, 1310u);
  EXPECT_EQ(a->exit_ns, 1360u);  // its last step's completion, not the shared op stop
  EXPECT_EQ(b->bytes, 200u);
  EXPECT_EQ(b->enter_ns, 5100u);
  EXPECT_EQ(b->exit_ns, 5200u);
  EXPECT_EQ(recvs[0].root, 2);
  EXPECT_EQ(recvs[0].tag, 257);
  EXPECT_EQ(recvs[0].function, function_number(Fn::ncclRecv));
  EXPECT_EQ(recvs[0].bytes, 300u);  // not the stale 4096
  EXPECT_EQ(recvs[0].enter_ns, 1200u);
  EXPECT_EQ(recvs[0].exit_ns, 1400u);
  np::close_comm(comm);
}

TEST_F(NcclRealSequence, SharedPointToPointSubsAndDeclinedOpsEveryVersion) {
  shared_point_to_point<4>();
  shared_point_to_point<5>();
  shared_point_to_point<6>();
}

}  // namespace
