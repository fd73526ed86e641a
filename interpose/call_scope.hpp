// What every recorded call does around the library's, MPI and NCCL alike: the guard (commtap
// active, not nested in another recorded call of this thread), the two clock reads, the
// heartbeat's "inside which call since when" and the per-function counters. Everything else a
// call records belongs to the hooks of its topic (requests, communicators, collectives, ...).
#pragma once

#include <cstdint>

#include "interpose/function_table.hpp"
#include "interpose/runtime.hpp"
#include "monitor/monitor.hpp"

namespace commtap::interpose {

class CallScope {
 public:
  // Whether a call made now is recorded. Acquire pairs with the release in start_after_mpi_init:
  // seeing "active" means seeing the counters it published (a plain load on x86).
  [[gnu::always_inline]] static bool recording() {
    return runtime().active.load(std::memory_order_acquire) && t_depth == 0;
  }

  [[gnu::always_inline]] explicit CallScope(Fn fn) : fn_(fn), stats_(runtime().counters->local()) {
    ++t_depth;
  }
  ~CallScope() { --t_depth; }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // Just before the library's call: the first clock read, and the heartbeat's activity (a few
  // relaxed stores; `comm_handle` is resolved off the hot path).
  [[gnu::always_inline]] void enter(std::int64_t comm_handle, std::uint64_t seq) {
    t0_ = monitor::now_ns();
    activity_ = runtime().counters->local_activity();
    activity_->seq.store(seq, std::memory_order_relaxed);
    activity_->comm_handle.store(comm_handle, std::memory_order_relaxed);
    activity_->since_ns.store(t0_, std::memory_order_relaxed);
    activity_->function.store(static_cast<std::uint32_t>(index_of(fn_)) + 1,
                              std::memory_order_release);
  }
  // Just after it.
  [[gnu::always_inline]] void leave() {
    t1_ = monitor::now_ns();
    activity_->function.store(0, std::memory_order_relaxed);
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

 private:
  Fn fn_;
  monitor::CallStats* stats_;
  monitor::Activity* activity_ = nullptr;
  std::uint64_t t0_ = 0, t1_ = 0;
};

}  // namespace commtap::interpose
