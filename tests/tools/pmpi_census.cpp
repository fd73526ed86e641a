// Counts the MPI calls commtap itself makes (tests/mpi/message_census.sh). Preloaded after
// libcommtap.so, this library's PMPI_ functions come before libmpi's, so commtap's own calls
// (which go to PMPI_ directly) land here first; the test program makes no point-to-point call of
// its own, so every point-to-point call counted is commtap's. At exit each process writes
// "<point-to-point calls> <collective calls>" to $CENSUS_DIR/rank-$PMI_RANK.
#include <dlfcn.h>
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

std::atomic<long> point_to_point{0}, collectives{0};

template <typename Function>
Function next(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

[[gnu::destructor]] void write_census() {
  const char* directory = std::getenv("CENSUS_DIR");
  const char* rank = std::getenv("PMI_RANK");
  if (directory == nullptr || rank == nullptr) return;
  const std::string path = std::string(directory) + "/rank-" + rank;
  if (std::FILE* file = std::fopen(path.c_str(), "w")) {
    std::fprintf(file, "%ld %ld\n", point_to_point.load(), collectives.load());
    std::fclose(file);
  }
}

}  // namespace

// Each counted function forwards to the next definition (libmpi's) unchanged.
#define COUNTED(counter, name, params, args)                  \
  extern "C" [[gnu::visibility("default")]] int name params { \
    static auto real = next<int(*) params>(#name);            \
    ++(counter);                                              \
    return real args;                                         \
  }

COUNTED(point_to_point, PMPI_Send,
        (const void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c),
        (b, n, t, peer, tag, c))
COUNTED(point_to_point, PMPI_Isend,
        (const void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* r),
        (b, n, t, peer, tag, c, r))
COUNTED(point_to_point, PMPI_Recv,
        (void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Status* s),
        (b, n, t, peer, tag, c, s))
COUNTED(point_to_point, PMPI_Irecv,
        (void* b, int n, MPI_Datatype t, int peer, int tag, MPI_Comm c, MPI_Request* r),
        (b, n, t, peer, tag, c, r))
COUNTED(point_to_point, PMPI_Sendrecv,
        (const void* sb, int sn, MPI_Datatype st, int to, int stag, void* rb, int rn,
         MPI_Datatype rt, int from, int rtag, MPI_Comm c, MPI_Status* s),
        (sb, sn, st, to, stag, rb, rn, rt, from, rtag, c, s))
COUNTED(collectives, PMPI_Bcast, (void* b, int n, MPI_Datatype t, int root, MPI_Comm c),
        (b, n, t, root, c))
COUNTED(collectives, PMPI_Ibcast,
        (void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* r),
        (b, n, t, root, c, r))
COUNTED(collectives, PMPI_Allreduce,
        (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c), (s, r, n, t, op, c))
COUNTED(collectives, PMPI_Iallreduce,
        (const void* s, void* r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c, MPI_Request* q),
        (s, r, n, t, op, c, q))
COUNTED(collectives, PMPI_Allgather,
        (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, MPI_Comm c),
        (s, sn, st, r, rn, rt, c))
COUNTED(collectives, PMPI_Gather,
        (const void* s, int sn, MPI_Datatype st, void* r, int rn, MPI_Datatype rt, int root,
         MPI_Comm c),
        (s, sn, st, r, rn, rt, root, c))
COUNTED(collectives, PMPI_Barrier, (MPI_Comm c), (c))
COUNTED(collectives, PMPI_Ibarrier, (MPI_Comm c, MPI_Request* r), (c, r))
