// Makes every blocking receive that commtap polls for see a gap between its looks
// (tests/mpi/transfers.sh): preloaded after libcommtap.so, this PMPI_Iprobe comes before libmpi's
// for commtap's own calls. Each odd call on a thread finds nothing, at once; each even call first
// spins for IPROBE_GAP_US (default 500), as if the rank had been off the CPU since the miss,
// then asks the library. So a polled receive's message is always found a gap after its last
// miss, whatever the machine's load: a spurious miss only delays the look that finds it.
#include <dlfcn.h>
#include <mpi.h>

#include <chrono>
#include <cstdlib>

namespace {

using Iprobe = int (*)(int, int, MPI_Comm, int*, MPI_Status*);

long gap_us() {
  const char* set = std::getenv("IPROBE_GAP_US");
  return set != nullptr ? std::strtol(set, nullptr, 10) : 500;
}

}  // namespace

extern "C" [[gnu::visibility("default")]] int PMPI_Iprobe(int source, int tag, MPI_Comm comm,
                                                          int* flag, MPI_Status* status) {
  static const auto next = reinterpret_cast<Iprobe>(dlsym(RTLD_NEXT, "PMPI_Iprobe"));
  static const long gap = gap_us();
  thread_local unsigned long calls = 0;
  if (++calls % 2 == 1) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(gap);
  while (std::chrono::steady_clock::now() < until) {
  }
  return next(source, tag, comm, flag, status);
}
