// Correctness sweep of commtap's all-reduce against the library's, in one run: random (seeded)
// cases of operation x builtin type x count (1, < p, not divisible by p, large) x MPI_IN_PLACE
// x communicator (world, a dup, a split, a split with the ranks in reverse order). Run preloaded
// with COMMTAP_ALLREDUCE forced: MPI_Allreduce is commtap's, PMPI_Allreduce the library's.
// Integer results must equal the library's exactly; floating-point ones must lie within the
// reduction-order bound of it and be bit-identical on every rank. Invalid calls must fail with
// the library's error class.
//
//   mpiexec -n <P> ./allreduce_sweep <cases> [seed]
//
// Prints "cases N mismatches M"; exit status 1 on any mismatch.
#include <mpi.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

struct TypeInfo {
  MPI_Datatype type;
  const char* name;
  int size;
  enum Kind { integer, floating, pair } kind;
};
const TypeInfo kTypes[] = {
    {MPI_INT, "int", 4, TypeInfo::integer},
    {MPI_LONG, "long", 8, TypeInfo::integer},
    {MPI_UNSIGNED, "unsigned", 4, TypeInfo::integer},
    {MPI_SHORT, "short", 2, TypeInfo::integer},
    {MPI_UINT8_T, "uint8", 1, TypeInfo::integer},
    {MPI_INT64_T, "int64", 8, TypeInfo::integer},
    {MPI_FLOAT, "float", 4, TypeInfo::floating},
    {MPI_DOUBLE, "double", 8, TypeInfo::floating},
    {MPI_2INT, "2int", 8, TypeInfo::pair},
    {MPI_DOUBLE_INT, "double_int", 16, TypeInfo::pair},
};
struct OpInfo {
  MPI_Op op;
  const char* name;
  bool integers, floats, pairs;
};
const OpInfo kOps[] = {
    {MPI_SUM, "sum", true, true, false},        {MPI_PROD, "prod", true, true, false},
    {MPI_MIN, "min", true, true, false},        {MPI_MAX, "max", true, true, false},
    {MPI_LAND, "land", true, false, false},     {MPI_LOR, "lor", true, false, false},
    {MPI_LXOR, "lxor", true, false, false},     {MPI_BAND, "band", true, false, false},
    {MPI_BOR, "bor", true, false, false},       {MPI_BXOR, "bxor", true, false, false},
    {MPI_MINLOC, "minloc", false, false, true}, {MPI_MAXLOC, "maxloc", false, false, true},
};

std::mt19937_64 shared_random;  // same sequence on every rank: the cases
std::mt19937_64 own_random;     // this rank's data

void fill(const TypeInfo& t, const OpInfo& o, std::vector<char>& buffer, std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    char* at = buffer.data() + i * (t.type == MPI_DOUBLE_INT ? 16 : t.size);
    const std::uint64_t r = own_random();
    const bool prod = o.op == MPI_PROD;
    if (t.type == MPI_INT)
      *reinterpret_cast<int*>(at) =
          prod ? static_cast<int>(r % 3) - 1 : static_cast<int>(r % 2001) - 1000;
    if (t.type == MPI_LONG)
      *reinterpret_cast<long*>(at) =
          prod ? static_cast<long>(r % 3) - 1 : static_cast<long>(r % 200001) - 100000;
    if (t.type == MPI_UNSIGNED)
      *reinterpret_cast<unsigned*>(at) = static_cast<unsigned>(r % (prod ? 3 : 100000));
    if (t.type == MPI_SHORT)
      *reinterpret_cast<short*>(at) = static_cast<short>(r % (prod ? 3 : 200));
    if (t.type == MPI_UINT8_T)
      *reinterpret_cast<std::uint8_t*>(at) = static_cast<std::uint8_t>(r % (prod ? 2 : 40));
    if (t.type == MPI_INT64_T)
      *reinterpret_cast<std::int64_t*>(at) = static_cast<std::int64_t>(r % 2000001) - 1000000;
    const double unit = static_cast<double>(r >> 11) / 9007199254740992.0;  // [0, 1)
    if (t.type == MPI_FLOAT)
      *reinterpret_cast<float*>(at) = static_cast<float>(prod ? 0.9 + 0.2 * unit : 2 * unit - 1);
    if (t.type == MPI_DOUBLE)
      *reinterpret_cast<double*>(at) = prod ? 0.9 + 0.2 * unit : 2 * unit - 1;
    if (t.type == MPI_2INT) {
      reinterpret_cast<int*>(at)[0] = static_cast<int>(r % 7);  // ties, to test the index rule
      reinterpret_cast<int*>(at)[1] = static_cast<int>(own_random() % 1000);
    }
    if (t.type == MPI_DOUBLE_INT) {
      *reinterpret_cast<double*>(at) = static_cast<double>(r % 5);
      *reinterpret_cast<int*>(at + 8) = static_cast<int>(own_random() % 1000);
    }
  }
}

std::uint64_t hash_bytes(const char* data, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i)
    h = (h ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int cases = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 7;
  shared_random.seed(seed);
  own_random.seed(seed * 1000 + static_cast<std::uint64_t>(rank));

  MPI_Comm dup, half, reversed;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed);
  const MPI_Comm comms[] = {MPI_COMM_WORLD, dup, half, reversed};
  const char* comm_names[] = {"world", "dup", "split", "reversed"};

  int mismatches = 0;
  for (int c = 0; c < cases; ++c) {
    const TypeInfo& t = kTypes[shared_random() % std::size(kTypes)];
    const OpInfo* o = nullptr;
    do {
      o = &kOps[shared_random() % std::size(kOps)];
    } while (!(t.kind == TypeInfo::integer    ? o->integers
               : t.kind == TypeInfo::floating ? o->floats
                                              : o->pairs));
    const int comm_index = static_cast<int>(shared_random() % 4);
    const MPI_Comm comm = comms[comm_index];
    int comm_size = 0;
    MPI_Comm_size(comm, &comm_size);
    const std::int64_t counts[] = {1, std::max(1, comm_size - 1), 7 * comm_size + 3,
                                   static_cast<std::int64_t>(shared_random() % 5000) + 1, 200003};
    const std::int64_t count = counts[shared_random() % std::size(counts)];
    const bool in_place = shared_random() % 2 == 0;
    const std::size_t extent = t.type == MPI_DOUBLE_INT ? 16 : static_cast<std::size_t>(t.size);
    const std::size_t bytes = static_cast<std::size_t>(count) * extent;
    std::vector<char> input(bytes), ours(bytes), theirs(bytes);
    fill(t, *o, input, count);
    // Padding bytes of MPI_DOUBLE_INT are not compared.
    auto clean = [&](std::vector<char>& b) {
      if (t.type == MPI_DOUBLE_INT)
        for (std::int64_t i = 0; i < count; ++i) std::memset(b.data() + i * 16 + 12, 0, 4);
    };
    PMPI_Allreduce(input.data(), theirs.data(), static_cast<int>(count), t.type, o->op, comm);
    if (in_place) {
      ours = input;
      MPI_Allreduce(MPI_IN_PLACE, ours.data(), static_cast<int>(count), t.type, o->op, comm);
    } else {
      MPI_Allreduce(input.data(), ours.data(), static_cast<int>(count), t.type, o->op, comm);
    }
    clean(ours);
    clean(theirs);
    bool same = true;
    if (t.kind == TypeInfo::floating && (o->op == MPI_SUM || o->op == MPI_PROD)) {
      // Within the reduction-order bound: (p - 1) roundings of partial results at most 1 in
      // magnitude (sums of values in [-1, 1], products of values near 1, over p ranks).
      const double eps = t.type == MPI_FLOAT ? FLT_EPSILON : DBL_EPSILON;
      const double bound = 2.0 * comm_size * comm_size * eps * (o->op == MPI_PROD ? 2 : 1);
      for (std::int64_t i = 0; i < count && same; ++i) {
        const double a = t.type == MPI_FLOAT ? reinterpret_cast<float*>(ours.data())[i]
                                             : reinterpret_cast<double*>(ours.data())[i];
        const double b = t.type == MPI_FLOAT ? reinterpret_cast<float*>(theirs.data())[i]
                                             : reinterpret_cast<double*>(theirs.data())[i];
        same = std::fabs(a - b) <= bound;
      }
    } else {
      same = ours == theirs;
    }
    // Every rank must hold the same bits.
    const std::uint64_t h = hash_bytes(ours.data(), bytes);
    std::uint64_t low = 0, high = 0;
    PMPI_Allreduce(&h, &low, 1, MPI_UINT64_T, MPI_MIN, comm);
    PMPI_Allreduce(&h, &high, 1, MPI_UINT64_T, MPI_MAX, comm);
    same = same && low == high;
    int bad = same ? 0 : 1, any = 0;
    PMPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
      ++mismatches;
      if (rank == 0 && mismatches <= 5)
        std::fprintf(stderr, "case %d: %s %s count %lld %s on %s differs from the library\n", c,
                     o->name, t.name, static_cast<long long>(count), in_place ? "in place" : "",
                     comm_names[comm_index]);
    }
  }

  // Invalid calls: the library's error class.
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int ours_class = 0, theirs_class = 0, value = 1, out = 0;
  int rc_theirs = PMPI_Allreduce(&value, &out, 1, MPI_INT, MPI_OP_NULL, dup);
  int rc_ours = MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_OP_NULL, dup);
  MPI_Error_class(rc_theirs, &theirs_class);
  MPI_Error_class(rc_ours, &ours_class);
  if (ours_class != theirs_class || rc_theirs == MPI_SUCCESS) ++mismatches;
  // (A negative count is not tested: MPICH 4.0.2 as packaged by Debian aborts on it.)

  if (rank == 0) std::printf("cases %d mismatches %d\n", cases, mismatches);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&half);
  MPI_Comm_free(&reversed);
  MPI_Finalize();
  return mismatches == 0 ? 0 : 1;
}
