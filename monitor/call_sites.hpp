// monitor/call_sites: where the application called MPI (or NCCL), found once per site.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace commtap::monitor {

// Where the application called MPI: the frames above the MPI (or NCCL) library, innermost first.
struct CallSite {
  struct Frame {
    std::uint64_t address = 0;
    std::string module;  // the executable or shared object
    std::string symbol;  // the enclosing function ("" if unknown)
    std::uint64_t symbol_offset = 0;
    std::string file;  // source file of the call, from the debug information ("" if unknown)
    int line = 0;      // its line (0 if unknown)
  };
  std::uint32_t id = 0;  // rank-local: compare ranks by frames, not by id
  std::vector<Frame> frames;
};

// Fills in file and line of every frame whose module has line information (DWARF, also from a
// separate debug file), reading this process's own modules. Off the hot path: the writer thread
// calls it for each window's new sites.
void resolve_source_lines(std::vector<CallSite>& sites);

// Call-site capture: the hot path looks a return address up in a per-thread cache; the stack is
// unwound (libunwind) once per distinct call site. Calls that reach MPI through a binding inside
// the MPI library (Fortran) are keyed by the first return address outside it.
class CallSites {
 public:
  static constexpr std::size_t kDepth = 8;
  // A thread's direct-mapped cache keyed by return address (its monitor::ThreadState's `sites`,
  // thread_state.hpp): a hit costs a load and two compares. Entries name their owner, so another
  // CallSites object never matches.
  struct ThreadCache {
    struct Entry {
      std::uintptr_t key = 0;
      const CallSites* owner = nullptr;
      std::uint32_t site = 0;
      bool indirect = false;
    };
    std::array<Entry, 64> entries{};
  };

  CallSites();
  ~CallSites();
  // The site id (1, 2, ...) of a call whose wrapper returns to `return_address`, looked up in
  // this thread's `cache` (the overload without it fetches the thread's block itself).
  [[gnu::always_inline]] std::uint32_t site_of(const void* return_address, ThreadCache& cache) {
    const auto key = reinterpret_cast<std::uintptr_t>(return_address);
    const ThreadCache::Entry& entry = cache.entries[(key >> 4) % cache.entries.size()];
    if (entry.key == key && entry.owner == this && !entry.indirect) [[likely]]
      return entry.site;
    return site_of_missed(return_address, cache);
  }
  std::uint32_t site_of(const void* return_address);
  // The sites found since `cursor` (a count the caller keeps), for the writer.
  std::vector<CallSite> since(std::size_t& cursor) const;

 private:
  struct Shared;
  std::uint32_t site_of_missed(const void* return_address, ThreadCache& cache);
  static CallSite unwind(std::uint32_t id);
  std::unique_ptr<Shared> shared_;
};

}  // namespace commtap::monitor
