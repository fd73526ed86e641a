// MPI_Pack throughput, commtap vs the MPI library in the same run: run preloaded, so MPI_Pack is
// commtap's and PMPI_Pack is MPICH's (bench/pack.sh prints the table, docs/benchmarks.md).
//
//   LD_PRELOAD=libcommtap.so mpiexec -n 1 ./pack [max object MiB]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// The fastest of several packs of `type` (at least 3, or 50 ms of them), in seconds.
template <typename Pack>
double fastest(Pack pack) {
  double best = 1e9, spent = 0;
  for (int rep = 0; rep < 3 || (spent < 0.05 && rep < 1000); ++rep) {
    const auto start = Clock::now();
    pack();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::min(best, s);
    spent += s;
  }
  return best;
}

void measure(const char* layout, MPI_Datatype type, long block) {
  MPI_Type_commit(&type);
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  MPI_Type_size(type, &size);
  MPI_Type_get_extent(type, &lb, &extent);
  std::vector<char> in(static_cast<std::size_t>(extent)), ours(static_cast<std::size_t>(size)),
      theirs(static_cast<std::size_t>(size));
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 7);
  const double t_theirs = fastest([&] {
    int position = 0;
    PMPI_Pack(in.data(), 1, type, theirs.data(), size, &position, MPI_COMM_WORLD);
  });
  const double t_ours = fastest([&] {
    int position = 0;
    MPI_Pack(in.data(), 1, type, ours.data(), size, &position, MPI_COMM_WORLD);
  });
  const bool same = ours == theirs;
  char object[32];
  if (size >= 1 << 20)
    std::snprintf(object, sizeof object, "%d MiB", size >> 20);
  else
    std::snprintf(object, sizeof object, "%d KiB", size >> 10);
  std::printf("| %s | %ld | %s | %.2f | %.2f | %.2f |%s\n", layout, block, object,
              size / t_theirs / 1e9, size / t_ours / 1e9, t_theirs / t_ours,
              same ? "" : " DIFFERENT BYTES");
  MPI_Type_free(&type);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const long max_mib = argc > 1 ? std::atol(argv[1]) : 64;
  std::printf("| layout | block B | object | MPICH GB/s | commtap GB/s | commtap/MPICH |\n");
  std::printf("|---|---:|---|---:|---:|---:|\n");
  const long blocks[] = {1, 4, 8, 16, 64, 256, 512};
  for (long object_kib : {1L, 1024L, 65536L}) {
    if (object_kib > max_mib * 1024) continue;
    for (long block : blocks) {
      const long count = object_kib * 1024 / block;
      if (count < 1) continue;
      MPI_Datatype vector;  // 2-D: every other block of bytes
      MPI_Type_vector(static_cast<int>(count), static_cast<int>(block), static_cast<int>(2 * block),
                      MPI_BYTE, &vector);
      measure("2-D vector", vector, block);
    }
  }
  for (long object_kib : {64L, 16384L}) {
    if (object_kib > max_mib * 1024) continue;
    for (long block : {1L, 8L, 64L, 512L}) {
      // 3-D hvector: planes of rows, rows of `block` bytes 3 blocks apart.
      const long rows = 16, planes = object_kib * 1024 / block / rows;
      MPI_Datatype row, plane, cube;
      MPI_Type_create_hvector(static_cast<int>(rows), static_cast<int>(block), 3 * block, MPI_BYTE,
                              &row);
      MPI_Type_create_hvector(static_cast<int>(planes), 1, rows * 3 * block + 64, row, &cube);
      plane = row;
      MPI_Type_free(&plane);
      measure("3-D hvector", cube, block);
    }
  }
  for (long object_kib : {1024L, 16384L}) {
    if (object_kib > max_mib * 1024) continue;
    for (long inner : {1L, 4L, 32L}) {
      // 3-D subarray of doubles: an n x n x inner block out of an (n + 2) x (n + 2) x 2 inner box
      // (a halo-exchange-like face), n chosen for the object size.
      const long elements = object_kib * 1024 / 8;
      int n = 1;
      while (static_cast<long>(n + 1) * (n + 1) * inner <= elements) ++n;
      const int sizes[] = {n + 2, n + 2, static_cast<int>(2 * inner)};
      const int subsizes[] = {n, n, static_cast<int>(inner)};
      const int starts[] = {1, 1, 0};
      MPI_Datatype sub;
      MPI_Type_create_subarray(3, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &sub);
      measure("3-D subarray (double)", sub, inner * 8);
    }
  }
  MPI_Finalize();
  return 0;
}
