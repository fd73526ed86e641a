// Run preloaded: after MPI_Init, every relocation by which the MPI library's Fortran bindings
// reach a function of mpi_functions.def (as MPI_<name> or PMPI_<name>) must lead to commtap's
// wrapper, and no binding may reach the C library by any other route. Prints one line per
// route that does not, and a summary; exits 1 on any.
#include <dlfcn.h>
#include <link.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "interpose/fortran_routes.hpp"

namespace {

const std::set<std::string>& intercepted() {
  static const std::set<std::string> names = {
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) #name,
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
  };
  return names;
}

std::string object_of(const void* address) {
  Dl_info info{};
  if (address == nullptr || dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

struct Tally {
  int libraries = 0, routes = 0, failures = 0;
  std::set<std::string> functions;
};

int check_object(dl_phdr_info* object, std::size_t, void* data) {
  auto& tally = *static_cast<Tally*>(data);
  if (object->dlpi_name == nullptr ||
      !commtap::interpose::is_fortran_binding_library(object->dlpi_name))
    return 0;
  ++tally.libraries;
  const std::string library = object->dlpi_name;
  commtap::interpose::for_each_relocation(*object, [&](const char* raw, void** slot) {
    const std::string name = raw;
    const bool pmpi = starts_with(name, "PMPI_"), mpi = starts_with(name, "MPI_");
    if (pmpi || mpi) {
      const std::string function = name.substr(pmpi ? 5 : 4);
      if (!intercepted().count(function) || function == "Init" || function == "Init_thread")
        return;  // not intercepted (MPI_Init: the f08 wrappers catch it)
      ++tally.routes;
      tally.functions.insert(function);
      void* wrapper = dlsym(RTLD_DEFAULT, ("MPI_" + function).c_str());
      const std::string wrapper_object = object_of(wrapper);
      if (wrapper_object.find("libcommtap") == std::string::npos) {
        std::printf("NOT ROUTED %s: MPI_%s is %s's, not commtap's\n", name.c_str(),
                    function.c_str(), wrapper_object.c_str());
        ++tally.failures;
        return;
      }
      // A lazily bound slot still points into the binding library's own PLT; the dynamic
      // linker will resolve MPI_<name> to the first definition, commtap's.
      const bool lazy = mpi && object_of(*slot) == library;
      if (*slot != wrapper && !lazy) {
        std::printf("NOT ROUTED %s: its slot leads to %s\n", name.c_str(),
                    object_of(*slot).c_str());
        ++tally.failures;
      }
      return;
    }
    // Any other symbol the MPI library defines is a route commtap does not see, unless it is
    // one of the known helpers (attribute callbacks, Fortran initialization).
    void* target = dlsym(RTLD_DEFAULT, raw);
    const std::string target_object = object_of(target);
    if (target_object.find("libmpi") == std::string::npos || target_object == library) return;
    if (starts_with(name, "MPIX_") || starts_with(name, "PMPIX_") || starts_with(name, "MPII_") ||
        starts_with(name, "mpirinit"))
      return;
    std::printf("UNKNOWN ROUTE %s into %s\n", name.c_str(), target_object.c_str());
    ++tally.failures;
  });
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Tally tally;
  dl_iterate_phdr(check_object, &tally);
  std::printf(
      "%d Fortran binding libraries, %d routes to %zu intercepted functions, %d not "
      "through commtap\n",
      tally.libraries, tally.routes, tally.functions.size(), tally.failures);
  MPI_Finalize();
  return tally.libraries == 0 || tally.failures != 0 ? 1 : 0;
}
