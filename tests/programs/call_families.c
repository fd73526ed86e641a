/* Calls every family of intercepted MPI functions a known number of times and keeps its own
 * tally: the ground truth that the interception test compares with the trace database.
 *
 *   mpiexec -n <even> ./call_families <tally directory> [repetitions]
 *
 * Each rank writes <dir>/expected-rank-<R>.txt ("function calls completions" lines) and rank 0
 * prints a checksum of every received value, so native and preloaded runs can be compared. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMES 128
static struct {
  const char* name;
  long calls, completions;
} tally[MAX_NAMES];
static int tallied = 0;

static void count(const char* name, long calls, long completions) {
  for (int i = 0; i < tallied; ++i)
    if (strcmp(tally[i].name, name) == 0) {
      tally[i].calls += calls;
      tally[i].completions += completions;
      return;
    }
  tally[tallied].name = name;
  tally[tallied].calls = calls;
  tally[tallied].completions = completions;
  ++tallied;
}

static uint64_t checksum = 1469598103934665603ull;
static void mix(const int* values, int n) {
  for (int i = 0; i < n; ++i)
    checksum = (checksum ^ (uint64_t)(uint32_t)values[i]) * 1099511628211ull;
}

#define CALL(name, ...) (count("MPI_" #name, 1, 0), MPI_##name(__VA_ARGS__))

/* Wait for one request with MPI_Test, counting every call. */
static void test_until_done(MPI_Request* request, const char* origin) {
  int done = 0;
  while (!done) CALL(Test, request, &done, MPI_STATUS_IGNORE);
  count(origin, 0, 1);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  count("MPI_Init", 1, 0);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size % 2 != 0 || argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: mpiexec -n <even> %s <dir> [repetitions]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int reps = argc > 2 ? atoi(argv[2]) : 3;
  const int partner = rank ^ 1;
  MPI_Comm world = MPI_COMM_WORLD;

  int* send = calloc(64 * (size_t)size, sizeof(int));
  int* recv = calloc(64 * (size_t)size, sizeof(int));
  int* counts = calloc((size_t)size, sizeof(int));
  int* displs = calloc((size_t)size, sizeof(int));
  MPI_Datatype* types = calloc((size_t)size, sizeof(MPI_Datatype));
  for (int r = 0; r < size; ++r) counts[r] = 2, displs[r] = 2 * r, types[r] = MPI_INT;

  MPI_Request persistent_allreduce, persistent_barrier, persistent_p2p[2];
  int persistent_value = 0, persistent_sum = 0, p2p_out = 0, p2p_in = 0;
  CALL(Allreduce_init, &persistent_value, &persistent_sum, 1, MPI_INT, MPI_SUM, world,
       MPI_INFO_NULL, &persistent_allreduce);
  CALL(Barrier_init, world, MPI_INFO_NULL, &persistent_barrier);
  CALL(Send_init, &p2p_out, 1, MPI_INT, partner, 77, world, &persistent_p2p[0]);
  CALL(Recv_init, &p2p_in, 1, MPI_INT, partner, 77, world, &persistent_p2p[1]);

  for (int rep = 0; rep < reps; ++rep) {
    for (int i = 0; i < 64 * size; ++i) send[i] = rank * 1000 + rep * 100 + i;

    /* Blocking collectives. */
    CALL(Allreduce, send, recv, 8, MPI_INT, MPI_SUM, world);
    mix(recv, 8);
    CALL(Allreduce_c, send, recv, (MPI_Count)8, MPI_INT, MPI_MAX, world);
    mix(recv, 8);
    CALL(Reduce, send, recv, 8, MPI_INT, MPI_SUM, 0, world);
    if (rank == 0) mix(recv, 8);
    CALL(Bcast, send, 8, MPI_INT, 1, world);
    mix(send, 8);
    CALL(Barrier, world);
    CALL(Allgather, send, 2, MPI_INT, recv, 2, MPI_INT, world);
    mix(recv, 2 * size);
    CALL(Allgatherv, send, 2, MPI_INT, recv, counts, displs, MPI_INT, world);
    mix(recv, 2 * size);
    CALL(Gather, send, 2, MPI_INT, recv, 2, MPI_INT, 0, world);
    if (rank == 0) mix(recv, 2 * size);
    CALL(Gatherv, send, 2, MPI_INT, recv, counts, displs, MPI_INT, 0, world);
    if (rank == 0) mix(recv, 2 * size);
    CALL(Scatter, send, 2, MPI_INT, recv, 2, MPI_INT, 0, world);
    mix(recv, 2);
    CALL(Scatterv, send, counts, displs, MPI_INT, recv, 2, MPI_INT, 0, world);
    mix(recv, 2);
    CALL(Alltoall, send, 2, MPI_INT, recv, 2, MPI_INT, world);
    mix(recv, 2 * size);
    CALL(Alltoallv, send, counts, displs, MPI_INT, recv, counts, displs, MPI_INT, world);
    mix(recv, 2 * size);
    int byte_displs[256];
    for (int r = 0; r < size && r < 256; ++r) byte_displs[r] = displs[r] * (int)sizeof(int);
    CALL(Alltoallw, send, counts, byte_displs, types, recv, counts, byte_displs, types, world);
    mix(recv, 2 * size);
    CALL(Reduce_scatter, send, recv, counts, MPI_INT, MPI_SUM, world);
    mix(recv, 2);
    CALL(Reduce_scatter_block, send, recv, 2, MPI_INT, MPI_SUM, world);
    mix(recv, 2);
    CALL(Scan, send, recv, 4, MPI_INT, MPI_SUM, world);
    mix(recv, 4);
    CALL(Exscan, send, recv, 4, MPI_INT, MPI_SUM, world);
    if (rank != 0) mix(recv, 4);

    /* Nonblocking collectives, each completed by a different call of the Wait/Test families. */
    MPI_Request request, pair[2];
    int index, outcount, indices[2], flag;
    CALL(Iallreduce, send, recv, 4, MPI_INT, MPI_SUM, world, &request);
    CALL(Wait, &request, MPI_STATUS_IGNORE);
    count("MPI_Iallreduce", 0, 1);
    mix(recv, 4);
    CALL(Ibcast, send, 4, MPI_INT, 0, world, &request);
    test_until_done(&request, "MPI_Ibcast");
    mix(send, 4);
    CALL(Ibarrier, world, &request);
    CALL(Waitany, 1, &request, &index, MPI_STATUS_IGNORE);
    count("MPI_Ibarrier", 0, 1);
    CALL(Igather, send, 2, MPI_INT, recv, 2, MPI_INT, 0, world, &request);
    do CALL(Waitsome, 1, &request, &outcount, indices, MPI_STATUSES_IGNORE);
    while (outcount == 0);
    count("MPI_Igather", 0, 1);
    CALL(Iscan, send, recv, 2, MPI_INT, MPI_SUM, world, &request);
    do CALL(Testall, 1, &request, &flag, MPI_STATUSES_IGNORE);
    while (!flag);
    count("MPI_Iscan", 0, 1);
    mix(recv, 2);
    CALL(Iexscan, send, recv, 2, MPI_INT, MPI_SUM, world, &request);
    do CALL(Testany, 1, &request, &index, &flag, MPI_STATUS_IGNORE);
    while (!flag);
    count("MPI_Iexscan", 0, 1);
    CALL(Ialltoall, send, 1, MPI_INT, recv, 1, MPI_INT, world, &pair[0]);
    CALL(Iallgather, send, 1, MPI_INT, recv + size, 1, MPI_INT, world, &pair[1]);
    do CALL(Testsome, 2, pair, &outcount, indices, MPI_STATUSES_IGNORE);
    while (outcount != MPI_UNDEFINED);
    count("MPI_Ialltoall", 0, 1);
    count("MPI_Iallgather", 0, 1);
    mix(recv, 2 * size);

    /* Persistent operations. */
    persistent_value = rank + rep;
    CALL(Start, &persistent_allreduce);
    CALL(Wait, &persistent_allreduce, MPI_STATUS_IGNORE);
    count("MPI_Allreduce_init", 0, 1);
    mix(&persistent_sum, 1);
    CALL(Startall, 1, &persistent_barrier);
    CALL(Waitall, 1, &persistent_barrier, MPI_STATUSES_IGNORE);
    count("MPI_Barrier_init", 0, 1);
    p2p_out = rank * 10 + rep;
    CALL(Startall, 2, persistent_p2p);
    CALL(Waitall, 2, persistent_p2p, MPI_STATUSES_IGNORE);
    count("MPI_Send_init", 0, 1);
    count("MPI_Recv_init", 0, 1);
    mix(&p2p_in, 1);

    /* Blocking point-to-point between partners (0-1, 2-3, ...). */
    int out = rank + rep, in = -1;
    if (rank % 2 == 0) {
      CALL(Send, &out, 1, MPI_INT, partner, 1, world);
      CALL(Recv, &in, 1, MPI_INT, partner, 1, world, MPI_STATUS_IGNORE);
      CALL(Ssend, &out, 1, MPI_INT, partner, 2, world);
      CALL(Recv_c, &in, (MPI_Count)1, MPI_INT, partner, 2, world, MPI_STATUS_IGNORE);
    } else {
      CALL(Recv, &in, 1, MPI_INT, partner, 1, world, MPI_STATUS_IGNORE);
      CALL(Send, &out, 1, MPI_INT, partner, 1, world);
      CALL(Recv_c, &in, (MPI_Count)1, MPI_INT, partner, 2, world, MPI_STATUS_IGNORE);
      CALL(Ssend, &out, 1, MPI_INT, partner, 2, world);
    }
    mix(&in, 1);
    /* Ready send: the receive is posted before the barrier, the send after it. */
    CALL(Irecv, &in, 1, MPI_INT, partner, 3, world, &request);
    CALL(Barrier, world);
    CALL(Rsend, &out, 1, MPI_INT, partner, 3, world);
    CALL(Wait, &request, MPI_STATUS_IGNORE);
    count("MPI_Irecv", 0, 1);
    mix(&in, 1);
    /* Buffered send. */
    static char attached[4096];
    MPI_Buffer_attach(attached, sizeof attached);
    CALL(Bsend, &out, 1, MPI_INT, partner, 4, world);
    CALL(Recv, &in, 1, MPI_INT, partner, 4, world, MPI_STATUS_IGNORE);
    void* detached;
    int detached_size;
    MPI_Buffer_detach(&detached, &detached_size);
    mix(&in, 1);
    /* Probe, then receive what it found. */
    MPI_Status probed;
    CALL(Send, &out, 1, MPI_INT, partner, 8, world);
    CALL(Probe, MPI_ANY_SOURCE, 8, world, &probed);
    CALL(Recv, &in, 1, MPI_INT, probed.MPI_SOURCE, probed.MPI_TAG, world, MPI_STATUS_IGNORE);
    mix(&in, 1);
    /* Matched probe and receive, blocking and nonblocking. */
    MPI_Message message;
    CALL(Send, &out, 1, MPI_INT, partner, 5, world);
    CALL(Mprobe, partner, 5, world, &message, MPI_STATUS_IGNORE);
    CALL(Mrecv, &in, 1, MPI_INT, &message, MPI_STATUS_IGNORE);
    mix(&in, 1);
    CALL(Isend, &out, 1, MPI_INT, partner, 6, world, &pair[0]);
    CALL(Mprobe, partner, 6, world, &message, MPI_STATUS_IGNORE);
    CALL(Imrecv, &in, 1, MPI_INT, &message, &pair[1]);
    CALL(Waitall, 2, pair, MPI_STATUSES_IGNORE);
    count("MPI_Isend", 0, 1);
    count("MPI_Imrecv", 0, 1);
    mix(&in, 1);
    CALL(Issend, &out, 1, MPI_INT, partner, 7, world, &pair[0]);
    CALL(Irecv, &in, 1, MPI_INT, partner, 7, world, &pair[1]);
    CALL(Waitall, 2, pair, MPI_STATUSES_IGNORE);
    count("MPI_Issend", 0, 1);
    count("MPI_Irecv", 0, 1);
    mix(&in, 1);
    CALL(Sendrecv, &out, 1, MPI_INT, partner, 8, &in, 1, MPI_INT, partner, 8, world,
         MPI_STATUS_IGNORE);
    mix(&in, 1);
    int replaced = out * 3;
    CALL(Sendrecv_replace, &replaced, 1, MPI_INT, partner, 9, partner, 9, world, MPI_STATUS_IGNORE);
    mix(&replaced, 1);
    CALL(Isendrecv, &out, 1, MPI_INT, partner, 10, &in, 1, MPI_INT, partner, 10, world, &request);
    CALL(Wait, &request, MPI_STATUS_IGNORE);
    count("MPI_Isendrecv", 0, 1);
    mix(&in, 1);

    /* Pack and unpack through a committed derived datatype. */
    MPI_Datatype strided;
    MPI_Type_vector(4, 1, 3, MPI_INT, &strided);
    CALL(Type_commit, &strided);
    int packed_size = 0, position = 0;
    char packed[256];
    CALL(Pack_size, 2, strided, world, &packed_size);
    CALL(Pack, send, 2, strided, packed, (int)sizeof packed, &position, world);
    int unpacked[24] = {0};
    position = 0;
    CALL(Unpack, packed, (int)sizeof packed, &position, unpacked, 2, strided, world);
    mix(unpacked, 24);
    CALL(Type_free, &strided);

    /* Communicators made and freed. */
    MPI_Comm dup, split, shared, created, grouped, idup;
    MPI_Group group;
    CALL(Comm_dup, world, &dup);
    CALL(Comm_split, world, rank % 2, rank, &split);
    CALL(Comm_split_type, world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
    MPI_Comm_group(world, &group);
    CALL(Comm_create, world, group, &created);
    CALL(Comm_create_group, world, group, 11, &grouped);
    MPI_Group_free(&group);
    CALL(Comm_idup, world, &idup, &request);
    CALL(Wait, &request, MPI_STATUS_IGNORE);
    count("MPI_Comm_idup", 0, 1);
    CALL(Allreduce, &rank, &in, 1, MPI_INT, MPI_SUM, split);
    mix(&in, 1);
    CALL(Comm_free, &dup);
    CALL(Comm_free, &split);
    /* Ranks left out of a split get MPI_COMM_NULL. */
    MPI_Comm some;
    CALL(Comm_split, world, rank == 0 ? MPI_UNDEFINED : 0, rank, &some);
    if (some != MPI_COMM_NULL) CALL(Comm_free, &some);
    /* An intercommunicator made by a call commtap does not intercept, then duplicated. */
    MPI_Comm half, inter, inter_dup;
    CALL(Comm_split, world, rank % 2, rank, &half);
    MPI_Intercomm_create(half, 0, world, rank % 2 == 0 ? 1 : 0, 12, &inter);
    CALL(Comm_dup, inter, &inter_dup);
    CALL(Comm_free, &inter_dup);
    CALL(Comm_free, &inter);
    CALL(Comm_free, &half);
    CALL(Comm_free, &shared);
    CALL(Comm_free, &created);
    CALL(Comm_free, &grouped);
    CALL(Comm_free, &idup);

    /* One-sided synchronization on a window of every rank (the puts and gets are not
     * intercepted): fence, post-start-complete-wait with the partner, lock and lock_all epochs
     * with their flushes. */
    int window[4] = {0, 0, 0, 0}, got = 0;
    MPI_Win win;
    CALL(Win_create, window, sizeof window, sizeof(int), MPI_INFO_NULL, world, &win);
    CALL(Win_fence, 0, win);
    MPI_Put(&rank, 1, MPI_INT, partner, 0, 1, MPI_INT, win);
    CALL(Win_fence, 0, win);
    MPI_Group world_group, partner_group;
    MPI_Comm_group(world, &world_group);
    MPI_Group_incl(world_group, 1, &partner, &partner_group);
    CALL(Win_post, partner_group, 0, win);
    CALL(Win_start, partner_group, 0, win);
    MPI_Put(&rank, 1, MPI_INT, partner, 1, 1, MPI_INT, win);
    CALL(Win_complete, win);
    CALL(Win_wait, win);
    MPI_Group_free(&partner_group);
    MPI_Group_free(&world_group);
    CALL(Win_lock, MPI_LOCK_SHARED, partner, 0, win);
    MPI_Get(&got, 1, MPI_INT, partner, 0, 1, MPI_INT, win);
    CALL(Win_flush, partner, win);
    CALL(Win_flush_local, partner, win);
    CALL(Win_unlock, partner, win);
    CALL(Win_lock_all, 0, win);
    CALL(Win_sync, win);
    MPI_Get(&got, 1, MPI_INT, partner, 1, 1, MPI_INT, win);
    CALL(Win_flush_all, win);
    CALL(Win_flush_local_all, win);
    CALL(Win_unlock_all, win);
    mix(&got, 1);
    CALL(Win_free, &win);

    /* Every other way of making a window (each freed at once): allocated, allocated in memory
     * the node shares (on a communicator of one node's ranks), dynamic, and the large-count
     * forms. */
    MPI_Comm node;
    CALL(Comm_split_type, world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    void* base = NULL;
    CALL(Win_allocate, 64, 8, MPI_INFO_NULL, world, &base, &win);
    CALL(Win_free, &win);
    CALL(Win_allocate_c, 64, 8, MPI_INFO_NULL, world, &base, &win);
    CALL(Win_free, &win);
    CALL(Win_allocate_shared, 64, 8, MPI_INFO_NULL, node, &base, &win);
    CALL(Win_free, &win);
    CALL(Win_allocate_shared_c, 64, 8, MPI_INFO_NULL, node, &base, &win);
    CALL(Win_free, &win);
    CALL(Win_create_dynamic, MPI_INFO_NULL, world, &win);
    CALL(Win_free, &win);
    CALL(Win_create_c, window, sizeof window, sizeof(int), MPI_INFO_NULL, world, &win);
    CALL(Win_fence, 0, win);
    CALL(Win_fence, 0, win);
    CALL(Win_free, &win);
    CALL(Comm_free, &node);
  }
  CALL(Request_free, &persistent_allreduce);
  CALL(Request_free, &persistent_barrier);
  CALL(Request_free, &persistent_p2p[0]);
  CALL(Request_free, &persistent_p2p[1]);

  uint64_t all[256] = {0};
  CALL(Gather, &checksum, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, world);
  if (rank == 0)
    for (int r = 0; r < size && r < 256; ++r)
      printf("rank %d checksum %016llx\n", r, (unsigned long long)all[r]);

  count("MPI_Finalize", 1, 0);
  char path[4096];
  snprintf(path, sizeof path, "%s/expected-rank-%d.txt", argv[1], rank);
  FILE* out = fopen(path, "w");
  if (out == NULL) {
    perror(path);
    MPI_Abort(world, 3);
  }
  for (int i = 0; i < tallied; ++i)
    fprintf(out, "%s %ld %ld\n", tally[i].name, tally[i].calls, tally[i].completions);
  fclose(out);
  free(send);
  free(recv);
  free(counts);
  free(displs);
  free(types);
  MPI_Finalize();
  return 0;
}
