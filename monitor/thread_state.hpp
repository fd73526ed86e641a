// monitor/thread_state: everything the hot path keeps per thread, in one thread-local block.
//
// Why one block: libcommtap.so reaches its thread-locals through TLS descriptors
// (-mtls-dialect=gnu2, CMakeLists.txt), not initial-exec TLS, so that it can still be dlopen'ed
// (NCCL loads it as its profiler plugin). Where it is preloaded a descriptor resolves to a
// constant offset, but each access is still an indirect call (~2 ns), once per variable and per
// function. So an intercepted call fetches this block once (interpose/call_scope.hpp) and hands
// it, or the part of it each one needs, to the counters, the call-site cache and the
// communicator cache; they touch no thread-local of their own on the hot path.
#pragma once

#include <array>
#include <cstdint>

#include "monitor/call_counters.hpp"
#include "monitor/call_sites.hpp"

namespace commtap::monitor {

// A few (handle -> pointer) pairs of one thread, for world::CommunicatorRegistry's lookups: the
// handle's bits as key. Valid while `owner` and `generation` match the registry's.
struct HandleCache {
  static constexpr unsigned kEntries = 4;
  const void* owner = nullptr;
  std::uint64_t generation = 0;
  std::array<std::uint64_t, kEntries> keys{};
  std::array<void*, kEntries> values{};
  unsigned next = 0;
};

struct ThreadState {
  // Nesting depth of intercepted calls (interpose/call_scope.hpp): a call made while another
  // one of this thread is in progress passes straight through.
  int depth = 0;
  CallCounters::ThreadCache counters;
  CallSites::ThreadCache sites;
  HandleCache communicators;
};

// Constant-initialized, trivially destructible: no TLS wrapper or guard, the access is the
// descriptor call alone. Defined in call_counters.cpp.
extern thread_local constinit ThreadState t_thread_state;

// This thread's block: one TLS descriptor call. Fetch it once per call and pass it on.
[[gnu::always_inline]] inline ThreadState& this_thread() noexcept {
  ThreadState* self = &t_thread_state;
  // GCC takes a TLS address for a constant it may recompute at each use rather than keep in a
  // register, which repeats the descriptor call; an opaque value it must keep.
  asm("" : "+r"(self));
  return *self;
}

}  // namespace commtap::monitor
