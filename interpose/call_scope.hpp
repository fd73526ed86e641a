// What every recorded call does around the library's, MPI and NCCL alike: the guard (commtap
// active, not nested in another recorded call of this thread), the two clock reads, the
// heartbeat's "inside which call since when" and the per-function counters. Everything else a
// call records belongs to the hooks of its topic (requests, communicators, collectives, ...).
//
// The thread's state (nesting depth, cached counters, call-site and communicator caches) is one
// thread-local block, monitor::ThreadState: a TLS descriptor call per access (so that the library
// stays dlopen'able; see monitor/thread_state.hpp), hence fetched once, by recording_thread(), and
// reached from then on through the scope (thread()).
#pragma once

#include <cstdint>

#include "interpose/function_table.hpp"
#include "interpose/runtime.hpp"
#include "monitor/call_counters.hpp"
#include "monitor/clock.hpp"
#include "monitor/thread_state.hpp"

namespace commtap::interpose {

class CallScope {
 public:
  // This thread's state if a call made now is recorded, else nullptr. Acquire pairs with the
  // release in start_after_mpi_init: seeing "active" means seeing the counters it published (a
  // plain load on x86). Before MPI_Init the thread-local is not even touched.
  [[gnu::always_inline]] static monitor::ThreadState* recording_thread() {
    if (!runtime().active.load(std::memory_order_acquire)) return nullptr;
    monitor::ThreadState& self = monitor::this_thread();
    return self.depth == 0 ? &self : nullptr;
  }
  // Whether a call made now is recorded (for callers that then make a scope without the state).
  [[gnu::always_inline]] static bool recording() { return recording_thread() != nullptr; }

  // `self`: this thread's state, as recording_thread() returned it.
  [[gnu::always_inline]] CallScope(Fn fn, monitor::ThreadState& self)
      : fn_(fn), self_(self), stats_(runtime().counters->local(self.counters)) {
    ++self_.depth;
  }
  [[gnu::always_inline]] explicit CallScope(Fn fn) : CallScope(fn, monitor::this_thread()) {}
  ~CallScope() { --self_.depth; }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // Just before the library's call: the first clock read, and the heartbeat's activity (a few
  // relaxed stores; `comm_handle` is resolved off the hot path). The constructor attached the
  // thread, so its activity record is cached.
  [[gnu::always_inline]] void enter(std::int64_t comm_handle, std::uint64_t seq,
                                    int peer = monitor::Activity::kNoPeer) {
    t0_ = monitor::now_ns();
    monitor::Activity* const activity = self_.counters.activity;
    activity->seq.store(seq, std::memory_order_relaxed);
    activity->peer.store(peer, std::memory_order_relaxed);
    activity->comm_handle.store(comm_handle, std::memory_order_relaxed);
    activity->since_ns.store(t0_, std::memory_order_relaxed);
    activity->function.store(static_cast<std::uint32_t>(index_of(fn_)) + 1,
                             std::memory_order_release);
  }
  // Just after it.
  [[gnu::always_inline]] void leave() {
    t1_ = monitor::now_ns();
    self_.counters.activity->function.store(0, std::memory_order_relaxed);
  }
  // The call's own counters: one call, its time, its payload.
  [[gnu::always_inline]] void count(std::uint64_t bytes) {
    monitor::CallStats& own = stats_[index_of(fn_)];
    monitor::bump(own.calls, 1);
    monitor::bump(own.time_ns, elapsed_ns());
    monitor::bump(own.bytes, bytes);
  }

  std::uint64_t t0() const { return t0_; }
  std::uint64_t t1() const { return t1_; }
  std::uint64_t elapsed_ns() const { return monitor::elapsed_ns(t0_, t1_); }
  // This thread's counters of every function (completions are counted on the starting one).
  monitor::CallStats* stats() const { return stats_; }
  // This thread's state, for the hooks: pass it on rather than touch a thread-local again.
  monitor::ThreadState& thread() const { return self_; }

 private:
  Fn fn_;
  monitor::ThreadState& self_;
  monitor::CallStats* stats_;
  std::uint64_t t0_ = 0, t1_ = 0;
};

}  // namespace commtap::interpose
