// The exported MPI_* symbols, generated from mpi_functions.def. libcommtap.so links no MPI
// library, so it loads into processes without one (NCCL jobs on nodes without MPICH) and into
// processes whose MPI has another ABI. Each exported MPI_<name> is one indirect jump through its
// slot. At the process's first MPI call the slots are pointed, once for all:
// - at commtap's wrappers (mpi_wrappers.cpp) when the loaded MPI has MPICH's ABI;
// - at the library's own MPI_<name> when it has another (Open MPI's libmpi.so.40, as mpi4py
//   loads it): a jump leaves registers and stack as the caller set them, so its handles, which
//   are pointers where MPICH's are ints, reach it untouched; commtap records nothing of MPI then.
// The first call's stub saves the argument registers, asks commtap_mpi_choose_entries where to
// go, restores them and jumps there. x86-64 only; elsewhere the wrappers are exported directly
// (MPICH's ABI assumed, as before).
#include "interpose/mpi_entry.hpp"

#include <dlfcn.h>
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "interpose/function_table.hpp"
#include "interpose/launcher_identity.hpp"
#include "interpose/loaded_symbols.hpp"

#if COMMTAP_MPI_ENTRY_STUBS

extern "C" {
// The wrappers (mpi_wrappers.cpp) and the first-call stubs (below), by name.
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) \
  void commtap_mpi_wrapper_##name();                               \
  void commtap_mpi_first_##name();
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI

// One slot per exported function, read by its jump; first the stub that decides.
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) \
  [[gnu::visibility("hidden")]] void* commtap_mpi_slot_##name =    \
      reinterpret_cast<void*>(&commtap_mpi_first_##name);
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
}

// The exported symbol (a jump through the slot) and its first-call stub (the slot's address in
// r11, which no call passes arguments in, then the common path).
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) \
  asm(".text\n"                                                    \
      ".globl MPI_" #name                                          \
      "\n"                                                         \
      ".type MPI_" #name                                           \
      ", @function\n"                                              \
      ".p2align 4\n"                                               \
      "MPI_" #name                                                 \
      ":\n"                                                        \
      "  .cfi_startproc\n"                                         \
      "  jmp *commtap_mpi_slot_" #name                             \
      "(%rip)\n"                                                   \
      "  .cfi_endproc\n"                                           \
      ".size MPI_" #name ", .-MPI_" #name                          \
      "\n"                                                         \
      ".globl commtap_mpi_first_" #name                            \
      "\n"                                                         \
      ".hidden commtap_mpi_first_" #name                           \
      "\n"                                                         \
      ".type commtap_mpi_first_" #name                             \
      ", @function\n"                                              \
      "commtap_mpi_first_" #name                                   \
      ":\n"                                                        \
      "  .cfi_startproc\n"                                         \
      "  lea commtap_mpi_slot_" #name                              \
      "(%rip), %r11\n"                                             \
      "  jmp commtap_mpi_first_call\n"                             \
      "  .cfi_endproc\n"                                           \
      ".size commtap_mpi_first_" #name ", .-commtap_mpi_first_" #name "\n");
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI

// The common first-call path: the caller's argument registers (the six integer ones, the eight
// vector ones for MPI_Pcontrol's varargs, rax for their count) are saved, the stack kept 16-byte
// aligned for the call; commtap_mpi_choose_entries(slot, caller's return address) returns where
// to go.
asm(R"(
.text
.globl commtap_mpi_first_call
.hidden commtap_mpi_first_call
.type commtap_mpi_first_call, @function
.p2align 4
commtap_mpi_first_call:
  .cfi_startproc
  push %rbp
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  mov %rsp, %rbp
  .cfi_def_cfa_register %rbp
  push %rdi
  push %rsi
  push %rdx
  push %rcx
  push %r8
  push %r9
  push %rax
  push %r11
  sub $128, %rsp
  movdqu %xmm0, 0(%rsp)
  movdqu %xmm1, 16(%rsp)
  movdqu %xmm2, 32(%rsp)
  movdqu %xmm3, 48(%rsp)
  movdqu %xmm4, 64(%rsp)
  movdqu %xmm5, 80(%rsp)
  movdqu %xmm6, 96(%rsp)
  movdqu %xmm7, 112(%rsp)
  mov %r11, %rdi
  mov 8(%rbp), %rsi
  call commtap_mpi_choose_entries
  mov %rax, %r11
  movdqu 0(%rsp), %xmm0
  movdqu 16(%rsp), %xmm1
  movdqu 32(%rsp), %xmm2
  movdqu 48(%rsp), %xmm3
  movdqu 64(%rsp), %xmm4
  movdqu 80(%rsp), %xmm5
  movdqu 96(%rsp), %xmm6
  movdqu 112(%rsp), %xmm7
  add $128, %rsp
  pop %r10
  pop %rax
  pop %r9
  pop %r8
  pop %rcx
  pop %rdx
  pop %rsi
  pop %rdi
  pop %rbp
  .cfi_def_cfa %rsp, 8
  jmp *%r11
  .cfi_endproc
.size commtap_mpi_first_call, .-commtap_mpi_first_call
)");

namespace commtap::interpose {
namespace {

constexpr std::size_t kMpiFunctionCount = [] {
  std::size_t n = 0;
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) ++n;
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
  return n;
}();

void** const kSlots[] = {
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) &commtap_mpi_slot_##name,
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
};

void* const kWrappers[] = {
#define COMMTAP_MPI(name, family, yield, twin, params, args, info) \
  reinterpret_cast<void*>(&commtap_mpi_wrapper_##name),
#include "interpose/mpi_functions.def"
#undef COMMTAP_MPI
};
static_assert(std::size(kSlots) == kMpiFunctionCount);

std::atomic<MpiAbi> g_abi{MpiAbi::undecided};
std::mutex g_choosing;

// Where a call goes that has nowhere to go: no MPI is loaded (the caller found MPI_<name> by
// name in a process without one), or another ABI's library lacks the function. Any signature
// may arrive here: it only returns an error code.
int no_mpi_function() {
  static std::once_flag said;
  std::call_once(said, [] {
    std::fprintf(stderr,
                 "commtap: an MPI function was called, but no MPI library defines it in "
                 "this process\n");
  });
  return MPI_ERR_OTHER;
}

bool says_first_rank() {
  const Environment environment = [](const char* name) -> const char* { return std::getenv(name); };
  return identity_from_environment(environment).rank <= 0;
}

// Decides from the library that defines PMPI_Init, found where the caller's object sees it
// first. MPICH's ABI is recognised by MPIR_Dup_fn: its mpi.h makes MPI_DUP_FN that symbol, so
// every library of that ABI exports it; Open MPI's is OMPI_C_MPI_DUP_FN.
MpiAbi decide(const void* caller) {
  void* const init = find_loaded_function({"PMPI_Init"}, caller);
  if (init == nullptr) return MpiAbi::undecided;
  const std::string path = object_path_of(init);
  void* const library = dlopen(path.empty() ? nullptr : path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  const bool mpich = library != nullptr && dlsym(library, "MPIR_Dup_fn") != nullptr;
  if (library != nullptr) dlclose(library);
  if (mpich) {
    // commtap's own PMPI_ calls bind lazily in the global scope: an MPICH loaded RTLD_LOCAL
    // (mpi4py built on MPICH) is made global. Its reference is kept for the process's life.
    if (dlsym(RTLD_DEFAULT, "PMPI_Init") == nullptr && !path.empty())
      (void)dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD | RTLD_GLOBAL);
    for (std::size_t i = 0; i < kMpiFunctionCount; ++i)
      __atomic_store_n(kSlots[i], kWrappers[i], __ATOMIC_RELEASE);
    return MpiAbi::mpich;
  }
  for (std::size_t i = 0; i < kMpiFunctionCount; ++i) {
    void* real = find_loaded_function({kFunctionName[i]}, caller);
    if (real == nullptr) real = reinterpret_cast<void*>(&no_mpi_function);
    __atomic_store_n(kSlots[i], real, __ATOMIC_RELEASE);
  }
  if (says_first_rank())
    std::fprintf(stderr,
                 "commtap: this process's MPI (%s) does not have MPICH's ABI: its MPI calls go "
                 "to it untouched and are not recorded (NCCL still is)\n",
                 path.c_str());
  return MpiAbi::other;
}

}  // namespace

MpiAbi mpi_abi() noexcept {
  return g_abi.load(std::memory_order_acquire);
}

}  // namespace commtap::interpose

// Called by the first-call stub with its slot and its caller's return address; returns where the
// call goes. Until an MPI is found loaded, each call gets the error and the slots stay as they are.
extern "C" [[gnu::visibility("hidden")]] void* commtap_mpi_choose_entries(void** slot,
                                                                          const void* caller) {
  using namespace commtap::interpose;
  std::lock_guard lock(g_choosing);
  if (g_abi.load(std::memory_order_relaxed) == MpiAbi::undecided)
    g_abi.store(decide(caller), std::memory_order_release);
  if (g_abi.load(std::memory_order_relaxed) == MpiAbi::undecided)
    return reinterpret_cast<void*>(&no_mpi_function);
  return __atomic_load_n(slot, __ATOMIC_ACQUIRE);
}

#else  // the wrappers are the exported symbols: MPICH's ABI

namespace commtap::interpose {
MpiAbi mpi_abi() noexcept {
  return MpiAbi::mpich;
}
}  // namespace commtap::interpose

#endif
