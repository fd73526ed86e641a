#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>

#include <array>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "monitor/monitor.hpp"
#include "monitor/thread_state.hpp"

namespace commtap::monitor {

namespace {

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
    const int depth = unw_backtrace(frames, 8);
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
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return site;
  bool in_application = false;
  while (unw_step(&cursor) > 0 && site.frames.size() < kDepth) {
    unw_word_t ip = 0;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    CallSite::Frame frame;
    frame.address = ip;
    frame.module = module_of(reinterpret_cast<void*>(ip));
    if (!in_application && is_library_frame(frame.module)) continue;
    in_application = true;
    char name[256] = {};
    unw_word_t offset = 0;
    if (unw_get_proc_name(&cursor, name, sizeof name, &offset) == 0) {
      frame.symbol = name;
      frame.symbol_offset = offset;
    }
    site.frames.push_back(std::move(frame));
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
