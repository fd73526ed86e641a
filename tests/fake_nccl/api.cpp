// The fake's exported API. Like NCCL (>= 2.16.2) every function is a strong pnccl* definition
// with a weak nccl* alias, so that a preloaded profiler such as commtap can define nccl* and
// still reach the library through pnccl*. Nothing here calls an nccl* or pnccl* function:
// internal work goes straight to fake_nccl::, so every count below is an application's call.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "fake_nccl.hpp"

#define FAKE_NCCL_EXPORT extern "C" __attribute__((visibility("default")))
// nccl.h declares both names; this makes nccl<Name> a weak alias of pnccl<Name>.
#define FAKE_NCCL_WEAK_ALIAS(name)                                                   \
  extern "C" __attribute__((visibility("default"))) decltype(pnccl##name) nccl##name \
      __attribute__((weak, alias("pnccl" #name)));

namespace {

// Every API function once: the names fake_nccl_calls() answers for.
// clang-format off
#define FAKE_NCCL_FUNCTIONS(X) \
  X(GetVersion) X(GetUniqueId) X(CommInitRank) X(CommInitRankConfig) X(CommInitRankScalable) \
  X(CommInitAll) X(CommSplit) X(CommShrink) X(CommFinalize) X(CommDestroy) X(CommAbort) \
  X(CommRevoke) X(CommCount) X(CommUserRank) X(CommCuDevice) X(CommGetAsyncError) \
  X(GetErrorString) X(GetLastError) X(CommRegister) X(CommDeregister) X(MemAlloc) X(MemFree) \
  X(AllReduce) X(Broadcast) X(Bcast) X(Reduce) X(AllGather) X(ReduceScatter) X(AlltoAll) \
  X(Gather) X(Scatter) X(Send) X(Recv) X(GroupStart) X(GroupEnd)
// clang-format on

enum class Fn {
#define FAKE_NCCL_ENUMERATOR(name) name,
  FAKE_NCCL_FUNCTIONS(FAKE_NCCL_ENUMERATOR)
#undef FAKE_NCCL_ENUMERATOR
      Count
};

constexpr const char* kNames[] = {
#define FAKE_NCCL_NAME(name) "nccl" #name,
    FAKE_NCCL_FUNCTIONS(FAKE_NCCL_NAME)
#undef FAKE_NCCL_NAME
};

std::atomic<int> calls[static_cast<int>(Fn::Count)];

void count_call(Fn function) {
  calls[static_cast<int>(function)].fetch_add(1, std::memory_order_relaxed);
}

using fake_nccl::OpKind;

// The application thread's handle on a comm for the duration of a call.
ncclResult_t with_comm(ncclComm_t handle, fake_nccl::CommRef* comm) {
  *comm = fake_nccl::retain(handle);
  return *comm ? ncclSuccess : fake_nccl::fail(ncclInvalidArgument, "invalid communicator");
}

}  // namespace

// ---- Counters and streams (the fake's own functions) ---------------------------------------
// How many times the application called nccl<Name> (or pnccl<Name>).
FAKE_NCCL_EXPORT int fake_nccl_calls(const char* name) {
  for (int i = 0; i < static_cast<int>(Fn::Count); ++i)
    if (std::strcmp(kNames[i], name) == 0) return calls[i].load(std::memory_order_relaxed);
  return 0;
}

// cudaStreamSynchronize for the fake's streams: 0 once the stream's work has run, nonzero if
// some of it failed since the last call.
FAKE_NCCL_EXPORT int fakeStreamSynchronize(void* stream) {
  return fake_nccl::stream_synchronize(stream);
}

// cudaStreamQuery: 0 when the stream's work has run, 1 while some is pending.
FAKE_NCCL_EXPORT int fakeStreamQuery(void* stream) {
  return fake_nccl::stream_query(stream);
}

// ---- Library and communicators ------------------------------------------------------------
FAKE_NCCL_EXPORT ncclResult_t pncclGetVersion(int* version) {
  count_call(Fn::GetVersion);
  if (!version) return fake_nccl::fail(ncclInvalidArgument, "version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
FAKE_NCCL_WEAK_ALIAS(GetVersion)

FAKE_NCCL_EXPORT ncclResult_t pncclGetUniqueId(ncclUniqueId* id) {
  count_call(Fn::GetUniqueId);
  if (!id) return fake_nccl::fail(ncclInvalidArgument, "uniqueId is NULL");
  return fake_nccl::make_unique_id(id);
}
FAKE_NCCL_WEAK_ALIAS(GetUniqueId)

FAKE_NCCL_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                                int rank) {
  count_call(Fn::CommInitRank);
  return fake_nccl::init_rank(comm, nranks, id, rank, nullptr);
}
FAKE_NCCL_WEAK_ALIAS(CommInitRank)

// A nonblocking config is honoured minimally: the comm is complete (ncclSuccess) on return.
FAKE_NCCL_EXPORT ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                                      int rank, ncclConfig_t* config) {
  count_call(Fn::CommInitRankConfig);
  return fake_nccl::init_rank(comm, nranks, id, rank, config);
}
FAKE_NCCL_WEAK_ALIAS(CommInitRankConfig)

// All ids name the same job; the first one's root serves it.
FAKE_NCCL_EXPORT ncclResult_t pncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank,
                                                        int nId, ncclUniqueId* ids,
                                                        ncclConfig_t* config) {
  count_call(Fn::CommInitRankScalable);
  if (nId < 1 || !ids) return fake_nccl::fail(ncclInvalidArgument, "%d unique ids", nId);
  return fake_nccl::init_rank(comm, nranks, ids[0], rank, config);
}
FAKE_NCCL_WEAK_ALIAS(CommInitRankScalable)

FAKE_NCCL_EXPORT ncclResult_t pncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
  count_call(Fn::CommInitAll);
  return fake_nccl::init_all(comms, ndev);
}
FAKE_NCCL_WEAK_ALIAS(CommInitAll)

FAKE_NCCL_EXPORT ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key,
                                             ncclComm_t* newcomm, ncclConfig_t* config) {
  count_call(Fn::CommSplit);
  fake_nccl::CommRef parent;
  if (ncclResult_t result = with_comm(comm, &parent); result != ncclSuccess) return result;
  return fake_nccl::split(*parent, color, key, newcomm, config);
}
FAKE_NCCL_WEAK_ALIAS(CommSplit)

FAKE_NCCL_EXPORT ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList,
                                              int excludeRanksCount, ncclComm_t* newcomm,
                                              ncclConfig_t* config, int shrinkFlags) {
  count_call(Fn::CommShrink);
  fake_nccl::CommRef parent;
  if (ncclResult_t result = with_comm(comm, &parent); result != ncclSuccess) return result;
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
    return fake_nccl::fail(ncclInvalidArgument, "excluded ranks list");
  return fake_nccl::shrink(
      *parent, std::span<const int>(excludeRanksList, static_cast<std::size_t>(excludeRanksCount)),
      newcomm, config, shrinkFlags);
}
FAKE_NCCL_WEAK_ALIAS(CommShrink)

FAKE_NCCL_EXPORT ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  count_call(Fn::CommFinalize);
  fake_nccl::CommRef target;
  if (ncclResult_t result = with_comm(comm, &target); result != ncclSuccess) return result;
  return fake_nccl::finalize(*target);
}
FAKE_NCCL_WEAK_ALIAS(CommFinalize)

FAKE_NCCL_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  count_call(Fn::CommDestroy);
  if (!comm) return ncclSuccess;
  return fake_nccl::destroy(reinterpret_cast<fake_nccl::Comm*>(comm));
}
FAKE_NCCL_WEAK_ALIAS(CommDestroy)

FAKE_NCCL_EXPORT ncclResult_t pncclCommAbort(ncclComm_t comm) {
  count_call(Fn::CommAbort);
  return fake_nccl::abort_comm(reinterpret_cast<fake_nccl::Comm*>(comm));
}
FAKE_NCCL_WEAK_ALIAS(CommAbort)

FAKE_NCCL_EXPORT ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  count_call(Fn::CommRevoke);
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return fake_nccl::fail(ncclInvalidArgument, "revokeFlags %d", revokeFlags);
  fake_nccl::CommRef target;
  if (ncclResult_t result = with_comm(comm, &target); result != ncclSuccess) return result;
  return fake_nccl::revoke(*target);
}
FAKE_NCCL_WEAK_ALIAS(CommRevoke)

FAKE_NCCL_EXPORT ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  count_call(Fn::CommCount);
  fake_nccl::CommRef target;
  if (ncclResult_t result = with_comm(comm, &target); result != ncclSuccess) return result;
  if (!count) return fake_nccl::fail(ncclInvalidArgument, "count is NULL");
  *count = target->nranks;
  return ncclSuccess;
}
FAKE_NCCL_WEAK_ALIAS(CommCount)

FAKE_NCCL_EXPORT ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  count_call(Fn::CommUserRank);
  fake_nccl::CommRef target;
  if (ncclResult_t result = with_comm(comm, &target); result != ncclSuccess) return result;
  if (!rank) return fake_nccl::fail(ncclInvalidArgument, "rank is NULL");
  *rank = target->rank;
  return ncclSuccess;
}
FAKE_NCCL_WEAK_ALIAS(CommUserRank)

// Every rank "has" device 0: one GPU per process, as on the machines the fake stands in for.
FAKE_NCCL_EXPORT ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  count_call(Fn::CommCuDevice);
  fake_nccl::CommRef target;
  if (ncclResult_t result = with_comm(comm, &target); result != ncclSuccess) return result;
  if (!device) return fake_nccl::fail(ncclInvalidArgument, "device is NULL");
  *device = 0;
  return ncclSuccess;
}
FAKE_NCCL_WEAK_ALIAS(CommCuDevice)

FAKE_NCCL_EXPORT ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  count_call(Fn::CommGetAsyncError);
  fake_nccl::CommRef target;
  if (ncclResult_t result = with_comm(comm, &target); result != ncclSuccess) return result;
  if (!asyncError) return fake_nccl::fail(ncclInvalidArgument, "asyncError is NULL");
  *asyncError = fake_nccl::async_error(*target);
  return ncclSuccess;
}
FAKE_NCCL_WEAK_ALIAS(CommGetAsyncError)

FAKE_NCCL_EXPORT const char* pncclGetErrorString(ncclResult_t result) {
  count_call(Fn::GetErrorString);
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}
FAKE_NCCL_WEAK_ALIAS(GetErrorString)

FAKE_NCCL_EXPORT const char* pncclGetLastError(ncclComm_t) {
  count_call(Fn::GetLastError);
  return fake_nccl::last_error();
}
FAKE_NCCL_WEAK_ALIAS(GetLastError)

// Host memory stands in for device memory: registration has nothing to do.
FAKE_NCCL_EXPORT ncclResult_t pncclCommRegister(const ncclComm_t, void* buff, size_t,
                                                void** handle) {
  count_call(Fn::CommRegister);
  if (!handle) return fake_nccl::fail(ncclInvalidArgument, "handle is NULL");
  *handle = buff;
  return ncclSuccess;
}
FAKE_NCCL_WEAK_ALIAS(CommRegister)

FAKE_NCCL_EXPORT ncclResult_t pncclCommDeregister(const ncclComm_t, void*) {
  count_call(Fn::CommDeregister);
  return ncclSuccess;
}
FAKE_NCCL_WEAK_ALIAS(CommDeregister)

FAKE_NCCL_EXPORT ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  count_call(Fn::MemAlloc);
  if (!ptr) return fake_nccl::fail(ncclInvalidArgument, "ptr is NULL");
  *ptr = std::malloc(size);
  return *ptr || size == 0 ? ncclSuccess : fake_nccl::fail(ncclSystemError, "out of memory");
}
FAKE_NCCL_WEAK_ALIAS(MemAlloc)

FAKE_NCCL_EXPORT ncclResult_t pncclMemFree(void* ptr) {
  count_call(Fn::MemFree);
  std::free(ptr);
  return ncclSuccess;
}
FAKE_NCCL_WEAK_ALIAS(MemFree)

// ---- Collectives and point-to-point -------------------------------------------------------
FAKE_NCCL_EXPORT ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, ncclRedOp_t op,
                                             ncclComm_t comm, cudaStream_t stream) {
  count_call(Fn::AllReduce);
  return fake_nccl::enqueue(OpKind::AllReduce, sendbuff, recvbuff, count, datatype, op, -1, comm,
                            stream);
}
FAKE_NCCL_WEAK_ALIAS(AllReduce)

FAKE_NCCL_EXPORT ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, int root, ncclComm_t comm,
                                             cudaStream_t stream) {
  count_call(Fn::Broadcast);
  return fake_nccl::enqueue(OpKind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root,
                            comm, stream);
}
FAKE_NCCL_WEAK_ALIAS(Broadcast)

FAKE_NCCL_EXPORT ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype,
                                         int root, ncclComm_t comm, cudaStream_t stream) {
  count_call(Fn::Bcast);
  return fake_nccl::enqueue(OpKind::Broadcast, buff, buff, count, datatype, ncclSum, root, comm,
                            stream);
}
FAKE_NCCL_WEAK_ALIAS(Bcast)

FAKE_NCCL_EXPORT ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, ncclRedOp_t op, int root,
                                          ncclComm_t comm, cudaStream_t stream) {
  count_call(Fn::Reduce);
  return fake_nccl::enqueue(OpKind::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm,
                            stream);
}
FAKE_NCCL_WEAK_ALIAS(Reduce)

FAKE_NCCL_EXPORT ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                             ncclDataType_t datatype, ncclComm_t comm,
                                             cudaStream_t stream) {
  count_call(Fn::AllGather);
  return fake_nccl::enqueue(OpKind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, -1,
                            comm, stream);
}
FAKE_NCCL_WEAK_ALIAS(AllGather)

FAKE_NCCL_EXPORT ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff,
                                                 size_t recvcount, ncclDataType_t datatype,
                                                 ncclRedOp_t op, ncclComm_t comm,
                                                 cudaStream_t stream) {
  count_call(Fn::ReduceScatter);
  return fake_nccl::enqueue(OpKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, -1,
                            comm, stream);
}
FAKE_NCCL_WEAK_ALIAS(ReduceScatter)

FAKE_NCCL_EXPORT ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclComm_t comm,
                                            cudaStream_t stream) {
  count_call(Fn::AlltoAll);
  return fake_nccl::enqueue(OpKind::AlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, -1,
                            comm, stream);
}
FAKE_NCCL_WEAK_ALIAS(AlltoAll)

FAKE_NCCL_EXPORT ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, int root, ncclComm_t comm,
                                          cudaStream_t stream) {
  count_call(Fn::Gather);
  return fake_nccl::enqueue(OpKind::Gather, sendbuff, recvbuff, count, datatype, ncclSum, root,
                            comm, stream);
}
FAKE_NCCL_WEAK_ALIAS(Gather)

FAKE_NCCL_EXPORT ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, int root, ncclComm_t comm,
                                           cudaStream_t stream) {
  count_call(Fn::Scatter);
  return fake_nccl::enqueue(OpKind::Scatter, sendbuff, recvbuff, count, datatype, ncclSum, root,
                            comm, stream);
}
FAKE_NCCL_WEAK_ALIAS(Scatter)

FAKE_NCCL_EXPORT ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                        int peer, ncclComm_t comm, cudaStream_t stream) {
  count_call(Fn::Send);
  return fake_nccl::enqueue(OpKind::Send, sendbuff, nullptr, count, datatype, ncclSum, peer, comm,
                            stream);
}
FAKE_NCCL_WEAK_ALIAS(Send)

FAKE_NCCL_EXPORT ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype,
                                        int peer, ncclComm_t comm, cudaStream_t stream) {
  count_call(Fn::Recv);
  return fake_nccl::enqueue(OpKind::Recv, nullptr, recvbuff, count, datatype, ncclSum, peer, comm,
                            stream);
}
FAKE_NCCL_WEAK_ALIAS(Recv)

FAKE_NCCL_EXPORT ncclResult_t pncclGroupStart() {
  count_call(Fn::GroupStart);
  return fake_nccl::group_start();
}
FAKE_NCCL_WEAK_ALIAS(GroupStart)

FAKE_NCCL_EXPORT ncclResult_t pncclGroupEnd() {
  count_call(Fn::GroupEnd);
  return fake_nccl::group_end();
}
FAKE_NCCL_WEAK_ALIAS(GroupEnd)
