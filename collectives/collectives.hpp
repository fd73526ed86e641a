// collectives: commtap's own all-reduce algorithms and the rules for when they may run.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "collectives/algorithm_list.hpp"
#include "settings/settings.hpp"

namespace commtap::collectives {

// Why a call must go to the MPI library untouched, or `eligible`.
enum class Eligibility {
  eligible,
  zero_count,
  single_rank,
  intercommunicator,
  derived_datatype,
  user_or_noncommutative_op,
  mpi_error,
};

const char* to_string(Eligibility reason) noexcept;

// Whether commtap's all-reduce algorithms may replace the library's for this call. They run
// only where they are known to give the library's answer: builtin datatypes, commutative
// builtin operations, intracommunicators of two or more ranks, non-zero counts.
Eligibility allreduce_eligibility(MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);

}  // namespace commtap::collectives

namespace commtap::collectives {

// The all-reduce algorithms (COMMTAP_ALLREDUCE).
enum class Algorithm {
#define COMMTAP_ALGORITHM_IDENTIFIER(identifier, name, what) identifier,
  COMMTAP_ALLREDUCE_ALGORITHMS(COMMTAP_ALGORITHM_IDENTIFIER)
#undef COMMTAP_ALGORITHM_IDENTIFIER
};
#define COMMTAP_ALGORITHM_ONE(identifier, name, what) +1
constexpr int kAlgorithmCount = 0 COMMTAP_ALLREDUCE_ALGORITHMS(COMMTAP_ALGORITHM_ONE);
#undef COMMTAP_ALGORITHM_ONE
// For loops over all of them.
constexpr Algorithm kLastAlgorithm = static_cast<Algorithm>(kAlgorithmCount - 1);
const char* algorithm_name(Algorithm algorithm) noexcept;
// Every name COMMTAP_ALLREDUCE takes, in enumeration order, separated by ", ".
std::string algorithm_names();
// Accepts the names of algorithm_names().
bool parse_algorithm(const std::string& text, Algorithm& algorithm) noexcept;

// The per-call parameters of the forms that have them, from the cost model for the call's size
// (choose()): the k of the two k-nomial forms, and the segment size of the pipelined one.
struct Tuning {
  int flat_radix = 2;                    // knomial: among all ranks
  int leaders_radix = 2;                 // hier-knomial: among the node leaders
  MPI_Count segment_bytes = 256 * 1024;  // hier-pipe: bytes per segment
};

// Where a communicator's ranks live, and commtap's private communicators for it: made by the
// first commtap all-reduce on the communicator (a collective call on all its ranks) and cached
// on it as an attribute, freed with it.
struct Topology {
  MPI_Comm flat = MPI_COMM_NULL;     // all ranks (a private duplicate)
  MPI_Comm node = MPI_COMM_NULL;     // the ranks of this rank's node
  MPI_Comm leaders = MPI_COMM_NULL;  // one rank per node (local rank 0); NULL on the others
  MPI_Comm peers = MPI_COMM_NULL;    // the ranks with this local rank on every node (regular)
  int size = 0, rank = 0;
  int nodes = 0, node_index = 0, local_size = 0, local_rank = 0;
  int max_local_size = 0;  // the largest node's ranks (equal on all ranks)
  bool regular = false;    // every node has the same number of ranks
  // Of recursive doubling's ceil(log2 size) rounds (the fold of the ranks past a power of two
  // counted as one), those whose every pair shares a node (round-robin placements have some).
  int rd_rounds_within_nodes = 0;
  // Of the buffer a recursive-halving reduce-scatter over the same pairs moves (1/2 in its first
  // round, 1/4 in the next...), the share sent in rounds that cross nodes.
  double halving_share_across_nodes = 0;
  // The two nodes whose leaders measure the network for the cost model (node indices, and the
  // first one's leader in `flat`): the first pair that no flagged link joins, neither of them
  // avoided, so that a slow link or host is charged as what crossing it costs and not as what
  // every link costs.
  int calibration_nodes[2] = {0, 1};
  int calibration_leader = 0;
  int star_root = 0;          // the star's root in `flat`: the first rank not on an avoided host
  int leaders_star_root = 0;  // the same among the leaders (hier-star), in `leaders`
  // Routing around flagged links (COMMTAP_AVOID_HOSTS). The ring's order of `flat` ranks, each
  // node's ranks together, the nodes ordered so that no ring step crosses a flagged link where
  // that can be done; the same for `leaders` (their ranks are node indices).
  std::vector<int> ring_order, leaders_ring_order;
  // Whether each form keeps off every flagged link between this communicator's hosts.
  bool ring_clear = true, leaders_ring_clear = true, star_clear = true, leaders_star_clear = true;
  // What crossing the worst flagged link here costs over a healthy one: latency (s), time per
  // byte (s/B), and whether one was named without figures (a list in the setting). 0: none.
  double flagged_alpha = 0, flagged_beta = 0;
  bool flagged_unmeasured = false;
  // The tuned forms' parameters for the call about to run (set per call).
  Tuning tuning;
  // choose()'s answers (algorithm, tuning) by call size in bytes, which depend on nothing else
  // that changes after MPI_Init; cleared when it grows past a few thousand sizes.
  std::unordered_map<MPI_Count, std::pair<Algorithm, Tuning>> chosen;
  std::vector<char> scratch;  // reused between calls (collectives on one communicator
                              // never run concurrently)
  // MPI_COMM_WORLD ranks of each private communicator's ranks, made when first needed (for
  // the steps of recorded calls).
  std::vector<std::pair<MPI_Comm, std::vector<int>>> world_ranks;
};

// A directed link between two hosts to route around, and what crossing it costs over a healthy
// link where a finding measured it (0 where not).
struct AvoidedLink {
  std::string from, to;
  double extra_alpha = 0;  // s
  double extra_beta = 0;   // s/B
};

// What to keep commtap's all-reduce traffic away from (COMMTAP_AVOID_HOSTS): hosts that must
// not be a star's root, and directed links no ring step or star message should cross. Host
// names as MPI_Get_processor_name gives them; with COMMTAP_TEST_NODES, pretend node k is
// "test-node-k". Equal on all ranks.
struct Avoid {
  std::vector<std::string> hosts;
  std::vector<AvoidedLink> links;
};

// The topology of `comm`, made on first use (collective). `test_nodes` > 0 makes that many
// pretend nodes, ranks dealt round-robin (for tests of non-block placements on one machine); 0
// asks MPI (MPI_COMM_TYPE_SHARED). `avoid` sets the star roots, the ring orders and what a
// flagged link costs the cost model.
Topology* topology_of(MPI_Comm comm, int test_nodes, const Avoid& avoid = {});

// The ring order of nodes 0..nodes-1 (node 0 first) that crosses the fewest `flagged` directed
// node pairs (from, to) from one node to the next, and how many it crosses: every order for up
// to 9 nodes, otherwise the rank order, its reverse and seeded shuffles. The same on every rank.
std::pair<std::vector<int>, int> ring_of_nodes(int nodes,
                                               const std::vector<std::pair<int, int>>& flagged);

// commtap's all-reduce with `algorithm` (not native or automatic: see choose()). The call must
// be eligible (allreduce_eligibility) and the buffers in host memory. Returns an MPI error code.
// `yield`: wait with test-and-sched_yield loops instead of blocking.
//
// `steps`, when given, receives every message the algorithm sends or receives itself, in the
// order they were posted (for the trace's transfers table); the stages it leaves to the
// library's collectives (the node stages of the hierarchical forms, every stage of hier-pipe)
// are the library's messages and not listed.
struct Step {
  bool send = false;
  int peer = -1;  // the other side's rank in MPI_COMM_WORLD
  std::uint64_t bytes = 0;
  std::uint64_t start_ns = 0;  // the post (monitor::now_ns)
  std::uint64_t end_ns = 0;    // the return of the wait that completed it
};
int allreduce(Algorithm algorithm, const void* sendbuf, void* recvbuf, MPI_Count count,
              MPI_Datatype type, MPI_Op op, Topology& topology, bool yield,
              std::vector<Step>* steps = nullptr);

// What automatic selection picks for `bytes` on this topology: the model's cheapest algorithm,
// or native when the model predicts no clear gain. Uses only what every rank of the
// communicator knows alike, so all ranks choose the same.
//
// A model file may also hold measured choices (`commtap calibrate` makes them): for the shape it
// was measured on, the algorithm to use at each measured size, native unless one of commtap's
// beat the library's clearly and consistently. They take precedence over the formulas for that
// shape (ranks, nodes, largest node) and sizes up to the largest measured, where a size between
// two measured ones gets commtap's algorithm only if both chose the same; elsewhere the
// formulas decide.
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
// `tuning`, when given, receives the knomial forms' best k and the pipelined form's best segment
// size for this size by the formulas (whether or not one of them is chosen).
Algorithm choose(const CostModel& model, const Topology& topology, MPI_Count bytes,
                 Tuning* tuning = nullptr);

// Whether `algorithm` asks the cost model anything: auto, and the forms it tunes (knomial's k,
// hier-pipe's segments).
bool asks_the_model(Algorithm algorithm) noexcept;

// For commtap's own tests (COMMTAP_TEST_REVERSED_FOLD): this rank folds the direct and knomial
// exchanges' buffers in the other order, so that its floating-point results differ from the
// other ranks' in the last bits; the sweep test must catch that.
void reverse_folds_for_tests(bool on);

// What the module is told once, at MPI_Init: the settings and the agreed cost model, equal on all
// ranks (only the algorithm can change later, at the same point on every rank).
struct Context {
  Algorithm allreduce = Algorithm::native;  // COMMTAP_ALLREDUCE
  CostModel cost_model;                     // for automatic
  Avoid avoid;                              // hosts and links to route around
  int test_nodes = 0;                       // COMMTAP_TEST_NODES
  int knomial_radix = 0;                    // COMMTAP_KNOMIAL_RADIX (0: the cost model's)
  bool yield = false;                       // COMMTAP_YIELD
};

// The context from the settings, agreed on all ranks of `comm` (commtap's private duplicate of
// MPI_COMM_WORLD; collective): the algorithm (an unknown name is a problem, and native), the
// hosts and links to avoid (COMMTAP_AVOID_HOSTS: names and FROM->TO / A<->B links, or @FILE, a
// findings store read by rank 0), and the
// cost model (measured now with COMMTAP_CALIBRATE=1, read by rank 0 from COMMTAP_MODEL, or built
// in). Problems for the user are appended to `problems`, to be printed once.
Context start(const Settings& settings, MPI_Comm comm, std::vector<std::string>& problems);

// MPI_Allreduce by commtap, if `context` asks for one of its algorithms, the call is eligible
// (allreduce_eligibility) and its buffers are in host memory, and (automatic) the model chooses
// one: the MPI error code, with `used` naming the algorithm (and `steps` its messages, see
// allreduce()). nullopt: not taken, the caller runs the library's, which also reports every
// erroneous call.
std::optional<int> try_allreduce(const Context& context, const void* sendbuf, void* recvbuf,
                                 MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                 Algorithm& used, std::vector<Step>* steps);

// Measures the choices on this topology (collective over `topology.flat`): for each size from
// 8 B up to `max_bytes` (x4), the library's all-reduce and each of commtap's, interleaved, in
// `rounds` rounds, each the slowest rank's mean over enough calls to fill about 20 ms. The
// best of commtap's by the median round is chosen for a size when its median is 10% below the
// library's and even its slowest round is no slower than the library's median; else native. Fills
// model.choices and the shape. `yield`: every algorithm, the library's included, waits with
// test-and-yield loops (COMMTAP_YIELD=1).
void measure_choices(Topology& topology, CostModel& model, std::int64_t max_bytes, int rounds,
                     bool yield);

// Measures the cost model on this topology (collective over `topology.flat`): one-way times of
// 8 B to 256 KiB and a burst of small messages between two ranks of one node and between the
// leaders of Topology::calibration_nodes (the fastest of several), and the local reduction of
// 1 MiB of doubles. The figures go to every rank, so all choose alike. Levels that do not exist
// here (one node, one rank per node) keep `defaults`' values. Takes a few milliseconds. Every
// wait tests and yields, whatever COMMTAP_YIELD says: with more ranks than cores, ranks spinning
// while others measure would be measured as latency (a scheduler tick, milliseconds).
CostModel measure_cost_model(const Topology& topology, const CostModel& defaults);

// `root`'s `model` on every rank of `comm` (collective; `yield`: every wait tests and yields).
void broadcast_cost_model(CostModel& model, MPI_Comm comm, bool yield = false, int root = 0);

// The cost model as the JSON of a model file (`commtap calibrate` writes one), and back.
// parse_cost_model returns false with `error` set for anything but a complete, plausible model.
std::string cost_model_json(const CostModel& model, int ranks, int nodes);
bool parse_cost_model(const std::string& text, CostModel& model, std::string& error);

}  // namespace commtap::collectives
