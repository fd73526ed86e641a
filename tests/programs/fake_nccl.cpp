// A stand-in libnccl.so.2 for machines without a GPU: it exports each API function the way
// NCCL does (a strong pnccl* definition and a weak nccl* alias of it) and only counts calls, so
// tests can prove that commtap intercepts nccl* and forwards to pnccl*.
#include <nccl.h>

#include <cstring>
#include <map>
#include <string>

namespace {
std::map<std::string, int>& calls() {
  static std::map<std::string, int> counts;
  return counts;
}
int comm_storage = 0;
}  // namespace

extern "C" {

// How many times the real (p)nccl function was reached.
__attribute__((visibility("default"))) int fake_nccl_calls(const char* name) {
  auto it = calls().find(name);
  return it == calls().end() ? 0 : it->second;
}

#define FAKE_NCCL(name, params)                                            \
  __attribute__((visibility("default"))) ncclResult_t pnccl##name params { \
    ++calls()["nccl" #name];                                               \
    return ncclSuccess;                                                    \
  }                                                                        \
  ncclResult_t nccl##name params __attribute__((weak, alias("pnccl" #name)));

FAKE_NCCL(AllReduce,
          (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
FAKE_NCCL(Broadcast, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
FAKE_NCCL(Bcast, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
FAKE_NCCL(Reduce,
          (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, cudaStream_t))
FAKE_NCCL(AllGather, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
FAKE_NCCL(ReduceScatter,
          (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
FAKE_NCCL(AlltoAll, (const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t))
FAKE_NCCL(Gather, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
FAKE_NCCL(Scatter, (const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
FAKE_NCCL(Send, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
FAKE_NCCL(Recv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
FAKE_NCCL(GroupStart, ())
FAKE_NCCL(GroupEnd, ())
FAKE_NCCL(CommDestroy, (ncclComm_t))
FAKE_NCCL(CommAbort, (ncclComm_t))
FAKE_NCCL(CommInitAll, (ncclComm_t*, int, const int*))
FAKE_NCCL(CommInitRankConfig, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*))

__attribute__((visibility("default"))) ncclResult_t pncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 7, sizeof *id);
  return ncclSuccess;
}
ncclResult_t ncclGetUniqueId(ncclUniqueId*) __attribute__((weak, alias("pncclGetUniqueId")));

__attribute__((visibility("default"))) ncclResult_t pncclCommInitRank(ncclComm_t* comm, int,
                                                                      ncclUniqueId, int) {
  ++calls()["ncclCommInitRank"];
  *comm = reinterpret_cast<ncclComm_t>(&comm_storage);
  return ncclSuccess;
}
ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int)
    __attribute__((weak, alias("pncclCommInitRank")));

}  // extern "C"
