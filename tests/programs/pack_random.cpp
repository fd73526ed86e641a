// Differential test of commtap's packer: builds random derived datatypes (seeded; nesting depth
// up to 4; contiguous, vector, hvector with negative strides, indexed, hindexed, indexed_block,
// hindexed_block, struct, resized with negative lower bounds, subarray in C and Fortran order,
// dup, darray, and named types with holes), and compares MPI_Pack/MPI_Unpack (commtap, when
// preloaded) with PMPI_Pack/PMPI_Unpack (the MPI library) byte for byte.
//
//   ./pack_random <types> [seed]      (one rank is enough)
//
// Prints "types N mismatches M strided S tree T library L"; exits 1 on any mismatch.
#include <dlfcn.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

std::mt19937_64 random_engine;
int pick(int low, int high) {  // inclusive
  return static_cast<int>(random_engine() % static_cast<std::uint64_t>(high - low + 1)) + low;
}

struct Extents {
  MPI_Aint lb, extent, true_lb, true_extent;
};
Extents extents_of(MPI_Datatype t) {
  Extents e{};
  MPI_Type_get_extent(t, &e.lb, &e.extent);
  MPI_Type_get_true_extent(t, &e.true_lb, &e.true_extent);
  return e;
}

MPI_Datatype named() {
  static const MPI_Datatype types[] = {MPI_BYTE,  MPI_CHAR,      MPI_SHORT,   MPI_INT,
                                       MPI_FLOAT, MPI_DOUBLE,    MPI_INT64_T, MPI_C_DOUBLE_COMPLEX,
                                       MPI_2INT,  MPI_DOUBLE_INT};  // the last has a hole
  const int n = pick(0, 99) < 3 ? 10 : 9;
  return types[pick(0, n - 1)];
}

void release(MPI_Datatype& t) {
  int ni, na, nt, combiner;
  MPI_Type_get_envelope(t, &ni, &na, &nt, &combiner);
  if (combiner != MPI_COMBINER_NAMED) MPI_Type_free(&t);
}

// Blocks of a made type never overlap (so that unpacking is well defined): strides and
// displacements leave room for the child's true extent.
MPI_Datatype make(int depth) {
  if (depth == 0 || pick(0, 5) == 0) return named();
  MPI_Datatype child = make(depth - 1), made = MPI_DATATYPE_NULL;
  const Extents c = extents_of(child);
  const MPI_Aint span = std::max<MPI_Aint>(c.true_extent, c.extent);  // room one child needs
  switch (pick(0, 11)) {
    case 0:
      MPI_Type_contiguous(pick(1, 4), child, &made);
      break;
    case 1: {
      const int bl = pick(1, 3);
      MPI_Type_vector(pick(1, 4), bl, bl + pick(0, 3), child, &made);
      break;
    }
    case 2: {
      const int bl = pick(1, 3);
      MPI_Aint stride = bl * span + pick(0, 9);  // odd strides too
      if (pick(0, 3) == 0) stride = -stride;
      MPI_Type_create_hvector(pick(1, 4), bl, stride, child, &made);
      break;
    }
    case 3:
    case 4: {
      const int n = pick(1, 4);
      std::vector<int> lengths(static_cast<std::size_t>(n));
      std::vector<int> displacements(static_cast<std::size_t>(n));
      std::vector<MPI_Aint> bytes(static_cast<std::size_t>(n));
      int next = pick(0, 2);
      MPI_Aint next_byte = pick(0, 7);
      for (int i = 0; i < n; ++i) {
        lengths[static_cast<std::size_t>(i)] = pick(0, 3);
        displacements[static_cast<std::size_t>(i)] = next;
        bytes[static_cast<std::size_t>(i)] = next_byte;
        next += std::max(1, lengths[static_cast<std::size_t>(i)]) *
                    static_cast<int>((span + c.extent - 1) / std::max<MPI_Aint>(1, c.extent)) +
                pick(0, 2);
        next_byte += std::max(1, lengths[static_cast<std::size_t>(i)]) * span + pick(0, 5);
      }
      if (pick(0, 1) == 0 && c.extent > 0)
        MPI_Type_indexed(n, lengths.data(), displacements.data(), child, &made);
      else
        MPI_Type_create_hindexed(n, lengths.data(), bytes.data(), child, &made);
      break;
    }
    case 5: {
      const int n = pick(1, 4), bl = pick(1, 3);
      std::vector<int> displacements(static_cast<std::size_t>(n));
      std::vector<MPI_Aint> bytes(static_cast<std::size_t>(n));
      int next = 0;
      MPI_Aint next_byte = pick(0, 3);
      for (int i = 0; i < n; ++i) {
        displacements[static_cast<std::size_t>(i)] = next;
        bytes[static_cast<std::size_t>(i)] = next_byte;
        next += bl * static_cast<int>((span + c.extent - 1) / std::max<MPI_Aint>(1, c.extent)) +
                pick(0, 2);
        next_byte += bl * span + pick(0, 5);
      }
      if (pick(0, 1) == 0 && c.extent > 0)
        MPI_Type_create_indexed_block(n, bl, displacements.data(), child, &made);
      else
        MPI_Type_create_hindexed_block(n, bl, bytes.data(), child, &made);
      break;
    }
    case 6: {  // struct of the child and up to two more types, in increasing place
      const int n = pick(1, 3);
      std::vector<MPI_Datatype> types(static_cast<std::size_t>(n));
      std::vector<int> lengths(static_cast<std::size_t>(n));
      std::vector<MPI_Aint> displacements(static_cast<std::size_t>(n));
      MPI_Aint end = 0;
      for (int i = 0; i < n; ++i) {
        types[static_cast<std::size_t>(i)] = i == 0 ? child : make(depth - 1);
        const Extents e = extents_of(types[static_cast<std::size_t>(i)]);
        lengths[static_cast<std::size_t>(i)] = pick(1, 2);
        displacements[static_cast<std::size_t>(i)] = end - e.true_lb + pick(0, 6);
        end = displacements[static_cast<std::size_t>(i)] + e.true_lb +
              (lengths[static_cast<std::size_t>(i)] - 1) * std::max(e.extent, e.true_extent) +
              e.true_extent;
      }
      MPI_Type_create_struct(n, lengths.data(), displacements.data(), types.data(), &made);
      for (int i = 1; i < n; ++i) release(types[static_cast<std::size_t>(i)]);
      break;
    }
    case 7:  // resized: a lower bound below the data (possibly negative), a larger extent
      MPI_Type_create_resized(child, c.true_lb - pick(0, 8), c.true_extent + pick(0, 16), &made);
      break;
    case 8:
    case 9: {
      const int n = pick(1, 3);
      int sizes[3], subsizes[3], starts[3];
      for (int k = 0; k < n; ++k) {
        sizes[k] = pick(1, 5);
        subsizes[k] = pick(1, sizes[k]);
        starts[k] = pick(0, sizes[k] - subsizes[k]);
      }
      if (c.extent < c.true_extent || c.extent <= 0) {  // subarray elements must not overlap
        made = MPI_DATATYPE_NULL;
        MPI_Type_contiguous(1, child, &made);
        break;
      }
      MPI_Type_create_subarray(n, sizes, subsizes, starts,
                               pick(0, 1) ? MPI_ORDER_C : MPI_ORDER_FORTRAN, child, &made);
      break;
    }
    case 10:
      MPI_Type_dup(child, &made);
      break;
    default: {  // darray on a 1-process grid: left to the MPI library
      int gsizes[2] = {pick(1, 6), pick(1, 6)},
          distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_NONE};
      int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, psizes[2] = {1, 1};
      if (c.extent < c.true_extent || c.extent <= 0) {
        MPI_Type_contiguous(2, child, &made);
        break;
      }
      MPI_Type_create_darray(1, 0, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, child, &made);
      break;
    }
  }
  release(child);
  return made;
}

using PlanQuery = int (*)(const void*, char*, int);

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int count_types = argc > 1 ? std::atoi(argv[1]) : 1000;
  random_engine.seed(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 42);
  auto plan_of = reinterpret_cast<PlanQuery>(dlsym(RTLD_DEFAULT, "commtap_datatype_plan"));
  int mismatches = 0, strided = 0, tree = 0, library = 0;
  for (int t = 0; t < count_types; ++t) {
    MPI_Datatype type = make(pick(1, 4));
    MPI_Type_commit(&type);
    int type_size = 0;
    MPI_Type_size(type, &type_size);
    if (type_size == 0) {  // MPICH 4.0.2's MPI_Unpack divides by zero on these
      release(type);
      --t;
      continue;
    }
    const Extents e = extents_of(type);
    const int count = pick(1, 3);
    // Room for `count` elements: [true_lb, (count - 1) * extent + true_ub), whatever the signs.
    const MPI_Aint low = std::min(e.true_lb, e.true_lb + (count - 1) * e.extent);
    const MPI_Aint high =
        std::max(e.true_lb + e.true_extent, e.true_lb + (count - 1) * e.extent + e.true_extent);
    std::vector<unsigned char> data(static_cast<std::size_t>(high - low) + 1);
    for (auto& byte : data) byte = static_cast<unsigned char>(random_engine());
    const unsigned char* base = data.data() - low;
    int packed_size = 0;
    MPI_Pack_size(count, type, MPI_COMM_WORLD, &packed_size);
    std::vector<unsigned char> theirs(static_cast<std::size_t>(packed_size) + 16, 0xEE);
    std::vector<unsigned char> ours(theirs.size(), 0xEE);
    int their_position = 3, our_position = 3;  // not at the start of the buffer
    const int rc_theirs =
        PMPI_Pack(base, count, type, theirs.data(), static_cast<int>(theirs.size()),
                  &their_position, MPI_COMM_WORLD);
    const int rc_ours = MPI_Pack(base, count, type, ours.data(), static_cast<int>(ours.size()),
                                 &our_position, MPI_COMM_WORLD);
    bool same = rc_theirs == rc_ours && their_position == our_position && theirs == ours;

    // Unpack the same random bytes into two equal buffers.
    std::vector<unsigned char> packed(static_cast<std::size_t>(their_position));
    for (auto& byte : packed) byte = static_cast<unsigned char>(random_engine());
    std::vector<unsigned char> out_theirs(data.size(), 0x5A), out_ours(data.size(), 0x5A);
    their_position = our_position = 3;
    PMPI_Unpack(packed.data(), static_cast<int>(packed.size()), &their_position,
                out_theirs.data() - low, count, type, MPI_COMM_WORLD);
    MPI_Unpack(packed.data(), static_cast<int>(packed.size()), &our_position, out_ours.data() - low,
               count, type, MPI_COMM_WORLD);
    same = same && their_position == our_position && out_theirs == out_ours;

    char description[256] = "";
    const int plan = plan_of ? plan_of(&type, description, sizeof description) : 0;
    strided += plan == 1;
    tree += plan == 2;
    library += plan == 0;
    if (!same) {
      ++mismatches;
      if (mismatches <= 5)
        std::fprintf(stderr, "type %d (count %d, plan %d %s): MPI_Pack/Unpack differ from PMPI\n",
                     t, count, plan, description);
    }
    release(type);
  }
  std::printf("types %d mismatches %d strided %d tree %d library %d\n", count_types, mismatches,
              strided, tree, library);
  MPI_Finalize();
  return mismatches == 0 ? 0 : 1;
}
