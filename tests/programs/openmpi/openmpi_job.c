/* A small MPI job built against Open MPI (tests/mpi/openmpi.sh), whose handles are pointers:
 * a split communicator, a derived datatype, nonblocking messages with their statuses and
 * collectives on both communicators. Each rank prints what it received and computed, so the
 * native and the preloaded run's outputs can be compared line for line. Not built by CMake (the
 * tree builds against MPICH): the test compiles it with Open MPI's headers. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  MPI_Comm half, copy;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  MPI_Comm_dup(half, &copy);
  int half_rank = 0, half_size = 0;
  MPI_Comm_rank(copy, &half_rank);
  MPI_Comm_size(copy, &half_size);

  /* Every other double of 16, to the next rank, from the previous one. */
  MPI_Datatype every_other;
  MPI_Type_vector(8, 1, 2, MPI_DOUBLE, &every_other);
  MPI_Type_commit(&every_other);
  double out[16], in[16];
  for (int i = 0; i < 16; ++i) {
    out[i] = rank * 100 + i;
    in[i] = -1;
  }
  MPI_Request requests[2];
  MPI_Status statuses[2];
  MPI_Irecv(in, 1, every_other, (rank + size - 1) % size, 7, MPI_COMM_WORLD, &requests[0]);
  MPI_Isend(out, 1, every_other, (rank + 1) % size, 7, MPI_COMM_WORLD, &requests[1]);
  MPI_Waitall(2, requests, statuses);
  int received = 0;
  MPI_Get_count(&statuses[0], MPI_DOUBLE, &received);

  double mine = rank + 1.5, world_sum = 0, half_max = 0;
  MPI_Allreduce(&mine, &world_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &half_max, 1, MPI_DOUBLE, MPI_MAX, copy);
  long gathered[64] = {0};
  long value = 1000 + rank;
  MPI_Allgather(&value, 1, MPI_LONG, gathered, 1, MPI_LONG, MPI_COMM_WORLD);
  long gathered_sum = 0;
  for (int i = 0; i < size && i < 64; ++i) gathered_sum += gathered[i];
  MPI_Barrier(copy);

  double received_sum = 0;
  for (int i = 0; i < 16; ++i) received_sum += in[i];
  printf("rank %d of %d: half %d of %d, from %d tag %d count %d sum %.1f, world sum %.1f, "
         "half max %.1f, gathered %ld\n",
         rank, size, half_rank, half_size, statuses[0].MPI_SOURCE, statuses[0].MPI_TAG, received,
         received_sum, world_sum, half_max, gathered_sum);
  MPI_Type_free(&every_other);
  MPI_Comm_free(&copy);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
