// Maps the MPI requests of intercepted nonblocking and persistent calls to the function that
// created them, so that whichever Wait/Test call completes them attributes the completion.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "interpose/function_table.hpp"
#include "monitor/sampling.hpp"
#include "world/communicators.hpp"

namespace commtap::interpose {

// The collective instance or point-to-point message a request stands for, if any
// (comm == nullptr: none).
struct Instance {
  world::CommState* comm = nullptr;
  // Collective: sequence number, assigned at the post or at each MPI_Start of a persistent
  // request. Transfer: message number of the pair; 0 for a receive from MPI_ANY_SOURCE or with
  // MPI_ANY_TAG, numbered at completion from its status.
  std::uint64_t seq = 0;
  std::uint64_t bytes = 0;
  std::int32_t root = -1;  // collective: root; transfer: peer's world rank (-1: any source)
  bool sampled = false;
  std::uint32_t site = 0;
  std::int32_t tag = 0;  // transfers; MPI_ANY_TAG for a wildcard receive
  monitor::RecordKind kind = monitor::RecordKind::collective;
};

using monitor::is_sampled;

// What the call that completed a request saw of it at its first look: nothing commtap could tell
// (the library's call did the looking), done (the message may have come any time since the
// receive was last seen pending: the program computed in between), or pending (the call then
// looked until it was done, so its completion is the arrival).
enum class FirstLook : std::uint8_t { unknown, done, pending };

class RequestTable {
 public:
  struct Completed {
    Fn fn;
    std::uint64_t started_ns;
    Instance instance;
    std::uint64_t arrived_ns;  // when it was seen done while the rank waited elsewhere; 0: not
    // The last moment a look found it not yet done (commtap's polls, a failed MPI_Test); 0: none
    // since it was posted.
    std::uint64_t pending_ns;
  };
  // A recorded receive outstanding: its handle and the table entry it stands for.
  struct Watched {
    MPI_Request request;
    std::uint64_t sequence;
  };
  // At most this many receives are watched at once (more are left to their own completion).
  static constexpr int kMaxWatched = 16;

  // A new request from an intercepted call. Persistent requests stay inactive until started.
  void track(MPI_Request request, Fn fn, std::uint64_t now_ns, bool persistent,
             const Instance& instance = {});
  // MPI_Start/Startall on a persistent request; a collective one gets its next sequence number,
  // sampled when it is a multiple of `sample`.
  void started(MPI_Request request, std::uint64_t now_ns, std::uint64_t sample);
  // The tracking epoch before a completion call: requests the call can complete were all
  // tracked before it (the application got their handles from calls that had returned).
  std::uint64_t epoch() const { return sequence_.load(std::memory_order_acquire); }
  // A completion call that began at `epoch` finished `request`: nonblocking entries are removed,
  // persistent ones become inactive. Empty when commtap did not create the request or it was
  // not active.
  std::optional<Completed> complete(MPI_Request request, std::uint64_t epoch);
  // MPI_Request_free, begun at `epoch`.
  void forget(MPI_Request request, std::uint64_t epoch);
  // Whether any of `count` handles, as a completion call begun at `epoch` sees them, is an
  // active receive whose message is recorded (sampled for `receiver`, this world rank, at
  // `sample`), or a wildcard receive, numbered only when it completes.
  bool holds_recorded_receive(const MPI_Request* requests, int count, std::uint64_t epoch,
                              int receiver, std::uint64_t sample);
  // A receive for a specific source and tag whose message is recorded (sampled for `receiver`
  // at `sample`): the messages whose arrival the blocking calls stamp (interpose/yield.hpp).
  static bool is_recorded_receive(const Instance& instance, int receiver, std::uint64_t sample);
  // The receive just tracked under `request` is watched until it completes or is freed: while
  // the rank blocks in MPI_Wait, MPI_Waitall, MPI_Recv or MPI_Send, it is polled and stamped
  // when seen done, so that its arrival is not read as the moment the program waited for it.
  void watch(MPI_Request request);
  // Copies the watched receives into `out` (kMaxWatched), in the order they were posted; their
  // count.
  int watched(Watched out[]);
  // Whether any receive is watched (one relaxed load).
  bool watching() const { return watched_count_.load(std::memory_order_relaxed) > 0; }
  // The watched receive was seen done at `now_ns` (the first stamp stays), having been seen
  // pending by the same call at `pending_ns` (0: that call found it done at its first look).
  void stamp(const Watched& receive, std::uint64_t now_ns, std::uint64_t pending_ns);
  // A look at `ns` found the receive not yet done (the latest such moment stays).
  void seen_pending(const Watched& receive, std::uint64_t ns);
  // The same for a request an MPI_Test begun at `epoch` found not yet done.
  void seen_pending(MPI_Request request, std::uint64_t epoch, std::uint64_t ns);
  // Fast check for the completion wrappers: nothing tracked means nothing to snapshot.
  bool empty() const { return size_.load(std::memory_order_relaxed) == 0; }
  void clear();

 private:
  // A handle is not an identity. MPI reuses a handle value as soon as its request is freed,
  // which happens inside the library's completion call, before that call's wrapper can update
  // this table; another thread may already have tracked a new request under the same value. And
  // MPICH hands back one shared handle (0x6c000001) for every send that completed at once, so
  // any number of outstanding operations can hold the same value. So a handle can have several
  // entries, told apart by their sequence numbers: a completion takes the newest entry made
  // before the completion call began, and a call that lists a handle k times takes k entries.
  struct Entry {
    MPI_Request request;
    std::uint64_t sequence;  // 0: empty slot
    std::uint64_t started_ns;
    Fn fn;
    bool persistent;
    bool active;
    bool erased;  // a tombstone: keeps probe chains intact until the next rebuild
    Instance instance;
    std::uint64_t arrived_ns = 0;  // Completed::arrived_ns
    std::uint64_t pending_ns = 0;  // Completed::pending_ns
  };
  // The open-addressing table keeps this many entries per handle; older ones move to the
  // shard's overflow list for that handle (only shared handles and reused ones ever get there).
  static constexpr std::size_t kInlineEntriesPerHandle = 4;
  // Entries that outlive this many newer ones on the same handle were never completed through
  // an intercepted call (e.g. a completion call that failed); they are dropped.
  static constexpr std::size_t kMaxEntriesPerHandle = 4096;

  // One shard: an open-addressing table (linear probing, duplicates allowed) under a spinlock.
  // Tracking and completing allocate nothing except when the table grows.
  struct alignas(64) Shard {
    std::atomic<bool> locked{false};
    std::vector<Entry> slots;  // capacity a power of two, or empty
    std::size_t used = 0;      // live entries plus tombstones

    void lock() {
      while (locked.exchange(true, std::memory_order_acquire))
        while (locked.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
    void unlock() { locked.store(false, std::memory_order_release); }
    std::size_t home(MPI_Request request) const {
      return (std::hash<MPI_Request>{}(request)*0x9E3779B97F4A7C15ull >> 20) & (slots.size() - 1);
    }
    // Calls visit(entry) for every live entry of `request`, in probe order.
    template <typename Visit>
    void for_each(MPI_Request request, Visit visit) {
      if (slots.empty()) return;
      for (std::size_t i = home(request);; i = (i + 1) & (slots.size() - 1)) {
        Entry& e = slots[i];
        if (e.sequence == 0) return;
        if (!e.erased && e.request == request) visit(e);
      }
    }
    void insert(const Entry& entry);
    void rebuild(std::size_t capacity);
    // Turns `entry` into a tombstone, and tombstones that end a probe chain back into empty
    // slots, so that the usual track/complete cycle leaves the table as it found it.
    void remove(Entry& entry);
    std::vector<Entry> spare;  // reused by rebuild() so that a rebuild at the same size
                               // allocates nothing
    // Per handle, the entries beyond kInlineEntriesPerHandle, oldest first (all older than the
    // handle's entries in `slots`). Empty except while a handle is shared.
    std::unordered_map<MPI_Request, std::deque<Entry>> overflow;
  };
  struct ShardLock {
    Shard& shard;
    explicit ShardLock(Shard& s) : shard(s) { shard.lock(); }
    ~ShardLock() { shard.unlock(); }
  };
  Shard& shard(MPI_Request request) {
    return shards_[std::hash<MPI_Request>{}(request) % shards_.size()];
  }
  // The newest live entry of `request` made before `epoch`, or nullptr.
  static Entry* newest_before(Shard& shard, MPI_Request request, std::uint64_t epoch);
  void erase(Shard& shard, Entry& entry);
  // The newest entry of `request` made before `epoch`: in the table, or in its overflow list
  // (then `overflow` and `index` say where).
  struct Found {
    Entry* entry = nullptr;
    std::deque<Entry>* overflow = nullptr;
    std::size_t index = 0;
  };
  static Found find_newest_before(Shard& shard, MPI_Request request, std::uint64_t epoch);
  // Removes a found entry.
  void drop(Shard& shard, const Found& found);

  // Drops `sequence` from the watched receives (under no shard lock).
  void unwatch(std::uint64_t sequence);

  std::array<Shard, 16> shards_;
  // The watched receives, under their own spinlock; updated only where the program does not
  // call MPI from several threads at once (Runtime::thread_multiple), read by the same thread.
  std::atomic<bool> watch_locked_{false};
  std::array<Watched, kMaxWatched> watched_{};
  std::atomic<int> watched_count_{0};
  std::atomic<std::uint64_t> sequence_{1};
  std::atomic<std::size_t> size_{0};
};

// A copy of the request handles passed to a completion call, taken before the call because MPI
// overwrites completed nonpersistent handles with MPI_REQUEST_NULL.
class RequestSnapshot {
 public:
  void take(const MPI_Request* requests, int count, std::uint64_t epoch) {
    epoch_ = epoch;
    count_ = count < 0 ? 0 : count;
    if (count_ > static_cast<int>(inline_.size()))
      heap_.assign(requests, requests + count_);
    else
      std::copy(requests, requests + count_, inline_.begin());
  }
  MPI_Request operator[](int i) const {
    if (i < 0 || i >= count_) return MPI_REQUEST_NULL;
    return count_ > static_cast<int>(inline_.size()) ? heap_[i] : inline_[i];
  }
  int size() const { return count_; }
  std::uint64_t epoch() const { return epoch_; }

 private:
  int count_ = 0;
  std::uint64_t epoch_ = 0;
  std::array<MPI_Request, 16> inline_;  // left uninitialized: most calls never use it
  std::vector<MPI_Request> heap_;
};

}  // namespace commtap::interpose
