// file:line for call-site frames, with elfutils' libdwfl over this very process: it maps each
// address to its module through /proc/self/maps and reads the module's DWARF line table (or
// the separate debug file the distribution installs). Runs on the writer thread, once per new
// call site, never on the hot path.
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include "monitor/monitor.hpp"

namespace commtap::monitor {

namespace {

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = nullptr,
};

class ProcessLines {
 public:
  ~ProcessLines() {
    if (dwfl_ != nullptr) dwfl_end(dwfl_);
  }

  // The source line of the call that returns to `return_address`; false if unknown.
  bool find(std::uint64_t return_address, std::string& file, int& line) {
    // A return address is the instruction after the call, which may already belong to the next
    // line (or, after a noreturn call, to the next function): look up the call itself.
    const Dwarf_Addr address = return_address - 1;
    Dwfl_Module* module = module_of(address);
    if (module == nullptr) return false;
    Dwfl_Line* found = dwfl_module_getsrc(module, address);
    if (found == nullptr) return false;
    int number = 0;
    const char* name = dwfl_lineinfo(found, nullptr, &number, nullptr, nullptr, nullptr);
    if (name == nullptr || number <= 0) return false;
    file = name;
    line = number;
    return true;
  }

 private:
  Dwfl_Module* module_of(Dwarf_Addr address) {
    if (dwfl_ != nullptr)
      if (Dwfl_Module* module = dwfl_addrmodule(dwfl_, address)) return module;
    // Not seen yet: a library loaded (dlopen) since the last report. Report the process again,
    // at most once per address miss.
    if (dwfl_ == nullptr && (dwfl_ = dwfl_begin(&kCallbacks)) == nullptr) return nullptr;
    dwfl_report_begin(dwfl_);
    const bool reported = dwfl_linux_proc_report(dwfl_, ::getpid()) == 0;
    dwfl_report_end(dwfl_, nullptr, nullptr);
    return reported ? dwfl_addrmodule(dwfl_, address) : nullptr;
  }

  Dwfl* dwfl_ = nullptr;
};

}  // namespace

void resolve_source_lines(std::vector<CallSite>& sites) {
  if (sites.empty()) return;
  static ProcessLines lines;  // one caller: the writer thread
  for (CallSite& site : sites)
    for (CallSite::Frame& frame : site.frames) lines.find(frame.address, frame.file, frame.line);
}

}  // namespace commtap::monitor
