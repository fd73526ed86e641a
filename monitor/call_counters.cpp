#include <mutex>

#include "monitor/monitor.hpp"

namespace commtap::monitor {

struct CallCounters::Registry {
  std::size_t functions;
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<CallStats[]>> live;
  std::vector<CallTotals> retired;

  explicit Registry(std::size_t n) : functions(n), retired(n) {}

  static void add(std::vector<CallTotals>& sum, const CallStats* slots, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      sum[i].calls += slots[i].calls.load(std::memory_order_relaxed);
      sum[i].time_ns += slots[i].time_ns.load(std::memory_order_relaxed);
      sum[i].bytes += slots[i].bytes.load(std::memory_order_relaxed);
      sum[i].completions += slots[i].completions.load(std::memory_order_relaxed);
      sum[i].completion_ns += slots[i].completion_ns.load(std::memory_order_relaxed);
    }
  }

  void retire(CallStats* slots) {
    std::lock_guard lock(mutex);
    add(retired, slots, functions);
    std::erase_if(live, [slots](const auto& p) { return p.get() == slots; });
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
  auto slots = std::make_unique<CallStats[]>(functions_);
  CallStats* raw = slots.get();
  {
    std::lock_guard lock(registry_->mutex);
    registry_->live.push_back(std::move(slots));
  }
  // Fold this thread's slots into the retired totals when the thread exits. The registry is
  // held weakly: a thread that outlives the counters (still running at exit) does nothing.
  struct OnThreadExit {
    std::vector<std::pair<std::weak_ptr<Registry>, CallStats*>> attached;
    ~OnThreadExit() {
      for (auto& [weak, s] : attached)
        if (auto registry = weak.lock()) registry->retire(s);
    }
  };
  thread_local OnThreadExit on_exit;
  on_exit.attached.emplace_back(registry_, raw);
  return raw;
}

std::vector<CallTotals> CallCounters::totals() const {
  std::lock_guard lock(registry_->mutex);
  std::vector<CallTotals> sum = registry_->retired;
  for (const auto& slots : registry_->live) Registry::add(sum, slots.get(), functions_);
  return sum;
}

}  // namespace commtap::monitor
