// monitor/call_sites: where the application called MPI (or NCCL), found once per site.
#pragma once

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
  CallSites();
  ~CallSites();
  // The site id (1, 2, ...) of a call whose wrapper returns to `return_address`.
  std::uint32_t site_of(const void* return_address);
  // The sites found since `cursor` (a count the caller keeps), for the writer.
  std::vector<CallSite> since(std::size_t& cursor) const;

 private:
  struct Shared;
  static CallSite unwind(std::uint32_t id);
  std::unique_ptr<Shared> shared_;
};

}  // namespace commtap::monitor
