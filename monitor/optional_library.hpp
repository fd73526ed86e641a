// A shared library commtap uses where the node has it, opened at first use rather than linked:
// libcommtap.so must load on a node that has only what a stock CUDA/PyTorch image has (no
// libunwind, no elfutils). Without the library the feature that needs it falls back or is off.
#pragma once

#include <dlfcn.h>

namespace commtap::monitor {

class OptionalLibrary {
 public:
  explicit OptionalLibrary(const char* soname) noexcept
      : handle_(dlopen(soname, RTLD_LAZY | RTLD_LOCAL)) {}
  OptionalLibrary(const OptionalLibrary&) = delete;
  OptionalLibrary& operator=(const OptionalLibrary&) = delete;
  // Never closed: code of the library may still run at exit (commtap's writer thread).

  bool loaded() const noexcept { return handle_ != nullptr; }

  // The function `name` as a pointer of type F, nullptr where the library or the name is absent.
  template <typename F>
  F function(const char* name) const noexcept {
    return handle_ != nullptr ? reinterpret_cast<F>(dlsym(handle_, name)) : nullptr;
  }

 private:
  void* handle_;
};

}  // namespace commtap::monitor
