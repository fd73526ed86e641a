#include <mutex>

#include "monitor/monitor.hpp"

namespace commtap::monitor {

// Slot arrays are never freed while the counters live: a thread that exits hands its array to
// the next new thread, and its counts stay in the array (totals() sums every array). This keeps
// a late call memory-safe: at exit() the main thread's thread_local destructors run before
// atexit handlers and static destructors, which may still call MPI (MPI_Finalize from a global
// object's destructor); such a call keeps counting into the array its thread cached.
struct CallCounters::Registry {
  std::size_t functions;
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<CallStats[]>> arrays;
  std::vector<CallStats*> unused;  // arrays of exited threads, ready for new ones

  explicit Registry(std::size_t n) : functions(n) {}

  void release(CallStats* slots) {
    std::lock_guard lock(mutex);
    unused.push_back(slots);
  }
};

namespace {
// Each CallCounters gets its own number, so a thread's cached slots can never be mistaken for
// those of a later object that happens to reuse the same address.
std::atomic<std::uint64_t> next_serial{1};
thread_local std::uint64_t cached_serial = 0;
thread_local CallStats* cached_slots = nullptr;
}  // namespace

CallCounters::CallCounters(std::size_t functions)
    : functions_(functions),
      serial_(next_serial.fetch_add(1, std::memory_order_relaxed)),
      registry_(std::make_shared<Registry>(functions)) {}

CallCounters::~CallCounters() = default;

CallStats* CallCounters::local() {
  if (cached_serial == serial_) return cached_slots;
  CallStats* slots = attach_thread();
  cached_serial = serial_;
  cached_slots = slots;
  return slots;
}

CallStats* CallCounters::attach_thread() {
  CallStats* raw = nullptr;
  {
    std::lock_guard lock(registry_->mutex);
    if (!registry_->unused.empty()) {
      raw = registry_->unused.back();
      registry_->unused.pop_back();
    } else {
      registry_->arrays.push_back(std::make_unique<CallStats[]>(functions_));
      raw = registry_->arrays.back().get();
    }
  }
  // Hand the array on when the thread exits. The registry is held weakly: a thread that
  // outlives the counters (still running at exit) does nothing.
  struct OnThreadExit {
    std::vector<std::pair<std::weak_ptr<Registry>, CallStats*>> attached;
    ~OnThreadExit() {
      for (auto& [weak, s] : attached)
        if (auto registry = weak.lock()) registry->release(s);
    }
  };
  thread_local OnThreadExit on_exit;
  on_exit.attached.emplace_back(registry_, raw);
  return raw;
}

std::vector<CallTotals> CallCounters::totals() const {
  std::lock_guard lock(registry_->mutex);
  std::vector<CallTotals> sum(functions_);
  for (const auto& slots : registry_->arrays) {
    for (std::size_t i = 0; i < functions_; ++i) {
      sum[i].calls += slots[i].calls.load(std::memory_order_relaxed);
      sum[i].time_ns += slots[i].time_ns.load(std::memory_order_relaxed);
      sum[i].bytes += slots[i].bytes.load(std::memory_order_relaxed);
      sum[i].completions += slots[i].completions.load(std::memory_order_relaxed);
      sum[i].completion_ns += slots[i].completion_ns.load(std::memory_order_relaxed);
    }
  }
  return sum;
}

}  // namespace commtap::monitor
