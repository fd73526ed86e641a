/* Point-to-point messages in every form commtap numbers, with seeded random sizes, and the
 * ground truth of what each rank sent and received: the transfers test compares it with the
 * trace database, side by side.
 *
 *   mpiexec -n <P >= 2> ./transfers <truth directory> [rounds]
 *
 * Each rank writes <dir>/truth-rank-<R>.txt, one "direction peer tag msg bytes" line per message
 * it sent or received, and rank 0 prints a checksum of everything received so that native and
 * preloaded runs can be compared. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_INTS 3000
#define MAX_LINES 4096

static struct {
  char direction;
  int peer, tag;
  long msg, bytes;
} lines[MAX_LINES];
static int line_count = 0;
/* Messages per (direction, peer, tag): the numbering commtap must reproduce. */
static long numbered[2][64][16];

static void note(char direction, int peer, int tag, long bytes) {
  long* n = &numbered[direction == 's' ? 0 : 1][peer][tag];
  lines[line_count].direction = direction;
  lines[line_count].peer = peer;
  lines[line_count].tag = tag;
  lines[line_count].msg = ++*n;
  lines[line_count].bytes = bytes;
  ++line_count;
}

/* How many ints `sender` sends in `round` for `tag`: the receiver computes the same. */
static int size_of(int sender, int round, int tag) {
  uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(sender + 1) ^ (uint64_t)round * 1000003u ^
               (uint64_t)tag * 7919u;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return (int)(x % MAX_INTS);
}

static uint64_t checksum = 1469598103934665603ull;
static void mix(const int* values, int n) {
  for (int i = 0; i < n; ++i)
    checksum = (checksum ^ (uint64_t)(uint32_t)values[i]) * 1099511628211ull;
}

static void fill(int* buffer, int n, int seed) {
  for (int i = 0; i < n; ++i) buffer[i] = seed * 31 + i;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2 || size > 64 || argc < 2) {
    if (rank == 0) fprintf(stderr, "usage: mpiexec -n <2..64> %s <dir> [rounds]\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int rounds = argc > 2 ? atoi(argv[2]) : 8;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  static int out[MAX_INTS], out2[MAX_INTS], in[MAX_INTS], in2[MAX_INTS];
  MPI_Comm busy;
  MPI_Comm_dup(MPI_COMM_WORLD, &busy);
  const int B = (int)sizeof(int);

  for (int round = 0; round < rounds; ++round) {
    /* 1: Isend right, blocking Recv from left (status ignored), Wait. */
    MPI_Request send;
    int n = size_of(rank, round, 1), m = size_of(left, round, 1);
    fill(out, n, round);
    MPI_Isend(out, n, MPI_INT, right, 1, MPI_COMM_WORLD, &send);
    note('s', right, 1, (long)n * B);
    MPI_Recv(in, MAX_INTS, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    note('r', left, 1, (long)m * B);
    mix(in, m);
    MPI_Wait(&send, MPI_STATUS_IGNORE);

    /* 2: wildcard Irecv completed with a status (any source in even rounds, any tag from the
     * left in odd ones: only the left's tag-2 message can match either); blocking Send right. */
    MPI_Request receive;
    MPI_Status status;
    if (round % 2 == 0)
      MPI_Irecv(in, MAX_INTS, MPI_INT, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &receive);
    else
      MPI_Irecv(in, MAX_INTS, MPI_INT, left, MPI_ANY_TAG, MPI_COMM_WORLD, &receive);
    n = size_of(rank, round, 2);
    fill(out, n, round + 100);
    MPI_Send(out, n, MPI_INT, right, 2, MPI_COMM_WORLD);
    note('s', right, 2, (long)n * B);
    MPI_Wait(&receive, &status);
    int got = 0;
    MPI_Get_count(&status, MPI_INT, &got);
    note('r', status.MPI_SOURCE, status.MPI_TAG, (long)got * B);
    mix(in, got);

    /* 3: Sendrecv right-to-left and Sendrecv_replace left-to-right. */
    n = size_of(rank, round, 3);
    m = size_of(right, round, 3);
    fill(out, n, round + 200);
    MPI_Sendrecv(out, n, MPI_INT, left, 3, in, MAX_INTS, MPI_INT, right, 3, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    note('s', left, 3, (long)n * B);
    note('r', right, 3, (long)m * B);
    mix(in, m);
    fill(in2, 64, round + 300);
    MPI_Sendrecv_replace(in2, 64, MPI_INT, right, 4, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    note('s', right, 4, 64L * B);
    note('r', left, 4, 64L * B);
    mix(in2, 64);

    /* 4: two specific Irecvs and two Isends on one tag, Waitall with statuses ignored. */
    MPI_Request four[4];
    n = size_of(rank, round, 5);
    m = size_of(left, round, 5);
    MPI_Irecv(in, MAX_INTS, MPI_INT, left, 5, MPI_COMM_WORLD, &four[0]);
    MPI_Irecv(in2, MAX_INTS, MPI_INT, left, 5, MPI_COMM_WORLD, &four[1]);
    fill(out, n, round + 400);
    fill(out2, 7, round + 500);
    MPI_Isend(out, n, MPI_INT, right, 5, MPI_COMM_WORLD, &four[2]);
    MPI_Isend(out2, 7, MPI_INT, right, 5, MPI_COMM_WORLD, &four[3]);
    note('r', left, 5, (long)m * B);
    note('r', left, 5, 7L * B);
    note('s', right, 5, (long)n * B);
    note('s', right, 5, 7L * B);
    MPI_Waitall(4, four, MPI_STATUSES_IGNORE);
    mix(in, m);
    mix(in2, 7);

    /* 4b: two specific Irecvs on one tag, waited for in reverse order with MPI_Wait: the first
     * (delivered first) is watched while the rank waits for the second. */
    MPI_Request two[2], sent[2];
    MPI_Irecv(in, 7, MPI_INT, left, 8, MPI_COMM_WORLD, &two[0]);
    MPI_Irecv(in2, 7, MPI_INT, left, 8, MPI_COMM_WORLD, &two[1]);
    fill(out, 7, round + 600);
    fill(out2, 7, round + 700);
    MPI_Isend(out, 7, MPI_INT, right, 8, MPI_COMM_WORLD, &sent[0]);
    MPI_Isend(out2, 7, MPI_INT, right, 8, MPI_COMM_WORLD, &sent[1]);
    note('r', left, 8, 7L * B);
    note('r', left, 8, 7L * B);
    note('s', right, 8, 7L * B);
    note('s', right, 8, 7L * B);
    MPI_Wait(&two[1], MPI_STATUS_IGNORE);
    MPI_Wait(&two[0], MPI_STATUS_IGNORE);
    MPI_Waitall(2, sent, MPI_STATUSES_IGNORE);
    mix(in, 7);
    mix(in2, 7);

    /* 4c: a receive that arrives while the receiver is busy elsewhere, then waited for: the
     * barrier after the send (on a communicator of its own, so that MPI_COMM_WORLD's collectives
     * stay as the test counts them; the left rank enters it after its MPI_Isend, and its
     * messages from the left follow the data on the same channel) has the message in before the
     * wait, so MPI_Wait finds it done at its first look, and the receive was last seen pending
     * no later than its post. */
    MPI_Irecv(in, 7, MPI_INT, left, 9, MPI_COMM_WORLD, &receive);
    fill(out, 7, round + 800);
    MPI_Isend(out, 7, MPI_INT, right, 9, MPI_COMM_WORLD, &send);
    note('r', left, 9, 7L * B);
    note('s', right, 9, 7L * B);
    MPI_Barrier(busy);
    MPI_Wait(&receive, MPI_STATUS_IGNORE);
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    mix(in, 7);

    /* 5: to and from MPI_PROC_NULL: no transfer at all. */
    MPI_Send(out, 1, MPI_INT, MPI_PROC_NULL, 6, MPI_COMM_WORLD);
    MPI_Recv(in, 1, MPI_INT, MPI_PROC_NULL, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    int total = round;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    mix(&total, 1);
  }

  /* 6: a wildcard receive completed with MPI_STATUS_IGNORE: commtap reads the status anyway. */
  MPI_Request receive;
  MPI_Irecv(in, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &receive);
  MPI_Send(out, 1, MPI_INT, right, 7, MPI_COMM_WORLD);
  note('s', right, 7, B);
  MPI_Wait(&receive, MPI_STATUS_IGNORE);
  note('r', left, 7, B);

  MPI_Comm_free(&busy);
  char path[4096];
  snprintf(path, sizeof path, "%s/truth-rank-%d.txt", argv[1], rank);
  FILE* truth = fopen(path, "w");
  if (truth == NULL) MPI_Abort(MPI_COMM_WORLD, 3);
  for (int i = 0; i < line_count; ++i)
    fprintf(truth, "%s %d %d %ld %ld\n", lines[i].direction == 's' ? "send" : "recv", lines[i].peer,
            lines[i].tag, lines[i].msg, lines[i].bytes);
  fclose(truth);
  uint64_t all = 0;
  MPI_Reduce(&checksum, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("checksum %016llx\n", (unsigned long long)all);
  MPI_Finalize();
  return 0;
}
