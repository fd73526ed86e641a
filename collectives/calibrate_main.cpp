// commtap-calibrate: measures commtap's all-reduce cost model on the machines it is launched on
// and writes it as a model file for COMMTAP_MODEL. Run it once per machine type, with at least
// two ranks per node on at least two nodes so that both levels are measured (what is missing
// keeps the built-in values): usually through `commtap calibrate -o FILE -- mpiexec ...`.
//
//   commtap-calibrate OUTPUT.json
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "collectives/collectives.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) {
    if (rank == 0) std::fprintf(stderr, "usage: commtap-calibrate OUTPUT.json\n");
    MPI_Finalize();
    return 2;
  }
  using namespace commtap::collectives;
  const Topology* topology = topology_of(MPI_COMM_WORLD, 0);
  const CostModel model = measure_cost_model(*topology, CostModel{});
  int status = 0;
  if (rank == 0) {
    std::ofstream out(argv[1]);
    out << cost_model_json(model, topology->size, topology->nodes);
    out.close();
    if (!out) {
      std::fprintf(stderr, "commtap-calibrate: cannot write %s\n", argv[1]);
      status = 1;
    } else {
      std::printf(
          "commtap-calibrate: %d ranks on %d nodes: intra-node %.2f us + %.3f ns/B, inter-node "
          "%.2f us + %.3f ns/B, reduction %.3f ns/B%s -> %s\n",
          topology->size, topology->nodes, model.intra_alpha * 1e6, model.intra_beta * 1e9,
          model.inter_alpha * 1e6, model.inter_beta * 1e9, model.gamma * 1e9,
          topology->nodes < 2 || topology->max_local_size < 2
              ? " (a level with one node or one rank per node keeps the built-in values)"
              : "",
          argv[1]);
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
