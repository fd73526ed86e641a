#include "interpose/requests.hpp"

#include <algorithm>
#include <iterator>

namespace commtap::interpose {

void RequestTable::Shard::insert(const Entry& entry) {
  if ((used + 1) * 2 > slots.size()) {
    std::size_t live = 0;
    for (const Entry& e : slots) live += (e.sequence != 0 && !e.erased) ? 1 : 0;
    std::size_t capacity = 16;
    while (capacity < (live + 1) * 4) capacity *= 2;
    rebuild(capacity);
  }
  for (std::size_t i = home(entry.request);; i = (i + 1) & (slots.size() - 1)) {
    if (slots[i].sequence == 0) {
      slots[i] = entry;
      ++used;
      return;
    }
  }
}

void RequestTable::Shard::rebuild(std::size_t capacity) {
  spare.assign(capacity, Entry{});
  spare.swap(slots);  // `spare` now holds the old entries
  used = 0;
  for (const Entry& e : spare) {
    if (e.sequence == 0 || e.erased) continue;
    for (std::size_t i = home(e.request);; i = (i + 1) & (slots.size() - 1)) {
      if (slots[i].sequence == 0) {
        slots[i] = e;
        ++used;
        break;
      }
    }
  }
}

void RequestTable::Shard::remove(Entry& entry) {
  entry.erased = true;
  const std::size_t mask = slots.size() - 1;
  std::size_t i = static_cast<std::size_t>(&entry - slots.data());
  if (slots[(i + 1) & mask].sequence != 0) return;  // still inside a probe chain
  while (slots[i].sequence != 0 && slots[i].erased) {
    slots[i] = Entry{};
    --used;
    i = (i - 1) & mask;
  }
}

void RequestTable::erase(Shard& s, Entry& entry) {
  s.remove(entry);
  size_.fetch_sub(1, std::memory_order_relaxed);
}

RequestTable::Entry* RequestTable::newest_before(Shard& s, MPI_Request request,
                                                 std::uint64_t epoch) {
  Entry* newest = nullptr;
  s.for_each(request, [&](Entry& e) {
    if (e.sequence < epoch && (newest == nullptr || e.sequence > newest->sequence)) newest = &e;
  });
  return newest;
}

RequestTable::Found RequestTable::find_newest_before(Shard& s, MPI_Request request,
                                                     std::uint64_t epoch) {
  if (Entry* entry = newest_before(s, request, epoch)) return {entry};
  if (s.overflow.empty()) return {};
  const auto list = s.overflow.find(request);
  if (list == s.overflow.end()) return {};
  std::deque<Entry>& entries = list->second;
  for (std::size_t i = entries.size(); i-- > 0;)
    if (entries[i].sequence < epoch) return {&entries[i], &entries, i};
  return {};
}

void RequestTable::drop(Shard& s, const Found& found) {
  if (found.overflow == nullptr) return erase(s, *found.entry);
  std::deque<Entry>& entries = *found.overflow;
  const MPI_Request request = found.entry->request;
  entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(found.index));
  size_.fetch_sub(1, std::memory_order_relaxed);
  if (entries.empty()) s.overflow.erase(request);
}

void RequestTable::track(MPI_Request request, Fn fn, std::uint64_t now_ns, bool persistent,
                         const Instance& instance) {
  if (request == MPI_REQUEST_NULL) return;
  const std::uint64_t sequence = sequence_.fetch_add(1, std::memory_order_acq_rel);
  Shard& s = shard(request);
  ShardLock lock(s);
  // A handle with kInlineEntriesPerHandle entries already: its oldest moves to the overflow
  // list, which keeps at most kMaxEntriesPerHandle (see there).
  std::size_t entries = 0;
  Entry* oldest = nullptr;
  s.for_each(request, [&](Entry& e) {
    ++entries;
    if (oldest == nullptr || e.sequence < oldest->sequence) oldest = &e;
  });
  if (entries >= kInlineEntriesPerHandle) {
    std::deque<Entry>& older = s.overflow[request];
    older.push_back(*oldest);
    s.remove(*oldest);
    if (older.size() + kInlineEntriesPerHandle > kMaxEntriesPerHandle) {
      older.pop_front();
      size_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
  s.insert(Entry{request, sequence, now_ns, fn, persistent, !persistent, false, instance});
  size_.fetch_add(1, std::memory_order_relaxed);
}

void RequestTable::started(MPI_Request request, std::uint64_t now_ns, std::uint64_t sample) {
  if (request == MPI_REQUEST_NULL || empty()) return;
  Shard& s = shard(request);
  ShardLock lock(s);
  // The caller owns this live handle, so its newest entry is its own.
  if (Entry* entry = newest_before(s, request, ~std::uint64_t{0})) {
    entry->started_ns = now_ns;
    entry->active = true;
    if (entry->instance.comm != nullptr) {
      entry->instance.seq = entry->instance.comm->next_seq();
      entry->instance.sampled = is_sampled(entry->instance.comm->id, entry->instance.seq, sample);
    }
  }
}

std::optional<RequestTable::Completed> RequestTable::complete(MPI_Request request,
                                                              std::uint64_t epoch) {
  if (request == MPI_REQUEST_NULL) return std::nullopt;
  std::optional<Completed> done;
  std::uint64_t sequence = 0;
  {
    Shard& s = shard(request);
    ShardLock lock(s);
    const Found found = find_newest_before(s, request, epoch);
    if (found.entry == nullptr || !found.entry->active) return std::nullopt;
    done = Completed{found.entry->fn, found.entry->started_ns, found.entry->instance,
                     found.entry->arrived_ns, found.entry->pending_ns};
    sequence = found.entry->sequence;
    found.entry->arrived_ns = 0;
    found.entry->pending_ns = 0;
    if (found.entry->persistent)
      found.entry->active = false;  // stays, inactive, until freed
    else
      drop(s, found);
  }
  if (watching()) unwatch(sequence);
  return done;
}

bool RequestTable::is_recorded_receive(const Instance& instance, int receiver,
                                       std::uint64_t sample) {
  return instance.kind == monitor::RecordKind::recv && instance.comm != nullptr &&
         instance.seq != 0 && instance.root >= 0 &&
         monitor::is_message_sampled(instance.comm->id, instance.root, receiver, instance.tag,
                                     instance.seq, sample);
}

namespace {
struct SpinGuard {
  std::atomic<bool>& locked;
  explicit SpinGuard(std::atomic<bool>& l) : locked(l) {
    while (locked.exchange(true, std::memory_order_acquire))
      while (locked.load(std::memory_order_relaxed)) __builtin_ia32_pause();
  }
  ~SpinGuard() { locked.store(false, std::memory_order_release); }
  SpinGuard(const SpinGuard&) = delete;
  SpinGuard& operator=(const SpinGuard&) = delete;
};
}  // namespace

void RequestTable::watch(MPI_Request request) {
  if (request == MPI_REQUEST_NULL) return;
  std::uint64_t sequence = 0;
  {
    Shard& s = shard(request);
    ShardLock lock(s);
    // The caller owns this live handle, so its newest entry is its own.
    if (Entry* entry = newest_before(s, request, ~std::uint64_t{0})) sequence = entry->sequence;
  }
  if (sequence == 0) return;
  const SpinGuard guard(watch_locked_);
  const int count = watched_count_.load(std::memory_order_relaxed);
  if (count >= kMaxWatched) return;
  watched_[count] = Watched{request, sequence};
  watched_count_.store(count + 1, std::memory_order_relaxed);
}

void RequestTable::unwatch(std::uint64_t sequence) {
  const SpinGuard guard(watch_locked_);
  int count = watched_count_.load(std::memory_order_relaxed);
  // Kept in the order they were posted (the polls stamp in that order).
  const auto last = std::remove_if(watched_.begin(), watched_.begin() + count,
                                   [&](const Watched& w) { return w.sequence == sequence; });
  watched_count_.store(static_cast<int>(last - watched_.begin()), std::memory_order_relaxed);
}

int RequestTable::watched(Watched out[]) {
  const SpinGuard guard(watch_locked_);
  const int count = watched_count_.load(std::memory_order_relaxed);
  std::copy(watched_.begin(), watched_.begin() + count, out);
  return count;
}

void RequestTable::stamp(const Watched& receive, std::uint64_t now_ns, std::uint64_t pending_ns) {
  Shard& s = shard(receive.request);
  ShardLock lock(s);
  s.for_each(receive.request, [&](Entry& e) {
    if (e.sequence != receive.sequence || !e.active || e.arrived_ns != 0) return;
    e.arrived_ns = now_ns;
    e.pending_ns = std::max(e.pending_ns, pending_ns);
  });
}

void RequestTable::seen_pending(const Watched& receive, std::uint64_t ns) {
  Shard& s = shard(receive.request);
  ShardLock lock(s);
  s.for_each(receive.request, [&](Entry& e) {
    if (e.sequence == receive.sequence && e.active && e.arrived_ns == 0)
      e.pending_ns = std::max(e.pending_ns, ns);
  });
}

void RequestTable::seen_pending(MPI_Request request, std::uint64_t epoch, std::uint64_t ns) {
  if (request == MPI_REQUEST_NULL) return;
  Shard& s = shard(request);
  ShardLock lock(s);
  const Found found = find_newest_before(s, request, epoch);
  if (found.entry != nullptr && found.entry->active && found.entry->arrived_ns == 0)
    found.entry->pending_ns = std::max(found.entry->pending_ns, ns);
}

bool RequestTable::holds_recorded_receive(const MPI_Request* requests, int count,
                                          std::uint64_t epoch, int receiver, std::uint64_t sample) {
  for (int i = 0; i < count; ++i) {
    if (requests[i] == MPI_REQUEST_NULL) continue;
    Shard& s = shard(requests[i]);
    ShardLock lock(s);
    const Found found = find_newest_before(s, requests[i], epoch);
    if (found.entry == nullptr || !found.entry->active) continue;
    const Instance& instance = found.entry->instance;
    if (instance.kind != monitor::RecordKind::recv || instance.comm == nullptr) continue;
    if (instance.seq == 0 || instance.root < 0 || is_recorded_receive(instance, receiver, sample))
      return true;
  }
  return false;
}

void RequestTable::forget(MPI_Request request, std::uint64_t epoch) {
  if (request == MPI_REQUEST_NULL) return;
  std::uint64_t sequence = 0;
  {
    Shard& s = shard(request);
    ShardLock lock(s);
    const Found found = find_newest_before(s, request, epoch);
    if (found.entry == nullptr) return;
    sequence = found.entry->sequence;
    drop(s, found);
  }
  if (watching()) unwatch(sequence);
}

void RequestTable::clear() {
  {
    const SpinGuard guard(watch_locked_);
    watched_count_.store(0, std::memory_order_relaxed);
  }
  for (Shard& s : shards_) {
    ShardLock lock(s);
    for (Entry& e : s.slots)
      if (e.sequence != 0 && !e.erased) size_.fetch_sub(1, std::memory_order_relaxed);
    s.slots.clear();
    s.used = 0;
    for (const auto& [request, older] : s.overflow)
      size_.fetch_sub(older.size(), std::memory_order_relaxed);
    s.overflow.clear();
  }
}

}  // namespace commtap::interpose
