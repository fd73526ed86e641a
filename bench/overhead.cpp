// Added nanoseconds per intercepted call. Run by bench/overhead.sh natively, preloaded with
// COMMTAP_DISABLE=1 and preloaded with everything on; it prints one line per measurement:
//   allreduce8 <ns per call>        (1 rank: 8-byte MPI_Allreduce on MPI_COMM_WORLD)
//   p2p_self8 <ns per MPI_Irecv+MPI_Send+MPI_Wait>   (1 rank, to itself: no second process; the
//             receive is posted first because a blocking send to self may wait forever)
//   pingpong8 <ns per MPI_Send+MPI_Recv pair, i.e. half a round trip>   (2 ranks)
//   exchange8 <ns per 2 MPI_Irecv + 2 MPI_Isend + MPI_Waitall(4), 8 B each>   (2 ranks)
// Each figure is the median of several timed batches, after a warm-up batch, 1.5 s after MPI_Init
// (the second argument, in ms: 0 measures a short job, from MPI_Init on).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename Body>
double median_ns_per_call(int batches, long calls, Body body) {
  std::vector<double> per_call;
  body(calls / 10);  // warm-up
  for (int b = 0; b < batches; ++b) {
    const double start = now_ns();
    body(calls);
    per_call.push_back((now_ns() - start) / static_cast<double>(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long calls = argc > 1 ? std::atol(argv[1]) : 200000;
  const long settle_ms = argc > 2 ? std::atol(argv[2]) : 1500;
  const int batches = 9;
  // By default the steady state a long job runs in: past commtap's first writer window (1 s),
  // which re-measures the counter clock's rate. 0: what a job shorter than a window pays.
  std::this_thread::sleep_for(std::chrono::milliseconds(settle_ms));

  if (size == 1) {
    double in = 1.0, out = 0.0;
    const double ns = median_ns_per_call(batches, calls, [&](long n) {
      for (long i = 0; i < n; ++i) MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    });
    std::printf("allreduce8 %.2f\n", ns);
    double value = 1.0, received = 0.0;
    const double self_ns = median_ns_per_call(batches, calls, [&](long n) {
      for (long i = 0; i < n; ++i) {
        MPI_Request request;
        MPI_Irecv(&received, 1, MPI_DOUBLE, 0, 0, MPI_COMM_SELF, &request);
        MPI_Send(&value, 1, MPI_DOUBLE, 0, 0, MPI_COMM_SELF);
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      }
    });
    std::printf("p2p_self8 %.2f\n", self_ns);
  } else if (size == 2) {
    double value = 1.0;
    const int peer = 1 - rank;
    const double ns = median_ns_per_call(batches, calls / 4, [&](long n) {
      for (long i = 0; i < n; ++i) {
        if (rank == 0) {
          MPI_Send(&value, 1, MPI_DOUBLE, peer, 0, MPI_COMM_WORLD);
          MPI_Recv(&value, 1, MPI_DOUBLE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(&value, 1, MPI_DOUBLE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(&value, 1, MPI_DOUBLE, peer, 0, MPI_COMM_WORLD);
        }
      }
    });
    // One iteration is a round trip: two messages, each a Send on one side and a Recv on the
    // other. Report per one-way message.
    if (rank == 0) std::printf("pingpong8 %.2f\n", ns / 2);
    // A halo exchange: two receives and two sends each way, completed by one MPI_Waitall (the
    // call whose receives commtap stamps one by one where one of them is recorded).
    double in[2] = {0, 0}, out[2] = {1, 2};
    const double exchange_ns = median_ns_per_call(batches, calls / 4, [&](long n) {
      for (long i = 0; i < n; ++i) {
        MPI_Request requests[4];
        MPI_Irecv(&in[0], 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, &requests[0]);
        MPI_Irecv(&in[1], 1, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, &requests[1]);
        MPI_Isend(&out[0], 1, MPI_DOUBLE, peer, 1, MPI_COMM_WORLD, &requests[2]);
        MPI_Isend(&out[1], 1, MPI_DOUBLE, peer, 2, MPI_COMM_WORLD, &requests[3]);
        MPI_Waitall(4, requests, MPI_STATUSES_IGNORE);
      }
    });
    if (rank == 0) std::printf("exchange8 %.2f\n", exchange_ns);
  }
  MPI_Finalize();
  return 0;
}
