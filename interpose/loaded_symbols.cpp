#include "interpose/loaded_symbols.hpp"

#include <dlfcn.h>
#include <link.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace commtap::interpose {
namespace {

const void* own_base() noexcept {
  static const void* const base = [] {
    Dl_info info{};
    return dladdr(reinterpret_cast<const void*>(&own_base), &info) != 0 ? info.dli_fbase : nullptr;
  }();
  return base;
}

// dlsym in the scope of a handle: the object and its dependencies.
void* first_in(void* handle, std::initializer_list<const char*> names) noexcept {
  for (const char* name : names)
    if (void* found = dlsym(handle, name); found != nullptr && !is_own_address(found)) return found;
  return nullptr;
}

// The same in the scope of an already loaded object, by its path. RTLD_NOLOAD never loads
// anything; the reference it takes is given back at once (the object stays loaded for as long
// as its loader keeps it: a caller of ours holds it).
void* first_in_object(const char* path, std::initializer_list<const char*> names) noexcept {
  if (path == nullptr || path[0] == '\0') return nullptr;
  void* handle = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return nullptr;
  void* found = first_in(handle, names);
  dlclose(handle);
  return found;
}

}  // namespace

bool is_own_address(const void* address) noexcept {
  Dl_info info{};
  return dladdr(address, &info) != 0 && info.dli_fbase == own_base();
}

std::string object_path_of(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return {};
  return info.dli_fname;
}

void* find_loaded_function(std::initializer_list<const char*> names, const void* caller) noexcept {
  try {
    if (caller != nullptr && !is_own_address(caller))
      if (void* found = first_in_object(object_path_of(caller).c_str(), names)) return found;
    if (void* found = first_in(RTLD_DEFAULT, names)) return found;
    // Every loaded object's path first, then the lookups: dlopen inside dl_iterate_phdr's
    // callback would take the loader's lock while the walk holds it.
    std::vector<std::string> paths;
    dl_iterate_phdr(
        [](dl_phdr_info* object, std::size_t, void* out) {
          if (object->dlpi_name != nullptr && object->dlpi_name[0] != '\0')
            static_cast<std::vector<std::string>*>(out)->emplace_back(object->dlpi_name);
          return 0;
        },
        &paths);
    for (const std::string& path : paths)
      if (void* found = first_in_object(path.c_str(), names)) return found;
  } catch (...) {  // out of memory for the paths: not found
  }
  return nullptr;
}

}  // namespace commtap::interpose
