#include "interpose/requests.hpp"

namespace commtap::interpose {

void RequestTable::track(MPI_Request request, Fn fn, std::uint64_t now_ns, bool persistent) {
  if (request == MPI_REQUEST_NULL) return;
  Shard& s = shard(request);
  std::lock_guard lock(s.mutex);
  // A handle value is reused by MPI once its request is gone, so a stale entry is replaced.
  auto [it, inserted] = s.entries.insert_or_assign(request, Entry{fn, now_ns, persistent, !persistent});
  if (inserted) size_.fetch_add(1, std::memory_order_relaxed);
}

void RequestTable::started(MPI_Request request, std::uint64_t now_ns) {
  if (request == MPI_REQUEST_NULL || empty()) return;
  Shard& s = shard(request);
  std::lock_guard lock(s.mutex);
  auto it = s.entries.find(request);
  if (it == s.entries.end()) return;
  it->second.started_ns = now_ns;
  it->second.active = true;
}

std::optional<RequestTable::Completed> RequestTable::complete(MPI_Request request) {
  if (request == MPI_REQUEST_NULL) return std::nullopt;
  Shard& s = shard(request);
  std::lock_guard lock(s.mutex);
  auto it = s.entries.find(request);
  if (it == s.entries.end() || !it->second.active) return std::nullopt;
  Completed done{it->second.fn, it->second.started_ns};
  if (it->second.persistent) {
    it->second.active = false;
  } else {
    s.entries.erase(it);
    size_.fetch_sub(1, std::memory_order_relaxed);
  }
  return done;
}

void RequestTable::forget(MPI_Request request) {
  if (request == MPI_REQUEST_NULL) return;
  Shard& s = shard(request);
  std::lock_guard lock(s.mutex);
  if (s.entries.erase(request) != 0) size_.fetch_sub(1, std::memory_order_relaxed);
}

void RequestTable::clear() {
  for (Shard& s : shards_) {
    std::lock_guard lock(s.mutex);
    size_.fetch_sub(s.entries.size(), std::memory_order_relaxed);
    s.entries.clear();
  }
}

}  // namespace commtap::interpose
