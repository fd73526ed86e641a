/* MPICH 4.0.2 defect: MPI_Isendrecv (and _replace) + MPI_Wait returns a broken status (source 0,
 * tag 0, count 0) when the receive is posted before its message arrives; a blocking
 * MPI_Sendrecv of the same message is right. Rank 1 posts first and only then tells rank 0 to
 * send, so the receive is always posted first on rank 1. Exits 1 when the defect is present. */
#include <mpi.h>
#include <stdio.h>

enum { kCount = 256, kTag = 7, kReady = 99 };

/* One exchange between ranks 0 and 1 with the receive side of rank 1 posted first.
 * form: 0 MPI_Sendrecv, 1 MPI_Isendrecv + MPI_Wait, 2 MPI_Isendrecv_replace + MPI_Wait. */
static void exchange(int rank, int form, MPI_Status* status) {
  float out[kCount], in[kCount];
  for (int i = 0; i < kCount; ++i) out[i] = in[i] = (float)(rank * 1000 + i);
  const int peer = 1 - rank;
  MPI_Request request = MPI_REQUEST_NULL;
  int token = 0;
  if (rank == 0) MPI_Recv(&token, 1, MPI_INT, 1, kReady, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (form == 0) {
    if (rank == 1) MPI_Send(&token, 1, MPI_INT, 0, kReady, MPI_COMM_WORLD);
    MPI_Sendrecv(out, kCount, MPI_FLOAT, peer, kTag, in, kCount, MPI_FLOAT, MPI_ANY_SOURCE,
                 MPI_ANY_TAG, MPI_COMM_WORLD, status);
    return;
  }
  if (form == 1)
    MPI_Isendrecv(out, kCount, MPI_FLOAT, peer, kTag, in, kCount, MPI_FLOAT, MPI_ANY_SOURCE,
                  MPI_ANY_TAG, MPI_COMM_WORLD, &request);
  else
    MPI_Isendrecv_replace(in, kCount, MPI_FLOAT, peer, kTag, MPI_ANY_SOURCE, MPI_ANY_TAG,
                          MPI_COMM_WORLD, &request);
  if (rank == 1) MPI_Send(&token, 1, MPI_INT, 0, kReady, MPI_COMM_WORLD);
  MPI_Wait(&request, status);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int defect = 0;
  if (rank < 2 && size >= 2) {
    static const char* names[] = {"MPI_Sendrecv", "MPI_Isendrecv", "MPI_Isendrecv_replace"};
    MPI_Status status[3];
    for (int form = 0; form < 3; ++form) {
      exchange(rank, form, &status[form]);
      int count = -1;
      MPI_Get_count(&status[form], MPI_FLOAT, &count);
      printf("rank %d %-22s source %d tag %d count %d\n", rank, names[form],
             status[form].MPI_SOURCE, status[form].MPI_TAG, count);
      defect |=
          status[form].MPI_SOURCE != 1 - rank || status[form].MPI_TAG != kTag || count != kCount;
    }
  }
  int any = 0;
  MPI_Allreduce(&defect, &any, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  if (rank == 0) printf(any ? "DEFECT PRESENT\n" : "no defect\n");
  MPI_Finalize();
  return any;
}
