// commtap-calibrate: measures commtap's all-reduce cost model on the machines it is launched on
// and writes it as a model file for COMMTAP_MODEL. Run it once per machine type, with at least
// two ranks per node on at least two nodes so that both levels are measured (what is missing
// keeps the built-in values): usually through `commtap calibrate -o FILE -- mpiexec ...`.
//
//   commtap-calibrate OUTPUT.json [CHOICES_UP_TO_BYTES [ROUNDS [YIELD]]]
//
// With CHOICES_UP_TO_BYTES > 0 (default 4 MiB) it also times the library's all-reduce against
// each of commtap's on this very layout, up to that size, in ROUNDS interleaved rounds (default
// 5), waiting by test-and-yield if YIELD is 1, and stores the measured choices.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include "collectives/cost_model.hpp"
#include "collectives/topology.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const long long up_to = argc > 2 ? std::atoll(argv[2]) : 4 << 20;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  if (argc < 2 || argc > 5 || up_to < 0 || rounds < 1) {
    if (rank == 0)
      std::fprintf(stderr,
                   "usage: commtap-calibrate OUTPUT.json [CHOICES_UP_TO_BYTES [ROUNDS [YIELD]]]\n");
    MPI_Finalize();
    return 2;
  }
  using namespace commtap::collectives;
  Topology* topology = topology_of(MPI_COMM_WORLD, 0);
  const bool yield = argc > 4 && std::atoi(argv[4]) == 1;
  CostModel model = measure_cost_model(*topology, CostModel{});
  if (up_to > 0 && topology->size > 1) measure_choices(*topology, model, up_to, rounds, yield);
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
          "commtap-calibrate: %d ranks on %d nodes: intra-node %.2f us + %.3f ns/B, %.2f us "
          "per message, inter-node %.2f us + %.3f ns/B, %.2f us per message, reduction %.3f "
          "ns/B%s -> %s\n",
          topology->size, topology->nodes, model.intra_alpha * 1e6, model.intra_beta * 1e9,
          model.intra_overhead * 1e6, model.inter_alpha * 1e6, model.inter_beta * 1e9,
          model.inter_overhead * 1e6, model.gamma * 1e9,
          topology->nodes < 2 || topology->max_local_size < 2
              ? " (a level with one node or one rank per node keeps the built-in values)"
              : "",
          argv[1]);
      // The one-way times the formulas follow where they leave the line.
      for (const auto& [name, points] :
           {std::pair{"intra-node", &model.intra_points}, {"inter-node", &model.inter_points}}) {
        if (points->empty()) continue;
        std::printf("  %s one-way:", name);
        for (const auto& [bytes, seconds] : *points)
          std::printf(" %.0f B %.1f us;", bytes, seconds * 1e6);
        std::printf("\n");
      }
      for (const MeasuredChoice& c : model.choices)
        std::printf("  up to %lld B: %s (library %.1f us, best of commtap's %.1f us)\n",
                    static_cast<long long>(c.up_to_bytes), algorithm_name(c.algorithm), c.native_us,
                    c.algorithm_us);
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
