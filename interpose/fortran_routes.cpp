// Fortran bindings that reach the C library by its PMPI_ names. MPICH's libmpichfort calls
// MPI_<name> from most bindings (those are caught by the C wrappers, as for any C caller), but
// some of the mpi_f08 ones call PMPI_<name> directly (mpi_barrier_f08_, mpi_wait_f08_,
// mpi_waitall_f08_, ...), which no C wrapper sees. At MPI_Init the binding libraries' own
// relocations for PMPI_<name> of every function in mpi_functions.def are pointed at commtap's
// MPI_<name>: the route the other bindings take. Nothing else is touched: not the application,
// not other tools, not the MPI library itself.
#include "interpose/fortran_routes.hpp"

#include <elf.h>
#include <link.h>
#include <mpi.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "interpose/function_table.hpp"

namespace commtap::interpose {

namespace {

// PMPI_<name> -> commtap's MPI_<name>, for every intercepted function but MPI_Init and
// MPI_Init_thread (they have run by the time the routes are set).
const std::unordered_map<std::string_view, void*>& routes() {
  static const std::unordered_map<std::string_view, void*> table = [] {
    std::unordered_map<std::string_view, void*> t;
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) \
  t.emplace("PMPI_" #name, reinterpret_cast<void*>(&::MPI_##name));
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
    t.erase("PMPI_Init");
    t.erase("PMPI_Init_thread");
    return t;
  }();
  return table;
}

}  // namespace

bool is_fortran_binding_library(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  const std::string_view file = slash == std::string_view::npos ? path : path.substr(slash + 1);
  // MPICH (libmpichfort, libmpifort) and Open MPI (libmpi_mpifh, libmpi_usempi*).
  for (std::string_view prefix : {"libmpichfort", "libmpifort", "libmpi_mpifh", "libmpi_usempi"})
    if (file.substr(0, prefix.size()) == prefix) return true;
  return false;
}

void for_each_relocation(const dl_phdr_info& object, const RelocationVisitor& visit) {
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < object.dlpi_phnum; ++i)
    if (object.dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(object.dlpi_addr + object.dlpi_phdr[i].p_vaddr);
  if (dynamic == nullptr) return;
  const ElfW(Addr) base = object.dlpi_addr;
  // The dynamic linker has made most of these absolute; an entry below the load address is
  // still relative to it.
  auto address = [base](ElfW(Addr) value) { return value < base ? value + base : value; };
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const ElfW(Rela)* jump_slots = nullptr;
  const ElfW(Rela)* others = nullptr;
  std::size_t jump_slot_bytes = 0, other_bytes = 0;
  bool rela = true;
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symbols = reinterpret_cast<const ElfW(Sym)*>(address(d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        strings = reinterpret_cast<const char*>(address(d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        jump_slots = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        jump_slot_bytes = d->d_un.d_val;
        break;
      case DT_PLTREL:
        rela = d->d_un.d_val == DT_RELA;
        break;
      case DT_RELA:
        others = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr));
        break;
      case DT_RELASZ:
        other_bytes = d->d_un.d_val;
        break;
      default:
        break;
    }
  }
  // Every platform commtap builds on (x86-64, aarch64) uses RELA relocations.
  if (symbols == nullptr || strings == nullptr || !rela) return;
  auto walk = [&](const ElfW(Rela) * table, std::size_t bytes) {
    if (table == nullptr) return;
    for (std::size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& r = table[i];
      const auto symbol = ELF64_R_SYM(r.r_info);
      if (symbol == 0) continue;
      visit(strings + symbols[symbol].st_name, reinterpret_cast<void**>(base + r.r_offset));
    }
  };
  walk(jump_slots, jump_slot_bytes);
  walk(others, other_bytes);
}

namespace {

// Writes `value` into a relocated slot, opening a read-only (RELRO) page for the write.
bool write_slot(void** slot, void* value) {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* start = reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(slot) &
                                        ~static_cast<std::uintptr_t>(page - 1));
  // There is no portable way to ask a page's protection: it is opened for the write (the caller
  // closes RELRO pages again).
  if (::mprotect(start, static_cast<std::size_t>(page), PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  return true;
}

int route_object(dl_phdr_info* object, std::size_t, void* routed_count) {
  if (object->dlpi_name == nullptr || !is_fortran_binding_library(object->dlpi_name)) return 0;
  // Pages of the read-only-after-relocation segment get their protection back after the write.
  ElfW(Addr) relro_begin = 0, relro_end = 0;
  for (int i = 0; i < object->dlpi_phnum; ++i)
    if (object->dlpi_phdr[i].p_type == PT_GNU_RELRO) {
      relro_begin = object->dlpi_addr + object->dlpi_phdr[i].p_vaddr;
      relro_end = relro_begin + object->dlpi_phdr[i].p_memsz;
    }
  const long page = ::sysconf(_SC_PAGESIZE);
  for_each_relocation(*object, [&](const char* name, void** slot) {
    const auto route = routes().find(name);
    if (route == routes().end() || *slot == route->second) return;
    const auto at = reinterpret_cast<ElfW(Addr)>(slot);
    const bool relro = at >= relro_begin && at < relro_end;
    if (!write_slot(slot, route->second)) return;
    if (relro) {
      auto* start = reinterpret_cast<void*>(at & ~static_cast<ElfW(Addr)>(page - 1));
      ::mprotect(start, static_cast<std::size_t>(page), PROT_READ);
    }
    ++*static_cast<int*>(routed_count);
  });
  return 0;
}

}  // namespace

int route_fortran_bindings() {
  int routed = 0;
  dl_iterate_phdr(route_object, &routed);
  return routed;
}

}  // namespace commtap::interpose
