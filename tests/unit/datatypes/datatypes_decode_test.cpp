// Runs under mpiexec -n 1: MPI datatypes built in different ways decode to the same canonical
// layout, and what cannot be decoded is left to the MPI library.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "datatypes/datatypes.hpp"

using commtap::datatypes::decode;
using commtap::datatypes::describe;

namespace {
std::string canonical(MPI_Datatype type) {
  auto layout = decode(type);
  return layout ? describe(*layout) : "none";
}
struct Type {
  MPI_Datatype handle = MPI_DATATYPE_NULL;
  ~Type() {
    if (handle != MPI_DATATYPE_NULL) MPI_Type_free(&handle);
  }
};
}  // namespace

TEST(Decode, ThirtyTwoContiguousBytesFiveWays) {
  Type a, b, c, d, inner, e;
  MPI_Type_contiguous(8, MPI_INT, &a.handle);
  MPI_Type_vector(2, 4, 4, MPI_INT, &b.handle);
  const int lengths[] = {3, 5};
  const int displacements[] = {0, 3};
  MPI_Type_indexed(2, lengths, displacements, MPI_INT, &c.handle);
  const int sizes[] = {8}, subsizes[] = {8}, starts[] = {0};
  MPI_Type_create_subarray(1, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &d.handle);
  MPI_Type_contiguous(4, MPI_INT, &inner.handle);
  MPI_Type_dup(inner.handle, &e.handle);
  Type pair;
  MPI_Type_contiguous(2, e.handle, &pair.handle);
  for (MPI_Datatype t : {a.handle, b.handle, c.handle, d.handle, pair.handle})
    EXPECT_EQ(canonical(t), "dense(32)");
}

TEST(Decode, ABlockOfARowMajorArrayFromVectorSubarrayAndStruct) {
  // The 4x2 ints at column 1 of a 4x5 array.
  Type vector, subarray, row, rows;
  MPI_Type_vector(4, 2, 5, MPI_INT, &vector.handle);
  const int sizes[] = {4, 5}, subsizes[] = {4, 2}, starts[] = {0, 1};
  MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &subarray.handle);
  MPI_Type_contiguous(2, MPI_INT, &row.handle);
  std::vector<int> lengths(4, 1);
  std::vector<MPI_Aint> displacements = {4, 24, 44, 64};
  std::vector<MPI_Datatype> types(4, row.handle);
  MPI_Type_create_struct(4, lengths.data(), displacements.data(), types.data(), &rows.handle);
  EXPECT_EQ(canonical(vector.handle), "stream(4, 20, dense(8))");
  EXPECT_EQ(canonical(subarray.handle), "@4 stream(4, 20, dense(8))");
  EXPECT_EQ(canonical(rows.handle), "@4 stream(4, 20, dense(8))");
  // Fortran order: the same block of the transposed array.
  Type fortran;
  const int fsizes[] = {5, 4}, fsubsizes[] = {2, 4}, fstarts[] = {1, 0};
  MPI_Type_create_subarray(2, fsizes, fsubsizes, fstarts, MPI_ORDER_FORTRAN, MPI_INT,
                           &fortran.handle);
  EXPECT_EQ(canonical(fortran.handle), "@4 stream(4, 20, dense(8))");
}

TEST(Decode, ResizedKeepsTheDataAndTheParentUsesTheNewExtent) {
  Type resized, stream;
  MPI_Type_create_resized(MPI_INT, -4, 12, &resized.handle);
  MPI_Type_contiguous(3, resized.handle, &stream.handle);
  EXPECT_EQ(canonical(resized.handle), "dense(4)");
  EXPECT_EQ(canonical(stream.handle), "stream(3, 12, dense(4))");
}

TEST(Decode, WhatCannotBeDecodedIsLeftToTheLibrary) {
  EXPECT_EQ(canonical(MPI_DOUBLE_INT), "none");  // a named type with a hole
  Type darray;
  int gsizes[] = {4, 4}, distribs[] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_BLOCK};
  int dargs[] = {MPI_DISTRIBUTE_DFLT_DARG, MPI_DISTRIBUTE_DFLT_DARG}, psizes[] = {1, 1};
  MPI_Type_create_darray(1, 0, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT,
                         &darray.handle);
  EXPECT_EQ(canonical(darray.handle), "none");
  Type with_hole;
  MPI_Type_contiguous(2, MPI_DOUBLE_INT, &with_hole.handle);
  EXPECT_EQ(canonical(with_hole.handle), "none");
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  MPI_Finalize();
  return failed;
}
