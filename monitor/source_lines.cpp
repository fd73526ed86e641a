// file:line for call-site frames, with elfutils' libdwfl over this very process: it maps each
// address to its module through /proc/self/maps and reads the module's DWARF line table (or
// the separate debug file the distribution installs). Runs on the writer thread, once per new
// call site, never on the hot path.
#include <elfutils/libdwfl.h>
#include <unistd.h>

#include "monitor/call_sites.hpp"
#include "monitor/optional_library.hpp"

namespace commtap::monitor {

namespace {

// elfutils' libdw, opened where the node has it (optional_library.hpp); without it call sites
// have no file:line.
struct LibDw {
  OptionalLibrary library{"libdw.so.1"};
#define COMMTAP_DW_FUNCTION(name) \
  decltype(&::name) name = library.function<decltype(&::name)>(#name)
  COMMTAP_DW_FUNCTION(dwfl_linux_proc_find_elf);
  COMMTAP_DW_FUNCTION(dwfl_standard_find_debuginfo);
  COMMTAP_DW_FUNCTION(dwfl_begin);
  COMMTAP_DW_FUNCTION(dwfl_end);
  COMMTAP_DW_FUNCTION(dwfl_module_getsrc);
  COMMTAP_DW_FUNCTION(dwfl_lineinfo);
  COMMTAP_DW_FUNCTION(dwfl_addrmodule);
  COMMTAP_DW_FUNCTION(dwfl_report_begin);
  COMMTAP_DW_FUNCTION(dwfl_report_end);
  COMMTAP_DW_FUNCTION(dwfl_linux_proc_report);
#undef COMMTAP_DW_FUNCTION
  Dwfl_Callbacks callbacks{
      .find_elf = dwfl_linux_proc_find_elf,
      .find_debuginfo = dwfl_standard_find_debuginfo,
      .section_address = nullptr,
      .debuginfo_path = nullptr,
  };

  bool usable() const {
    return dwfl_linux_proc_find_elf && dwfl_standard_find_debuginfo && dwfl_begin && dwfl_end &&
           dwfl_module_getsrc && dwfl_lineinfo && dwfl_addrmodule && dwfl_report_begin &&
           dwfl_report_end && dwfl_linux_proc_report;
  }
};

const LibDw* libdw() {
  static const LibDw* const loaded = [] {
    auto* dw = new LibDw;  // never freed: used until exit
    return dw->usable() ? dw : nullptr;
  }();
  return loaded;
}

class ProcessLines {
 public:
  explicit ProcessLines(const LibDw& dw) : dw_(dw) {}
  ~ProcessLines() {
    if (dwfl_ != nullptr) dw_.dwfl_end(dwfl_);
  }

  // The source line of the call that returns to `return_address`; false if unknown.
  bool find(std::uint64_t return_address, std::string& file, int& line) {
    // A return address is the instruction after the call, which may already belong to the next
    // line (or, after a noreturn call, to the next function): look up the call itself.
    const Dwarf_Addr address = return_address - 1;
    Dwfl_Module* module = module_of(address);
    if (module == nullptr) return false;
    Dwfl_Line* found = dw_.dwfl_module_getsrc(module, address);
    if (found == nullptr) return false;
    int number = 0;
    const char* name = dw_.dwfl_lineinfo(found, nullptr, &number, nullptr, nullptr, nullptr);
    if (name == nullptr || number <= 0) return false;
    file = name;
    line = number;
    return true;
  }

 private:
  Dwfl_Module* module_of(Dwarf_Addr address) {
    if (dwfl_ != nullptr)
      if (Dwfl_Module* module = dw_.dwfl_addrmodule(dwfl_, address)) return module;
    // Not seen yet: a library loaded (dlopen) since the last report. Report the process again,
    // at most once per address miss.
    if (dwfl_ == nullptr && (dwfl_ = dw_.dwfl_begin(&dw_.callbacks)) == nullptr) return nullptr;
    dw_.dwfl_report_begin(dwfl_);
    const bool reported = dw_.dwfl_linux_proc_report(dwfl_, ::getpid()) == 0;
    dw_.dwfl_report_end(dwfl_, nullptr, nullptr);
    return reported ? dw_.dwfl_addrmodule(dwfl_, address) : nullptr;
  }

  const LibDw& dw_;
  Dwfl* dwfl_ = nullptr;
};

}  // namespace

void resolve_source_lines(std::vector<CallSite>& sites) {
  if (sites.empty()) return;
  const LibDw* const dw = libdw();
  if (dw == nullptr) return;
  // One caller, the writer thread, which runs until the process's last exit handler: never
  // destroyed, since a static's destructor runs at exit() while the writer may still be resolving
  // its final window's sites (it freed the module it was reading: a crash inside libz).
  static ProcessLines* const lines = new ProcessLines(*dw);
  for (CallSite& site : sites)
    for (CallSite::Frame& frame : site.frames) lines->find(frame.address, frame.file, frame.line);
}

}  // namespace commtap::monitor
