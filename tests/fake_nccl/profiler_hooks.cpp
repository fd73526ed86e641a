// The fake calls a profiler plugin the way NCCL 2.28.9 does: it loads NCCL_PROFILER_PLUGIN
// (same names, same fallbacks), takes the newest table 2.28 knows (ncclProfiler_v5, else v4 ...
// v1, adapting its events as 2.28's adapters do), calls init per communicator with the same
// arguments and one process-wide activation mask, and emits the same events with the same
// descriptors, parents and states, in the same order and on the same kind of thread:
//   application thread, per operation: GroupApi (+ state 23), CollApi or P2pApi, state 24 at
//     the group's end; at the launch KernelLaunch, Group, Coll/P2p (started and stopped: they
//     mean "enqueued"), then the GroupApi stops;
//   stream worker (NCCL's proxy thread and GPU): KernelCh per channel (GPU timestamps are
//     CLOCK_REALTIME nanoseconds, which is what %globaltimer tracks), and for peers on other
//     hosts (NCCL's network transport) ProxyOp (state 19) and one ProxyStep per chunk, posted up
//     to 8 ahead, with the send (8 at the post; 20, 9 when the data goes out) or receive (10 at
//     the post; 11, 12 at the arrival) states and NCCL's sizes (docs/nccl.md, "What NCCL
//     raises for a network transfer").
// Not emitted: ProxyCtrl and NetPlugin events (the fake has no proxy thread loop or net plugin).
#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>

#include "fake_nccl.hpp"
#include "nccl/datatypes.hpp"
#include "nccl/profiler_abi.hpp"

namespace fake_nccl::profiler {

namespace abi = commtap::nccl::profiler_abi;
namespace v5 = abi::v5;

namespace {
constexpr int kFunctions = static_cast<int>(OpKind::Recv) + 1;
}  // namespace

struct CommContext {
  void* context = nullptr;  // the plugin's, from init
  bool silent = false;      // an old-version plugin whose init failed: 2.28 has no table for it
  std::uint64_t seq[kFunctions] = {};  // Coll seqNumber, per function as NCCL counts them
};

namespace {

// ---- The plugin: loaded at the first comm's init, unloaded after the last one's finalize ---
struct Plugin {
  std::mutex mutex;
  bool failed = false;  // a failed load is never retried, as in NCCL
  void* library = nullptr;
  int users = 0;
  const void* table = nullptr;
};
Plugin& plugin() {
  static auto* instance = new Plugin;
  return *instance;
}
std::atomic<int> version{0};  // of the loaded table; 0: none

// The one activation mask all communicators share: every init writes it through the pointer,
// and NCCL reads it with relaxed loads (once per operation, into the operation).
int activation_mask = 0;
int current_mask() {
  return std::atomic_ref<int>(activation_mask).load(std::memory_order_relaxed);
}

template <int N>
const typename abi::Version<N>::Profiler* table() {
  return static_cast<const typename abi::Version<N>::Profiler*>(plugin().table);
}

int debug_level() {
  static const int level = [] {
    const char* value = std::getenv("NCCL_DEBUG");
    if (!value) return 0;
    if (strcasecmp(value, "VERSION") == 0) return 1;
    if (strcasecmp(value, "WARN") == 0) return 2;
    if (strcasecmp(value, "INFO") == 0) return 3;
    if (strcasecmp(value, "TRACE") == 0) return 5;
    return 0;
  }();
  return level;
}

// NCCL's logger, as handed to the plugin's init.
void log_message(abi::DebugLogLevel level, unsigned long, const char* file, int line,
                 const char* format, ...) {
  if (level > debug_level() || level == abi::kLogNone) return;
  static const char* const kNames[] = {"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"};
  char text[1024];
  va_list arguments;
  va_start(arguments, format);
  std::vsnprintf(text, sizeof text, format, arguments);
  va_end(arguments);
  std::fprintf(stderr, "%d fake_nccl %s %s:%d %s\n", static_cast<int>(getpid()),
               kNames[level <= abi::kLogTrace ? level : 0], file ? file : "?", line, text);
}
#define FAKE_NCCL_LOG(level, ...) \
  log_message(level, abi::log_subsys::kInit, __FILE__, __LINE__, __VA_ARGS__)

// NCCL_PROFILER_PLUGIN: "none" disables; unset loads libnccl-profiler.so; a prefix of
// STATIC_PLUGIN looks in the program itself; anything else is dlopen'ed as given, then (a bare
// name not already lib*.so) as libnccl-profiler-<name>.so.
void* open_library() {
  const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
  if (name && strcasecmp(name, "none") == 0) return nullptr;
  if (!name || !*name) return dlopen("libnccl-profiler.so", RTLD_NOW | RTLD_LOCAL);
  if (strncasecmp(name, "STATIC_PLUGIN", std::strlen(name)) == 0)
    return dlopen(nullptr, RTLD_NOW | RTLD_LOCAL);
  if (void* library = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return library;
  const std::size_t length = std::strlen(name);
  const bool library_form =
      std::strncmp(name, "lib", 3) == 0 && length > 3 && std::strcmp(name + length - 3, ".so") == 0;
  if (std::strchr(name, '/') || library_form) return nullptr;
  const std::string expanded = std::string("libnccl-profiler-") + name + ".so";
  return dlopen(expanded.c_str(), RTLD_NOW | RTLD_LOCAL);
}

// Called with the plugin's mutex held.
bool load(Plugin& loaded) {
  void* library = open_library();
  if (!library) {
    const char* why = dlerror();
    FAKE_NCCL_LOG(abi::kLogInfo, "no profiler plugin loaded (%s)", why ? why : "disabled");
    return false;
  }
  // The versions NCCL 2.28 knows, newest first (it has no v6).
  constexpr int kVersions[] = {5, 4, 3, 2, 1};
  constexpr const char* kSymbols[] = {abi::v5::kSymbol, abi::v4::kSymbol, abi::v3::kSymbol,
                                      abi::v2::kSymbol, abi::v1::kSymbol};
  for (std::size_t i = 0; i < std::size(kVersions); ++i) {
    if (const void* found = dlsym(library, kSymbols[i])) {
      loaded.library = library;
      loaded.table = found;
      version.store(kVersions[i], std::memory_order_relaxed);
      FAKE_NCCL_LOG(abi::kLogInfo, "profiler plugin: %s", kSymbols[i]);
      return true;
    }
  }
  FAKE_NCCL_LOG(abi::kLogInfo, "profiler plugin has no ncclProfiler_v5..v1 symbol");
  dlclose(library);
  return false;
}

// ---- Old tables: what 2.28's adapters make of the v5 events --------------------------------
bool is_api_event(std::uint64_t type) {
  return type & (abi::kGroupApi | abi::kCollApi | abi::kP2pApi | abi::kKernelLaunch);
}

std::optional<abi::v4::Descr> to_v4(const v5::Descr& in) {
  if (is_api_event(in.type)) return std::nullopt;
  abi::v4::Descr out{};
  out.type = static_cast<std::uint8_t>(in.type);
  out.parentObj = in.parentObj;
  out.rank = in.rank;
  if (in.type == abi::kColl) {
    const auto& c = in.coll;
    out.coll = {c.seqNumber, c.func,      c.sendBuff, c.recvBuff, c.count, c.root,
                c.datatype,  c.nChannels, c.nWarps,   c.algo,     c.proto};
    out.parentObj = c.parentGroup;
  } else if (in.type == abi::kP2p) {
    const auto& p = in.p2p;
    out.p2p = {p.func, p.buff, p.datatype, p.count, p.peer, p.nChannels};
    out.parentObj = p.parentGroup;
  } else if (in.type == abi::kProxyOp) {
    out.proxyOp = in.proxyOp;
  } else if (in.type == abi::kProxyStep) {
    out.proxyStep = in.proxyStep;
  } else if (in.type == abi::kKernelCh) {
    out.kernelCh = in.kernelCh;
  }
  return out;
}

std::optional<abi::v3::Descr> to_v3(const v5::Descr& in) {
  if (is_api_event(in.type)) return std::nullopt;
  abi::v3::Descr out{};
  out.type = static_cast<std::uint8_t>(in.type);
  out.parentObj = in.parentObj;
  out.rank = in.rank;
  if (in.type == abi::kColl) {
    const auto& c = in.coll;
    out.coll = {nullptr, 0,          c.seqNumber, c.func,   c.sendBuff, c.recvBuff, c.count,
                c.root,  c.datatype, c.nChannels, c.nWarps, c.algo,     c.proto};
    out.parentObj = c.parentGroup;
  } else if (in.type == abi::kP2p) {
    const auto& p = in.p2p;
    out.p2p = {nullptr, 0, p.func, p.buff, p.datatype, p.count, p.peer};
    out.parentObj = p.parentGroup;
  } else if (in.type == abi::kProxyOp) {
    out.proxyOp = in.proxyOp;
  } else if (in.type == abi::kProxyStep) {
    out.proxyStep = in.proxyStep;
  } else if (in.type == abi::kKernelCh) {
    out.kernelCh = {in.kernelCh.channelId};
  }
  return out;
}

std::optional<abi::v2::Descr> to_v2(const v5::Descr& in) {
  if (is_api_event(in.type) || in.type == abi::kKernelCh || in.type == abi::kNetPlugin)
    return std::nullopt;
  const abi::v3::Descr v3 = *to_v3(in);
  abi::v2::Descr out{};
  out.type = v3.type;
  out.parentObj = v3.parentObj;
  out.rank = v3.rank;
  if (in.type == abi::kColl) {
    const auto& c = v3.coll;
    out.coll = {c.name, c.commHash, c.seqNumber, c.func,         c.sendBuff, c.recvBuff, c.count,
                c.root, c.datatype, 0,           c.nMaxChannels, c.nWarps,   c.algo,     c.proto};
  } else if (in.type == abi::kP2p) {
    out.p2p = v3.p2p;
  } else if (in.type == abi::kProxyOp) {
    out.proxyOp = v3.proxyOp;
  } else if (in.type == abi::kProxyStep) {
    out.proxyStep = v3.proxyStep;
  }
  return out;
}

// v1 carries codes; 2.28 maps unknown names to Send, Float64, PAT and SIMPLE.
std::uint8_t code_of(const char* name, std::initializer_list<const char*> names,
                     std::uint8_t otherwise) {
  std::uint8_t code = 0;
  for (const char* known : names) {
    if (name && std::strcmp(name, known) == 0) return code;
    ++code;
  }
  return otherwise;
}

std::optional<abi::v1::Descr> to_v1(const v5::Descr& in) {
  const std::optional<abi::v2::Descr> v2 = to_v2(in);
  if (!v2) return std::nullopt;
  abi::v1::Descr out{};
  out.type = v2->type;
  out.parentObj = v2->parentObj;
  out.rank = v2->rank;
  const auto func_code = [](const char* func) {
    return code_of(func,
                   {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv",
                    "Send", "Recv"},
                   abi::v1::kFuncSend);
  };
  const auto type_code = [](const char* datatype) -> std::uint8_t {
    for (int code = 0; code < commtap::nccl::kDatatypeCount; ++code)
      if (datatype != nullptr && commtap::nccl::kDatatypes[code].name == datatype)
        return static_cast<std::uint8_t>(code);
    return ncclFloat64;
  };
  if (in.type == abi::kColl) {
    const auto& c = v2->coll;
    out.coll.name = c.name;
    out.coll.commHash = c.commHash;
    out.coll.seqNumber = c.seqNumber;
    out.coll.func = func_code(c.func);
    out.coll.sendBuff = c.sendBuff;
    out.coll.recvBuff = c.recvBuff;
    out.coll.count = c.count;
    out.coll.root = c.root;
    out.coll.datatype = type_code(c.datatype);
    out.coll.nMaxChannels = c.nMaxChannels;
    out.coll.nWarps = c.nWarps;
    out.coll.algo = code_of(
        c.algo, {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"},
        abi::v1::kAlgoPat);
    out.coll.proto = code_of(c.proto, {"LL", "LL128", "SIMPLE"}, abi::v1::kProtoSimple);
  } else if (in.type == abi::kP2p) {
    const auto& p = v2->p2p;
    out.p2p = {p.name,  p.commHash, func_code(p.func), p.buff, type_code(p.datatype),
               p.count, p.peer};
  } else if (in.type == abi::kProxyOp) {
    out.proxyOp = v2->proxyOp;
  } else if (in.type == abi::kProxyStep) {
    out.proxyStep = v2->proxyStep;
  }
  return out;
}

template <int N, class Descr>
void* start_with(void* context, std::optional<Descr> descr) {
  void* handle = nullptr;
  if (descr) table<N>()->startEvent(context, &handle, &*descr);
  return handle;
}

void* start_event(void* context, v5::Descr descr) {
  switch (version.load(std::memory_order_relaxed)) {
    case 5: {
      void* handle = nullptr;
      table<5>()->startEvent(context, &handle, &descr);
      return handle;
    }
    case 4:
      return start_with<4>(context, to_v4(descr));
    case 3:
      return start_with<3>(context, to_v3(descr));
    case 2:
      return start_with<2>(context, to_v2(descr));
    case 1:
      return start_with<1>(context, to_v1(descr));
    default:
      return nullptr;
  }
}

void stop_event(void* handle) {
  if (!handle) return;
  switch (version.load(std::memory_order_relaxed)) {
    case 5:
      table<5>()->stopEvent(handle);
      break;
    case 4:
      table<4>()->stopEvent(handle);
      break;
    case 3:
      table<3>()->stopEvent(handle);
      break;
    case 2:
      table<2>()->stopEvent(handle);
      break;
    case 1:
      table<1>()->stopEvent(handle);
      break;
  }
}

template <int N>
void record_old(void* handle, abi::EventState state, const v5::StateArgs* args) {
  // 2.28's v1-v3 adapters pass the proxy-step states (arguments zeroed) and the ProxyCtrl ones.
  if (state < abi::kProxyStepSendGpuWait || state > abi::kProxyCtrlAppendEnd) return;
  abi::v1::StateArgs old{};
  if (state >= abi::kProxyCtrlIdle && args) old.proxyCtrl = args->proxyCtrl;
  table<N>()->recordEventState(handle, state, &old);
}

void record_state(void* handle, abi::EventState state, const v5::StateArgs* args) {
  if (!handle) return;
  switch (version.load(std::memory_order_relaxed)) {
    case 5:
      table<5>()->recordEventState(handle, state, const_cast<v5::StateArgs*>(args));
      break;
    case 4:
      // The v4 adapter drops the v5 group API states.
      if (state >= abi::kProxyStepSendGpuWait && state <= abi::kKernelChStop) {
        abi::v4::StateArgs copy = args ? *args : abi::v4::StateArgs{};
        table<4>()->recordEventState(handle, state, &copy);
      }
      break;
    case 3:
      record_old<3>(handle, state, args);
      break;
    case 2:
      record_old<2>(handle, state, args);
      break;
    case 1:
      record_old<1>(handle, state, args);
      break;
  }
}

// ---- What NCCL puts in the descriptors -----------------------------------------------------
// A lower-level event bit makes NCCL start the events above it (2.28's exact tests).
constexpr int kBelowProxyOp = abi::kProxyOp | abi::kProxyStep | abi::kNetPlugin;
constexpr int kBelowTask = kBelowProxyOp | abi::kKernelCh;
constexpr int kWantsColl = abi::kColl | kBelowTask;
constexpr int kWantsP2p = abi::kP2p | kBelowTask;
constexpr int kWantsCollApi = abi::kCollApi | kWantsColl;
constexpr int kWantsP2pApi = abi::kP2pApi | kWantsP2p;
constexpr int kWantsGroup = abi::kGroup | abi::kColl | abi::kP2p | kBelowTask;
constexpr int kWantsGroupApi =
    abi::kGroupApi | abi::kCollApi | abi::kP2pApi | abi::kKernelLaunch | kWantsGroup;
constexpr int kWantsProxyStep = abi::kProxyStep | abi::kNetPlugin;

const char* datatype_name(ncclDataType_t type) {
  // NCCL's table has no name for ncclUint8.
  if (type == ncclUint8 || type < 0 || type >= commtap::nccl::kDatatypeCount) return "Unknown";
  return commtap::nccl::kDatatypes[type].name.data();
}

std::uint64_t realtime_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(now.tv_nsec);
}

// The comm's plugin context when events may be emitted for it.
CommContext* live(const Comm& comm) {
  CommContext* context = comm.profiler;
  return context && !context->silent ? context : nullptr;
}

// Same-host peers talk through NCCL's P2P or SHM transports, which have no proxy events;
// FAKE_NCCL_PROXY_EVENTS=all gives them the network's anyway (for one-host tests).
bool proxied(const Comm& comm, int peer) {
  static const bool all = [] {
    const char* value = std::getenv("FAKE_NCCL_PROXY_EVENTS");
    return value && std::strcmp(value, "all") == 0;
  }();
  return all || comm.node_of[static_cast<std::size_t>(peer)] !=
                    comm.node_of[static_cast<std::size_t>(comm.rank)];
}

// The group API state of the application thread (NCCL keeps it thread-local too): the
// GroupApi event of the current outermost group, shared by all comms in it.
struct ApiState {
  int depth = 0;
  void* group_api = nullptr;
};
thread_local ApiState api;

}  // namespace

void comm_init(Comm& comm) {
  Plugin& loaded = plugin();
  {
    std::lock_guard lock(loaded.mutex);
    if (loaded.failed) return;
    if (loaded.users == 0 && !load(loaded)) {
      loaded.failed = true;
      return;
    }
    ++loaded.users;
  }
  // Several comms may be in init at once, as in NCCL.
  auto* context = new CommContext;
  const char* name = comm.name.empty() ? nullptr : comm.name.c_str();
  abi::Result result = abi::kSuccess;
  const int loaded_version = version.load(std::memory_order_relaxed);
  switch (loaded_version) {
    case 5:
      result = table<5>()->init(&context->context, comm.hash, &activation_mask, name, comm.nnodes,
                                comm.nranks, comm.rank, log_message);
      break;
    case 4:
      result = table<4>()->init(&context->context, &activation_mask, name, comm.hash, comm.nnodes,
                                comm.nranks, comm.rank, log_message);
      break;
    case 3:
      result = table<3>()->init(&context->context, &activation_mask);
      break;
    case 2:
      result = table<2>()->init(&context->context, &activation_mask);
      break;
    case 1:
      result = table<1>()->init(&context->context, &activation_mask);
      break;
  }
  if (result != abi::kSuccess) {
    // 2.28 goes on with the plugin loaded (a v5 one still gets events, context as it was
    // left); an older one's adapter never got its entry points.
    FAKE_NCCL_LOG(abi::kLogInfo, "profiler init failed (%d): Continue without profiler",
                  static_cast<int>(result));
    context->silent = loaded_version < 5;
  }
  comm.profiler = context;
}

void comm_finalize(Comm& comm) {
  CommContext* context = comm.profiler;
  if (!context) return;
  comm.profiler = nullptr;
  switch (version.load(std::memory_order_relaxed)) {
    case 5:
      if (context->context) table<5>()->finalize(context->context);
      break;
    case 4:
      if (context->context) table<4>()->finalize(context->context);
      break;
    case 3:
      if (context->context) table<3>()->finalize(context->context);
      break;
    case 2:
      if (context->context) table<2>()->finalize(context->context);
      break;
    case 1:
      if (context->context) table<1>()->finalize(context->context);
      break;
  }
  delete context;
  Plugin& loaded = plugin();
  std::lock_guard lock(loaded.mutex);
  if (--loaded.users > 0) return;
  // The last comm unloads it; the next init loads it afresh, as NCCL does.
  version.store(0, std::memory_order_relaxed);
  dlclose(loaded.library);
  loaded.library = nullptr;
  loaded.table = nullptr;
}

void api_op_start(Op& op, int group_depth) {
  CommContext* context = live(*op.comm);
  if (!context) return;
  op.events.mask = current_mask();
  if (api.depth == 0) {
    api.group_api = nullptr;
    if (op.events.mask & kWantsGroupApi) {
      v5::Descr descr{};
      descr.type = abi::kGroupApi;
      descr.groupApi.graphCaptured = false;
      descr.groupApi.groupDepth = group_depth;
      api.group_api = start_event(context->context, descr);
      record_state(api.group_api, abi::kGroupStartApiStop, nullptr);
    }
    api.depth = group_depth;
  } else {
    ++api.depth;
  }
  op.events.group_api = api.group_api;
  v5::Descr descr{};
  descr.parentObj = api.group_api;
  if (is_p2p(op.kind)) {
    if (!(op.events.mask & kWantsP2pApi)) return;
    descr.type = abi::kP2pApi;
    descr.p2pApi = {op_name(op.kind), op.count, datatype_name(op.type), op.stream, false};
  } else {
    if (!(op.events.mask & kWantsCollApi)) return;
    descr.type = abi::kCollApi;
    descr.collApi = {op_name(op.kind),     op.count,  datatype_name(op.type),
                     std::max(op.root, 0), op.stream, false};
  }
  op.events.api = start_event(context->context, descr);
}

void api_op_stop(Op& op) {
  stop_event(op.events.api);
}

bool api_group_end() {
  if (api.depth == 0 || --api.depth > 0) return false;
  record_state(api.group_api, abi::kGroupEndApiStart, nullptr);
  return true;
}

void api_group_stop() {
  stop_event(api.group_api);
  api.group_api = nullptr;
}

void plan_launched(Comm& comm, std::span<Op* const> ops) {
  CommContext* context = live(comm);
  if (!context || ops.empty()) return;
  int mask = 0;  // the plan's: its first task's that has one
  for (const Op* op : ops)
    if ((mask = op->events.mask) != 0) break;
  if (mask & abi::kKernelLaunch) {
    v5::Descr launch{};
    launch.type = abi::kKernelLaunch;
    launch.parentObj = ops.front()->events.group_api;
    launch.kernelLaunch.stream = ops.front()->stream;
    stop_event(start_event(context->context, launch));
  }
  void* group = nullptr;
  if (mask & kWantsGroup) {
    v5::Descr descr{};
    descr.type = abi::kGroup;
    group = start_event(context->context, descr);
  }
  for (Op* op : ops) {
    v5::Descr descr{};
    descr.parentObj = op->events.api;
    descr.rank = comm.rank;
    if (is_p2p(op->kind)) {
      if (!(op->events.mask & kWantsP2p)) continue;
      descr.type = abi::kP2p;
      descr.p2p = {op_name(op->kind),
                   op->kind == OpKind::Send ? const_cast<void*>(op->send) : op->recv,
                   datatype_name(op->type),
                   op->count,
                   op->root,
                   1,
                   group};
    } else {
      std::uint64_t& seq = context->seq[static_cast<int>(op->kind)];
      if (!(op->events.mask & kWantsColl)) {
        ++seq;
        continue;
      }
      // NCCL counts AllGather and Broadcast in bytes.
      const bool in_bytes = op->kind == OpKind::AllGather || op->kind == OpKind::Broadcast;
      descr.type = abi::kColl;
      descr.coll = {seq++,
                    op_name(op->kind),
                    op->send,
                    op->recv,
                    in_bytes ? op->count * type_size(op->type) : op->count,
                    std::max(op->root, 0),
                    in_bytes ? "ncclInt8" : datatype_name(op->type),
                    1,   // one channel
                    16,  // the warps of NCCL's ring kernel (512 threads)
                    "RING",
                    "SIMPLE",
                    group};
    }
    op->events.task = start_event(context->context, descr);
  }
  // Coll and P2p events end when the work is enqueued; their children come later.
  for (Op* op : ops) stop_event(op->events.task);
  stop_event(group);
}

void kernel_channel_start(Op& op, int channel) {
  CommContext* context = live(*op.comm);
  if (!context || !(op.events.mask & abi::kKernelCh)) return;
  v5::Descr descr{};
  descr.type = abi::kKernelCh;
  descr.parentObj = op.events.task;
  descr.kernelCh.channelId = static_cast<std::uint8_t>(channel);
  descr.kernelCh.pTimer = realtime_ns();
  op.events.kernel = start_event(context->context, descr);
}

void kernel_channel_stop(Op& op, int) {
  if (!op.events.kernel) return;
  v5::StateArgs args{};
  args.kernelCh.pTimer = realtime_ns();
  record_state(op.events.kernel, abi::kKernelChStop, &args);
  stop_event(op.events.kernel);
  op.events.kernel = nullptr;
}

namespace {

// NCCL's sub->transSize lives in a pooled ncclProxyArgs and is never reset: an op's first
// states carry what an earlier op left there. The fake keeps it per thread and direction.
thread_local std::size_t previous_size[2] = {};

// Starts steps while the window allows (the net transport's "post" branch): send: start and
// SendGPUWait; receive: start and RecvWait (the fake's receive is always posted at once). A
// step is started even when the ProxyOp was declined (null parent); its states are recorded
// only under a live ProxyOp, each with the op's current transSize.
void post_steps(ProxyOp& proxy) {
  if (!proxy.profiled || !(proxy.op->events.mask & kWantsProxyStep)) return;
  CommContext* context = live(*proxy.op->comm);
  if (!context) return;
  while (proxy.posted < proxy.nsteps && proxy.posted < proxy.done + ProxyOp::kWindow) {
    v5::Descr descr{};
    descr.type = abi::kProxyStep;
    descr.parentObj = proxy.handle;
    descr.rank = proxy.op->comm->rank;
    descr.proxyStep.step = proxy.posted;
    void* handle = start_event(context->context, descr);
    proxy.steps[proxy.posted % ProxyOp::kWindow] = handle;
    ++proxy.posted;
    if (!handle || !proxy.handle) continue;
    v5::StateArgs args{};
    args.proxyStep.transSize = proxy.last_size;
    record_state(handle, proxy.send ? abi::kProxyStepSendGpuWait : abi::kProxyStepRecvWait, &args);
  }
}

}  // namespace

void proxy_op_start(ProxyOp& proxy) {
  Op& op = *proxy.op;
  CommContext* context = live(*op.comm);
  if (!context || !proxied(*op.comm, proxy.peer)) return;
  proxy.profiled = true;
  if (!(op.events.mask & kBelowProxyOp)) return;
  proxy.last_size = previous_size[proxy.send ? 1 : 0];
  v5::Descr descr{};
  descr.type = abi::kProxyOp;
  descr.parentObj = op.events.task;
  descr.rank = op.comm->rank;
  descr.proxyOp = {getpid(),
                   static_cast<std::uint8_t>(proxy.channel),
                   proxy.peer,
                   proxy.nsteps,
                   static_cast<int>(proxy.chunk),
                   proxy.send ? 1 : 0};
  proxy.handle = start_event(context->context, descr);
  // The first progress pass: every sub "in progress", then its first steps posted.
  if (proxy.handle) {
    const v5::StateArgs zero{};
    record_state(proxy.handle, abi::kProxyOpInProgress, &zero);
  }
  post_steps(proxy);
}

void proxy_op_stop(ProxyOp& proxy) {
  if (proxy.profiled) previous_size[proxy.send ? 1 : 0] = proxy.last_size;
  stop_event(proxy.handle);
  proxy.handle = nullptr;
}

void* proxy_step_ready(ProxyOp& proxy, int step, std::size_t bytes) {
  if (!proxy.profiled || step < proxy.done || step >= proxy.posted) return nullptr;
  void* handle = proxy.steps[step % ProxyOp::kWindow];
  if (!handle || !proxy.handle || !proxy.send) return handle;
  // The GPU's data is in the buffer (the peer's receive is posted: the socket takes it), then
  // the isend is posted; transSize is this step's only from SendWait on.
  v5::StateArgs args{};
  args.proxyStep.transSize = proxy.last_size;
  record_state(handle, abi::kProxyStepSendPeerWait, &args);
  proxy.last_size = args.proxyStep.transSize = bytes;
  record_state(handle, abi::kProxyStepSendWait, &args);
  return handle;
}

void proxy_step_transmitted(ProxyOp& proxy, void* step, std::size_t bytes) {
  if (!step || !proxy.handle || proxy.send) return;
  v5::StateArgs args{};
  proxy.last_size = args.proxyStep.transSize = bytes;
  record_state(step, abi::kProxyStepRecvFlushWait, &args);
  record_state(step, abi::kProxyStepRecvGpuWait, &args);
}

void proxy_step_stop(ProxyOp& proxy, void* step) {
  stop_event(step);
  if (!proxy.profiled || proxy.done >= proxy.posted) return;
  proxy.steps[proxy.done % ProxyOp::kWindow] = nullptr;
  ++proxy.done;
  post_steps(proxy);
}

}  // namespace fake_nccl::profiler
