// A pipeline- and data-parallel training loop, the other common shape of a training job: ranks
// form a grid of 2 pipeline stages (rank % 2) by size / 2 data-parallel replicas. Each step the
// first stage sends activations to the second with blocking MPI_Send/MPI_Recv and gets gradients
// back; then each stage all-reduces its gradient with its replicas on a split communicator
// (MPI_Iallreduce, overlapped with the loss's MPI_Allreduce on the world), and now and then the
// world meets at a barrier. So only the links between the two stages of a replica carry the
// program's own messages; the others carry only the library's collective traffic. With an odd
// number of ranks the last one is a replica of its own (one stage, no pipeline messages).
// It prints a checksum that depends on every exchanged value, so a run under commtap can be
// compared with a native run byte for byte.
//
//   mpiexec -n 4 ./pipeline_train [steps] [gradient elements] [activation elements]
//                                 [compute per step, us]
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace {

void compute_for(long us) {
  if (us <= 0) return;
  const timespec pause{us / 1000000, (us % 1000000) * 1000};
  nanosleep(&pause, nullptr);
}

constexpr std::uint64_t kFnvPrime = 1099511628211ull;

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 50;
  const int elements = argc > 2 ? std::atoi(argv[2]) : 4096;
  const int activations = argc > 3 ? std::atoi(argv[3]) : 1024;
  const long step_us = argc > 4 ? std::atol(argv[4]) : 0;

  // Stage 0 and 1 of replica rank / 2; a last odd rank is both stages of its own replica.
  const bool paired = rank / 2 * 2 + 1 < size;
  const int stage = paired ? rank % 2 : 0;
  const int partner = !paired ? MPI_PROC_NULL : stage == 0 ? rank + 1 : rank - 1;
  MPI_Comm replicas;  // the same stage of every replica: data parallelism
  MPI_Comm_split(MPI_COMM_WORLD, stage, rank, &replicas);

  std::vector<std::int64_t> weights(elements, 1), gradient(elements), sum(elements);
  std::vector<std::int64_t> to_partner(activations), from_partner(activations);
  std::uint64_t checksum = 0;
  for (int step = 0; step < steps; ++step) {
    // Forward: stage 0 computes and sends activations; stage 1 receives them and computes.
    for (int i = 0; i < activations; ++i)
      to_partner[i] = (weights[i % elements] * 17 + rank * 5 + step * 3 + i) % 10007;
    if (stage == 0) {
      compute_for(step_us / 2);
      MPI_Send(to_partner.data(), activations, MPI_INT64_T, partner, step, MPI_COMM_WORLD);
      MPI_Recv(from_partner.data(), activations, MPI_INT64_T, partner, step, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(from_partner.data(), activations, MPI_INT64_T, partner, step, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      compute_for(step_us / 2);
      MPI_Send(to_partner.data(), activations, MPI_INT64_T, partner, step, MPI_COMM_WORLD);
    }
    if (partner != MPI_PROC_NULL) {
      for (int i = 0; i < activations; ++i) checksum = checksum * kFnvPrime + from_partner[i];
    }
    compute_for(step_us / 2);

    // Backward done: the stage's gradient, all-reduced across the replicas while the loss is
    // all-reduced across the world.
    for (int i = 0; i < elements; ++i)
      gradient[i] = (weights[i] * 31 + from_partner[i % activations] + step * 13 + i) % 1009;
    MPI_Request reduce;
    MPI_Iallreduce(gradient.data(), sum.data(), elements, MPI_INT64_T, MPI_SUM, replicas, &reduce);
    std::int64_t loss = gradient[step % elements], total_loss = 0;
    MPI_Allreduce(&loss, &total_loss, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Wait(&reduce, MPI_STATUS_IGNORE);
    for (int i = 0; i < elements; ++i) weights[i] = (weights[i] + sum[i] + total_loss) % 1000003;
    if (step % 10 == 9) MPI_Barrier(MPI_COMM_WORLD);
  }
  for (int i = 0; i < elements; ++i) checksum = checksum * kFnvPrime + weights[i];
  std::vector<std::uint64_t> all(rank == 0 ? size : 1);
  MPI_Gather(&checksum, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r)
      std::printf("rank %d checksum %016llx\n", r, static_cast<unsigned long long>(all[r]));
  }
  MPI_Comm_free(&replicas);
  MPI_Finalize();
  return 0;
}
