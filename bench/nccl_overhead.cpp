// What commtap adds to an NCCL call: a process without MPI (as torchrun starts one) makes one
// communicator on the null NCCL (bench/null_nccl: calls that cost nothing) and times batches of
// ncclAllReduce and of a grouped ncclSend+ncclRecv; prints "name ns-per-call" lines, each the
// median of 9 batches. bench/nccl_overhead.sh runs it native and preloaded, interleaved.
//
//   nccl_overhead [calls per batch]
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

template <typename Body>
double median_ns_per_call(long calls, Body body) {
  std::vector<double> batches;
  for (int batch = 0; batch < 9; ++batch) {
    const auto began = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) body();
    const auto took = std::chrono::steady_clock::now() - began;
    batches.push_back(std::chrono::duration<double, std::nano>(took).count() /
                      static_cast<double>(calls));
  }
  std::sort(batches.begin(), batches.end());
  return batches[batches.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 200000;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  ncclGetUniqueId(&id);
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 1;
  float buffer[2] = {};
  std::printf("allreduce %.1f\n", median_ns_per_call(calls, [&] {
                ncclAllReduce(buffer, buffer, 2, ncclFloat32, ncclSum, comm, nullptr);
              }));
  std::printf("group_send_recv %.1f\n", median_ns_per_call(calls, [&] {
                ncclGroupStart();
                ncclSend(buffer, 2, ncclFloat32, 0, comm, nullptr);
                ncclRecv(buffer, 2, ncclFloat32, 0, comm, nullptr);
                ncclGroupEnd();
              }));
  ncclCommDestroy(comm);
  return 0;
}
