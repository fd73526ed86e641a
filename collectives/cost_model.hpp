// The all-reduce cost model: its parameters (a latency-bandwidth model per level, measured
// one-way times, the library's known threshold, measured choices), the formulas that choose a
// form per call size (cost_model.cpp), their measurement (calibration.cpp) and their forms
// outside one process: a model file and a broadcast (cost_model_io.cpp). Internal to
// collectives/ (`commtap calibrate`, tests and benchmarks use it too).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "collectives/collectives.hpp"
#include "collectives/topology.hpp"

namespace commtap::collectives {

// A model file may hold measured choices (`commtap calibrate` makes them): for the shape it was
// measured on, the algorithm to use at each measured size, native unless one of commtap's beat
// the library's clearly and consistently.
struct MeasuredChoice {
  std::int64_t up_to_bytes = 0;  // the size measured (ascending)
  Algorithm algorithm = Algorithm::native;
  double native_us = 0, algorithm_us = 0;  // medians measured at up_to_bytes: the library's,
                                           // the best of commtap's (for the file)
};

struct CostModel {
  // Per level: latency (s), time per byte on the wire (s/B), time per byte reduced (s/B).
  double intra_alpha = 1e-6, intra_beta = 2e-10, inter_alpha = 5e-6, inter_beta = 1e-9;
  double gamma = 2e-10;
  // Per level: what each message a rank sends or receives costs that rank (s; LogP's o),
  // beyond the latency that messages sent at once share: a form that sends p-1 messages at
  // once pays it p-1 times.
  double intra_overhead = 2e-7, inter_overhead = 1e-6;
  // Per level: measured one-way times of single messages (bytes, s), ascending, from 8 bytes to
  // 256 KiB. Where they lie above the line alpha + bytes x beta (a protocol switch: a rendezvous
  // handshake, TCP's window opening over a long round trip), each round of messages of that
  // size pays the difference. Empty: the line alone.
  std::vector<std::pair<double, double>> intra_points, inter_points;
  // Not measured but known from the library (at MPI_Init, collectives::start): the largest buffer
  // its all-reduce sends whole in recursive doubling; above it MPICH reduce-scatters and
  // all-gathers (Rabenseifner: twice the rounds, 2(p-1)/p of the bytes). 0: a library whose
  // choice is unknown, modelled as the best of its possible algorithms at every size.
  std::int64_t library_short_bytes = 0;
  int measured_ranks = 0, measured_nodes = 0, measured_largest_node = 0;  // the choices' shape
  std::vector<MeasuredChoice> choices;                                    // ascending up_to_bytes
};

// What the formulas predict for a call of `bytes` on this topology: the library's all-reduce
// (as it selects its algorithm, where that is known), each of commtap's forms that `auto` may
// pick (seconds, in the order of preference among equals), and the tuned forms' parameters.
struct Predictions {
  double native_s = 0;
  std::array<std::pair<double, Algorithm>, 9> forms{};
  Tuning tuning;
  const std::pair<double, Algorithm>& best_form() const noexcept;
};
Predictions predict(const CostModel& model, const Topology& topology, MPI_Count bytes);

// A model file's measured choice for `bytes` on this topology, where it has one (its shape, a
// size up to the largest measured, no link flagged since).
std::optional<Algorithm> measured_choice(const CostModel& model, const Topology& topology,
                                         MPI_Count bytes);

// Who takes part in `auto`'s trial of a size (online_choice.hpp): the library's first, then up
// to three of commtap's forms that the formulas predict within 30% of the faster of the
// library and their best; the library's alone on one node.
std::vector<Algorithm> contenders(const CostModel& model, const Topology& topology,
                                  MPI_Count bytes);

// What automatic selection picks for `bytes` on this topology: the model's cheapest algorithm,
// or native when the model predicts no clear gain. Uses only what every rank of the
// communicator knows alike, so all ranks choose the same.
//
// Measured choices take precedence over the formulas for the shape they were measured on
// (ranks, nodes, largest node) and sizes up to the largest measured, where a size between two
// measured ones gets commtap's algorithm only if both chose the same; elsewhere the formulas
// decide. `tuning`, when given, receives the knomial forms' best k and the pipelined form's best
// segment size for this size by the formulas (whether or not one of them is chosen).
Algorithm choose(const CostModel& model, const Topology& topology, MPI_Count bytes,
                 Tuning* tuning = nullptr);

// Whether `algorithm` asks the cost model anything: auto, and the forms it tunes (knomial's k,
// hier-pipe's segments).
bool asks_the_model(Algorithm algorithm) noexcept;

// Measures the cost model on this topology (collective over `topology.flat`): one-way times of
// 8 B to 256 KiB and a burst of small messages between two ranks of one node and between the
// leaders of Topology::calibration_nodes (the fastest of several), and the local reduction of
// 1 MiB of doubles. The figures go to every rank, so all choose alike. Levels that do not exist
// here (one node, one rank per node) keep `defaults`' values. Takes a few milliseconds. Every
// wait tests and yields, whatever COMMTAP_YIELD says: with more ranks than cores, ranks spinning
// while others measure would be measured as latency (a scheduler tick, milliseconds).
CostModel measure_cost_model(const Topology& topology, const CostModel& defaults);

// Measures the choices on this topology (collective over `topology.flat`): for each size from
// 8 B up to `max_bytes` (x4), the library's all-reduce and each of commtap's, interleaved, in
// `rounds` rounds, each the slowest rank's mean over enough calls to fill about 20 ms. The
// best of commtap's by the median round is chosen for a size when its median is 10% below the
// library's and even its slowest round is no slower than the library's median; else native. Fills
// model.choices and the shape. `yield`: every algorithm, the library's included, waits with
// test-and-yield loops (COMMTAP_YIELD=1).
void measure_choices(Topology& topology, CostModel& model, std::int64_t max_bytes, int rounds,
                     bool yield);

// `root`'s `model` on every rank of `comm` (collective; `yield`: every wait tests and yields).
void broadcast_cost_model(CostModel& model, MPI_Comm comm, bool yield = false, int root = 0);

// The cost model as the JSON of a model file (`commtap calibrate` writes one), and back.
// parse_cost_model returns false with `error` set for anything but a complete, plausible model.
std::string cost_model_json(const CostModel& model, int ranks, int nodes);
bool parse_cost_model(const std::string& text, CostModel& model, std::string& error);

}  // namespace commtap::collectives
