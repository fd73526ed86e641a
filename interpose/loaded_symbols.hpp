// Finds the real definition of a function wherever the process loaded it. A preloaded library
// cannot count on the global scope: Python dlopens extension modules RTLD_LOCAL, so PyTorch's
// libnccl (a dependency of its extension) and mpi4py's libmpi are visible only from the objects
// that need them, and dlsym(RTLD_DEFAULT/RTLD_NEXT) finds nothing there.
#pragma once

#include <string>

namespace commtap::interpose {

// The first definition of one of `names` (tried in order per object, e.g. NCCL's strong pnccl*
// alias before its weak nccl* name) that is not in libcommtap itself, looked up:
//   1. in the scope of the object holding `caller` (a return address into the code that called
//      the wrapper: its own dependencies, RTLD_LOCAL or not), when given;
//   2. in the global scope;
//   3. in every loaded object in load order, with its dependencies.
// nullptr when no loaded object defines any (it may be loaded later: callers do not cache that).
void* find_loaded_function(std::initializer_list<const char*> names,
                           const void* caller = nullptr) noexcept;

// The path of the loaded object that defines `address` ("" when none or unnamed).
std::string object_path_of(const void* address);

// Whether `address` lies in libcommtap itself.
bool is_own_address(const void* address) noexcept;

}  // namespace commtap::interpose
