#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <execinfo.h>
#include <libunwind.h>

#include <array>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "monitor/call_sites.hpp"
#include "monitor/optional_library.hpp"
#include "monitor/thread_state.hpp"

namespace commtap::monitor {

namespace {

#define COMMTAP_NAME_OF(symbol) COMMTAP_STRING_OF(symbol)
#define COMMTAP_STRING_OF(symbol) #symbol

// libunwind's local unwinder, opened where the node has it (optional_library.hpp). Without it,
// glibc's backtrace() walks the stack and dladdr names the frames (exported symbols only).
struct LibUnwind {
  OptionalLibrary library{"libunwind.so.8"};
#if defined(__x86_64__)
  decltype(&unw_tdep_getcontext) getcontext =
      library.function<decltype(getcontext)>(COMMTAP_NAME_OF(unw_tdep_getcontext));
#else
  int (*getcontext)(unw_context_t*) = nullptr;  // a macro, not a function, elsewhere
#endif
  decltype(&unw_init_local) init_local =
      library.function<decltype(init_local)>(COMMTAP_NAME_OF(unw_init_local));
  decltype(&unw_step) step = library.function<decltype(step)>(COMMTAP_NAME_OF(unw_step));
  decltype(&unw_get_reg) get_reg =
      library.function<decltype(get_reg)>(COMMTAP_NAME_OF(unw_get_reg));
  decltype(&unw_get_proc_name) get_proc_name =
      library.function<decltype(get_proc_name)>(COMMTAP_NAME_OF(unw_get_proc_name));
  decltype(&unw_backtrace) backtrace =
      library.function<decltype(backtrace)>(COMMTAP_NAME_OF(unw_backtrace));

  bool walks() const {
    return getcontext && init_local && step && get_reg && get_proc_name;
  }
};

const LibUnwind& libunwind() {
  static const LibUnwind* const loaded = new LibUnwind;  // never freed: used until exit
  return *loaded;
}

int short_backtrace(void** frames, int size) {
  const LibUnwind& unwind = libunwind();
  return unwind.backtrace != nullptr ? unwind.backtrace(frames, size) : ::backtrace(frames, size);
}

// Frames in these libraries are the MPI or NCCL library (or commtap) rather than the
// application: a call site is the first frame outside them.
bool is_library_frame(const std::string& module) {
  const std::size_t slash = module.rfind('/');
  const std::string base = slash == std::string::npos ? module : module.substr(slash + 1);
  for (const char* prefix : {"libcommtap", "libmpi", "libpmpi", "libmpich", "libnccl"})
    if (base.rfind(prefix, 0) == 0) return true;
  return false;
}

std::string module_of(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

}  // namespace

struct CallSites::Shared {
  std::mutex mutex;
  std::unordered_map<std::uintptr_t, std::uint32_t> by_key;
  // Return addresses inside an MPI library (a Fortran binding such as mpi_allreduce_): the
  // application's call site is one frame further up and differs from call to call.
  std::unordered_map<std::uintptr_t, bool> indirect;
  std::vector<CallSite> sites;
};

CallSites::CallSites() : shared_(std::make_unique<Shared>()) {}
CallSites::~CallSites() = default;

std::uint32_t CallSites::site_of(const void* return_address) {
  return site_of(return_address, this_thread().sites);
}

// Not in the cache, or called through a binding inside the MPI library (whose entries are kept
// to skip the module lookup, but whose site differs from call to call).
std::uint32_t CallSites::site_of_missed(const void* return_address, ThreadCache& cache) {
  const auto key = reinterpret_cast<std::uintptr_t>(return_address);
  ThreadCache::Entry& entry = cache.entries[(key >> 4) % cache.entries.size()];
  bool indirect = entry.key == key && entry.owner == this && entry.indirect;
  if (!indirect) {
    std::lock_guard lock(shared_->mutex);
    auto found = shared_->indirect.find(key);
    if (found == shared_->indirect.end())
      found = shared_->indirect.emplace(key, is_library_frame(module_of(return_address))).first;
    indirect = found->second;
  }
  std::uintptr_t site_key = key;
  if (indirect) {
    // Called through a binding inside the MPI library: key by the first return address outside
    // the libraries (a short backtrace; Fortran callers pay for it on every call).
    void* frames[8];
    const int depth = short_backtrace(frames, 8);
    for (int i = 0; i < depth; ++i) {
      const auto address = reinterpret_cast<std::uintptr_t>(frames[i]);
      if (address == key) {
        for (int j = i + 1; j < depth; ++j) {
          site_key = reinterpret_cast<std::uintptr_t>(frames[j]);
          std::lock_guard lock(shared_->mutex);
          auto found = shared_->indirect.find(site_key);
          if (found == shared_->indirect.end())
            found =
                shared_->indirect.emplace(site_key, is_library_frame(module_of(frames[j]))).first;
          if (!found->second) break;
        }
        break;
      }
    }
  }

  std::uint32_t site = 0;
  {
    std::lock_guard lock(shared_->mutex);
    auto found = shared_->by_key.find(site_key);
    if (found != shared_->by_key.end()) {
      site = found->second;
    } else {
      site = static_cast<std::uint32_t>(shared_->sites.size() + 1);
      shared_->by_key.emplace(site_key, site);
      shared_->sites.push_back(unwind(site));
    }
  }
  entry = ThreadCache::Entry{key, this, site, indirect};
  return site;
}

CallSite CallSites::unwind(std::uint32_t id) {
  // Once per site: walk the stack with names (unw_get_proc_name reads the symbol tables, so
  // static functions of an unstripped program resolve too), skip the library frames, keep up to
  // kDepth application frames.
  CallSite site;
  site.id = id;
  const LibUnwind& unwind = libunwind();
  bool in_application = false;
  // Keeps an application frame (`name` may be nullptr), skipping the libraries' frames first.
  auto keep = [&](std::uint64_t ip, const char* name, std::uint64_t offset) {
    CallSite::Frame frame;
    frame.address = ip;
    frame.module = module_of(reinterpret_cast<void*>(ip));
    if (!in_application && is_library_frame(frame.module)) return;
    in_application = true;
    if (name != nullptr) {
      frame.symbol = name;
      frame.symbol_offset = offset;
    }
    site.frames.push_back(std::move(frame));
  };
  if (!unwind.walks()) {
    void* frames[kDepth + 32];
    const int depth = ::backtrace(frames, static_cast<int>(std::size(frames)));
    for (int i = 1; i < depth && site.frames.size() < kDepth; ++i) {
      Dl_info info{};
      const bool named = dladdr(frames[i], &info) != 0 && info.dli_sname != nullptr;
      const auto ip = reinterpret_cast<std::uint64_t>(frames[i]);
      keep(ip, named ? info.dli_sname : nullptr,
           named ? ip - reinterpret_cast<std::uint64_t>(info.dli_saddr) : 0);
    }
    return site;
  }
  unw_context_t context;
  unw_cursor_t cursor;
  if (unwind.getcontext(&context) != 0 || unwind.init_local(&cursor, &context) != 0) return site;
  while (unwind.step(&cursor) > 0 && site.frames.size() < kDepth) {
    unw_word_t ip = 0;
    unwind.get_reg(&cursor, UNW_REG_IP, &ip);
    char name[256] = {};
    unw_word_t offset = 0;
    const bool named = unwind.get_proc_name(&cursor, name, sizeof name, &offset) == 0;
    keep(ip, named ? name : nullptr, offset);
  }
  return site;
}

std::vector<CallSite> CallSites::since(std::size_t& cursor) const {
  std::lock_guard lock(shared_->mutex);
  std::vector<CallSite> out(shared_->sites.begin() + static_cast<long>(cursor),
                            shared_->sites.end());
  cursor = shared_->sites.size();
  return out;
}

}  // namespace commtap::monitor
