#include <mutex>

#include "monitor/monitor.hpp"

namespace commtap::monitor {

// Slot arrays are never freed while the counters live: a thread that exits hands its array to
// the next new thread, and its counts stay in the array (totals() sums every array). This keeps
// a late call memory-safe: at exit() the main thread's thread_local destructors run before
// atexit handlers and static destructors, which may still call MPI (MPI_Finalize from a global
// object's destructor); such a call keeps counting into the array its thread cached.
struct CallCounters::Registry {
  struct Thread {
    std::unique_ptr<CallStats[]> stats;
    Activity activity;
    std::atomic<RecordRing*> ring{nullptr};  // made by the thread on its first record
  };
  std::size_t functions;
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<Thread>> threads;
  std::vector<Thread*> unused;  // of exited threads, ready for new ones

  explicit Registry(std::size_t n) : functions(n) {}
  ~Registry() {
    for (auto& thread : threads) delete thread->ring.load(std::memory_order_acquire);
  }

  void release(Thread* thread) {
    std::lock_guard lock(mutex);
    thread->activity.function.store(0, std::memory_order_relaxed);
    unused.push_back(thread);
  }
};

namespace {
// Each CallCounters gets its own number, so a thread's cached slots can never be mistaken for
// those of a later object that happens to reuse the same address.
std::atomic<std::uint64_t> next_serial{1};
// Initial-exec TLS (one %fs-relative access instead of a __tls_get_addr call): this code runs in
// a preloaded library, which always gets static TLS.
#define COMMTAP_FAST_TLS __attribute__((tls_model("initial-exec")))
thread_local std::uint64_t cached_serial COMMTAP_FAST_TLS = 0;
thread_local CallStats* cached_slots COMMTAP_FAST_TLS = nullptr;
thread_local Activity* cached_activity COMMTAP_FAST_TLS = nullptr;
thread_local std::atomic<RecordRing*>* cached_ring COMMTAP_FAST_TLS = nullptr;
}  // namespace

CallCounters::CallCounters(std::size_t functions)
    : functions_(functions),
      serial_(next_serial.fetch_add(1, std::memory_order_relaxed)),
      registry_(std::make_shared<Registry>(functions)) {}

CallCounters::~CallCounters() = default;

CallStats* CallCounters::local() {
  if (cached_serial != serial_) attach_thread();
  return cached_slots;
}

Activity* CallCounters::local_activity() {
  if (cached_serial != serial_) attach_thread();
  return cached_activity;
}

void CallCounters::attach_thread() {
  Registry::Thread* thread = nullptr;
  {
    std::lock_guard lock(registry_->mutex);
    if (!registry_->unused.empty()) {
      thread = registry_->unused.back();
      registry_->unused.pop_back();
    } else {
      registry_->threads.push_back(std::make_unique<Registry::Thread>());
      thread = registry_->threads.back().get();
      thread->stats = std::make_unique<CallStats[]>(functions_);
    }
  }
  // Hand the slots on when the thread exits. The registry is held weakly: a thread that
  // outlives the counters (still running at exit) does nothing.
  struct OnThreadExit {
    std::vector<std::pair<std::weak_ptr<Registry>, Registry::Thread*>> attached;
    ~OnThreadExit() {
      for (auto& [weak, t] : attached)
        if (auto registry = weak.lock()) registry->release(t);
    }
  };
  thread_local OnThreadExit on_exit;
  on_exit.attached.emplace_back(registry_, thread);
  cached_serial = serial_;
  cached_slots = thread->stats.get();
  cached_activity = &thread->activity;
  cached_ring = &thread->ring;
}

void CallCounters::record(const InstanceRecord& record) {
  if (cached_serial != serial_) attach_thread();
  RecordRing* ring = cached_ring->load(std::memory_order_relaxed);
  if (ring == nullptr) {
    ring = new RecordRing();  // owned by the registry's thread entry, freed with the counters
    cached_ring->store(ring, std::memory_order_release);
  }
  ring->push(record);
}

std::uint64_t CallCounters::drain(std::vector<InstanceRecord>& out) {
  std::lock_guard lock(registry_->mutex);
  std::uint64_t dropped = 0;
  for (const auto& thread : registry_->threads) {
    RecordRing* ring = thread->ring.load(std::memory_order_acquire);
    if (ring == nullptr) continue;
    ring->drain(out);
    dropped += ring->dropped();
  }
  return dropped;
}

std::vector<ActivitySnapshot> CallCounters::busy() const {
  std::lock_guard lock(registry_->mutex);
  std::vector<ActivitySnapshot> out;
  for (const auto& thread : registry_->threads) {
    const Activity& a = thread->activity;
    const std::uint32_t function = a.function.load(std::memory_order_acquire);
    if (function == 0) continue;
    out.push_back({function, a.comm_handle.load(std::memory_order_relaxed), 0,
                   a.seq.load(std::memory_order_relaxed),
                   a.since_ns.load(std::memory_order_relaxed)});
  }
  return out;
}

std::vector<CallTotals> CallCounters::totals() const {
  std::lock_guard lock(registry_->mutex);
  std::vector<CallTotals> sum(functions_);
  for (const auto& thread : registry_->threads) {
    const CallStats* slots = thread->stats.get();
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
