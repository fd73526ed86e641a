// A libnccl.so.2 whose calls do nothing, for bench/nccl_overhead: what commtap adds to an NCCL
// call is measured against a library that costs nothing itself (the limit is then zero, and
// every nanosecond the benchmark reads is commtap's). Exports what NCCL does: a strong pnccl*
// definition and a weak nccl* alias of it.
#include <nccl.h>

namespace {
int comm_storage = 0;
}  // namespace

extern "C" {

#define NULL_NCCL(name, params)                                            \
  __attribute__((visibility("default"))) ncclResult_t pnccl##name params { \
    return ncclSuccess;                                                    \
  }                                                                        \
  __attribute__((visibility("default"))) ncclResult_t nccl##name params    \
      __attribute__((weak, alias("pnccl" #name)));

NULL_NCCL(AllReduce,
          (const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t))
NULL_NCCL(Send, (const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NULL_NCCL(Recv, (void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t))
NULL_NCCL(GroupStart, ())
NULL_NCCL(GroupEnd, ())
NULL_NCCL(CommDestroy, (ncclComm_t))
NULL_NCCL(GetUniqueId, (ncclUniqueId*))

__attribute__((visibility("default"))) ncclResult_t pncclCommInitRank(ncclComm_t* comm, int,
                                                                      ncclUniqueId, int) {
  *comm = reinterpret_cast<ncclComm_t>(&comm_storage);
  return ncclSuccess;
}
__attribute__((visibility("default"))) ncclResult_t ncclCommInitRank(ncclComm_t*, int, ncclUniqueId,
                                                                     int)
    __attribute__((weak, alias("pncclCommInitRank")));

}  // extern "C"
