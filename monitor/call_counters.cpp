#include <algorithm>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "monitor/call_counters.hpp"
#include "monitor/thread_state.hpp"

namespace commtap::monitor {

// Each thread's block (thread_state.hpp). Trivially destructible: it outlives the thread_local
// destructors at exit, so a late call still finds its cached pointers (see below).
constinit thread_local ThreadState t_thread_state;

// Slot arrays are never freed while the counters live: a thread that exits hands its array to
// the next new thread, and its counts stay in the array (totals() sums every array). This keeps
// a late call memory-safe: at exit() the main thread's thread_local destructors run before
// atexit handlers and static destructors, which may still call MPI (MPI_Finalize from a global
// object's destructor); such a call keeps counting into the array its thread cached.

// One thread's aggregates: open addressing with a short probe, written by its thread only.
// Counts and totals are cumulative (the writer subtracts what it saw last window); the minimum
// and maximum are kept per window, in two slots by window parity, so that the thread can start
// the next window's while the writer still reads the one it closed.
struct AggregateTable {
  static constexpr std::size_t kSlots = 1024;
  static constexpr std::size_t kProbes = 16;
  struct Slot {
    std::atomic<std::uint64_t> hash{0};  // 0: empty; stored last, with release
    AggregateKey key;
    std::atomic<std::uint64_t> calls{0}, total_ns{0};
    std::atomic<std::uint64_t> window[2] = {}, min_ns[2] = {}, max_ns[2] = {};
    // The writer's view at the last window (touched by the writer only).
    std::uint64_t seen_calls = 0, seen_total_ns = 0;
  };
  std::array<Slot, kSlots> slots;
  std::atomic<std::uint64_t> dropped{0};

  static std::uint64_t hash_of(const AggregateKey& k) {
    std::uint64_t h = static_cast<std::uint64_t>(k.comm_id) * 0x9E3779B97F4A7C15ull;
    h ^= (std::uint64_t{k.function} << 32 | k.site) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    h ^= k.bucket * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h | 1;  // never 0, which marks an empty slot
  }

  // The slot of the last key: a loop calling from one site with one size hits it every time.
  // Touched by the owning thread only.
  Slot* last = nullptr;

  void add(const AggregateKey& key, std::uint64_t ns, std::uint64_t window) {
    if (last == nullptr || !(last->key == key)) {
      last = find(key);
      if (last == nullptr) {
        bump(dropped, 1);
        return;
      }
    }
    Slot& slot = *last;
    bump(slot.calls, 1);
    bump(slot.total_ns, ns);
    const std::size_t parity = window & 1;
    if (slot.window[parity].load(std::memory_order_relaxed) != window) {
      slot.min_ns[parity].store(ns, std::memory_order_relaxed);
      slot.max_ns[parity].store(ns, std::memory_order_relaxed);
      slot.window[parity].store(window, std::memory_order_release);
    } else {
      if (ns < slot.min_ns[parity].load(std::memory_order_relaxed))
        slot.min_ns[parity].store(ns, std::memory_order_relaxed);
      if (ns > slot.max_ns[parity].load(std::memory_order_relaxed))
        slot.max_ns[parity].store(ns, std::memory_order_relaxed);
    }
  }

  // The key's slot, claimed if new; nullptr if the probe found no room.
  Slot* find(const AggregateKey& key) {
    const std::uint64_t hash = hash_of(key);
    for (std::size_t probe = 0; probe < kProbes; ++probe) {
      Slot& slot = slots[(hash + probe) % kSlots];
      const std::uint64_t found = slot.hash.load(std::memory_order_relaxed);
      if (found == 0) {
        slot.key = key;
        slot.hash.store(hash, std::memory_order_release);
        return &slot;
      }
      if (found == hash && slot.key == key) return &slot;
    }
    return nullptr;
  }
};

struct CallCounters::Registry {
  struct Thread {
    std::unique_ptr<CallStats[]> stats;
    Activity activity;
    std::atomic<RecordRing*> ring{nullptr};            // made by the thread on its first record
    std::atomic<AggregateTable*> aggregates{nullptr};  // made on its first aggregated call
  };
  std::size_t functions;
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<Thread>> threads;
  std::vector<Thread*> unused;  // of exited threads, ready for new ones

  explicit Registry(std::size_t n) : functions(n) {}
  ~Registry() {
    for (auto& thread : threads) {
      delete thread->ring.load(std::memory_order_acquire);
      delete thread->aggregates.load(std::memory_order_acquire);
    }
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
}  // namespace

CallCounters::CallCounters(std::size_t functions)
    : functions_(functions),
      serial_(next_serial.fetch_add(1, std::memory_order_relaxed)),
      registry_(std::make_shared<Registry>(functions)) {}

CallCounters::~CallCounters() = default;

CallStats* CallCounters::local() {
  return local(this_thread().counters);
}

Activity* CallCounters::local_activity() {
  return local_activity(this_thread().counters);
}

void CallCounters::attach_thread(ThreadCache& cache) {
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
  // outlives the counters (still running at exit) does nothing. Its own thread-local (it has a
  // destructor), touched only here, once per thread and counters.
  struct OnThreadExit {
    std::vector<std::pair<std::weak_ptr<Registry>, Registry::Thread*>> attached;
    ~OnThreadExit() {
      for (auto& [weak, t] : attached)
        if (auto registry = weak.lock()) registry->release(t);
    }
  };
  thread_local OnThreadExit on_exit;
  on_exit.attached.emplace_back(registry_, thread);
  cache.serial = serial_;
  cache.slots = thread->stats.get();
  cache.activity = &thread->activity;
  cache.ring = &thread->ring;
  cache.aggregates = &thread->aggregates;
}

void CallCounters::record(const InstanceRecord& record, ThreadCache& cache) {
  if (cache.serial != serial_) attach_thread(cache);
  RecordRing* ring = cache.ring->load(std::memory_order_relaxed);
  if (ring == nullptr) {
    ring = new RecordRing();  // owned by the registry's thread entry, freed with the counters
    cache.ring->store(ring, std::memory_order_release);
  }
  ring->push(record);
}

void CallCounters::record(const InstanceRecord& record) {
  this->record(record, this_thread().counters);
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

void CallCounters::aggregate(const AggregateKey& key, std::uint64_t ns, ThreadCache& cache) {
  if (cache.serial != serial_) attach_thread(cache);
  AggregateTable* table = cache.aggregates->load(std::memory_order_relaxed);
  if (table == nullptr) {
    table = new AggregateTable();  // owned by the registry's thread entry
    cache.aggregates->store(table, std::memory_order_release);
  }
  table->add(key, ns, window_.load(std::memory_order_relaxed));
}

void CallCounters::aggregate(const AggregateKey& key, std::uint64_t ns) {
  aggregate(key, ns, this_thread().counters);
}

std::uint64_t CallCounters::close_window(std::vector<AggregateRow>& out) {
  const std::uint64_t closing = window_.fetch_add(1, std::memory_order_acq_rel);
  std::lock_guard lock(registry_->mutex);
  std::uint64_t dropped = 0;
  std::unordered_map<std::uint64_t, std::size_t> row_of_key;
  for (const auto& thread : registry_->threads) {
    AggregateTable* table = thread->aggregates.load(std::memory_order_acquire);
    if (table == nullptr) continue;
    dropped += table->dropped.load(std::memory_order_relaxed);
    for (AggregateTable::Slot& slot : table->slots) {
      if (slot.hash.load(std::memory_order_acquire) == 0) continue;
      const std::uint64_t calls = slot.calls.load(std::memory_order_relaxed);
      const std::uint64_t total = slot.total_ns.load(std::memory_order_relaxed);
      if (calls == slot.seen_calls) continue;
      AggregateRow row{slot.key, calls - slot.seen_calls, total - slot.seen_total_ns, 0, 0};
      slot.seen_calls = calls;
      slot.seen_total_ns = total;
      // The closed window's extremes; a call that read the old window number but landed after
      // this read shows up in the next window, with the extremes kept in the other parity.
      std::size_t parity = closing & 1;
      if (slot.window[parity].load(std::memory_order_acquire) != closing) parity ^= 1;
      row.min_ns = slot.min_ns[parity].load(std::memory_order_relaxed);
      row.max_ns = slot.max_ns[parity].load(std::memory_order_relaxed);
      // Threads share keys: merge into the row of an earlier thread.
      auto [position, fresh] =
          row_of_key.try_emplace(slot.hash.load(std::memory_order_relaxed), out.size());
      while (!fresh && !(out[position->second].key == row.key)) {  // a hash collision
        std::tie(position, fresh) = row_of_key.try_emplace(position->first + 1, out.size());
      }
      if (fresh) {
        out.push_back(row);
      } else {
        AggregateRow& same = out[position->second];
        same.calls += row.calls;
        same.total_ns += row.total_ns;
        same.min_ns = std::min(same.min_ns, row.min_ns);
        same.max_ns = std::max(same.max_ns, row.max_ns);
      }
    }
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
