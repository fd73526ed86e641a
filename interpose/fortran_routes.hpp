// Routes the Fortran bindings' direct PMPI_ calls through commtap's MPI_ wrappers
// (fortran_routes.cpp says why), and the ELF walk that does it, which the tests reuse.
#pragma once

#include <link.h>

#include <functional>
#include <string_view>

namespace commtap::interpose {

// Whether a loaded object is an MPI library's Fortran bindings (MPICH's or Open MPI's).
bool is_fortran_binding_library(std::string_view path);

// Calls visit(symbol name, slot) for every relocation of `object` that names a symbol: the
// PLT's jump slots and the GOT's data slots (calls compiled without a PLT).
using RelocationVisitor = std::function<void(const char* name, void** slot)>;
void for_each_relocation(const dl_phdr_info& object, const RelocationVisitor& visit);

// Points every PMPI_<name> slot of the loaded Fortran binding libraries at commtap's
// MPI_<name> (for the functions of mpi_functions.def but MPI_Init and MPI_Init_thread).
// Returns how many slots changed. Called once, from MPI_Init.
int route_fortran_bindings();

}  // namespace commtap::interpose
