// collectives: commtap's own all-reduce, as the rest of commtap sees it: the algorithm names
// (COMMTAP_ALLREDUCE), the context agreed at MPI_Init, and the call that takes an MPI_Allreduce
// or leaves it to the library. What the module is made of (topology, the algorithms, the cost
// model, the eligibility rules) has internal headers of its own, for its tests and benchmarks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/algorithm_list.hpp"
#include "settings/module_settings.hpp"

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

// One message commtap's own all-reduce sent or received itself (for the trace's transfers
// table). The stages it leaves to the library's collectives (the node stages of the
// hierarchical forms, every stage of hier-pipe) are the library's messages and not listed.
struct Step {
  bool send = false;
  int peer = -1;  // the other side's rank in MPI_COMM_WORLD
  std::uint64_t bytes = 0;
  std::uint64_t start_ns = 0;  // the post (monitor::now_ns)
  std::uint64_t end_ns = 0;    // the return of the wait that completed it
};

// What every rank agreed on at MPI_Init: the cost model and the hosts and links to route around
// (collectives/context.hpp).
struct Agreement;

// What the module is told once, at MPI_Init: the settings and the agreement, equal on all ranks
// (only the algorithm can change later, at the same point on every rank).
struct Context {
  Algorithm allreduce = Algorithm::native;  // COMMTAP_ALLREDUCE
  int test_nodes = 0;                       // COMMTAP_TEST_NODES
  int knomial_radix = 0;                    // COMMTAP_KNOMIAL_RADIX (0: the cost model's)
  bool yield = false;                       // COMMTAP_YIELD
  int trial_rounds = 0;                     // COMMTAP_ALLREDUCE_TRIALS (0: the formulas alone)
  bool report_trials = false;               // COMMTAP_VERBOSE >= 2: each trial on stderr
  // Every rank of the job shares one node (real ones; COMMTAP_TEST_NODES pretends more):
  // `auto` is the library's everywhere, decided at MPI_Init without a message.
  bool one_node = false;
  // Null until start() agrees on one (and for a native job): the built-in cost model, nothing
  // avoided.
  std::shared_ptr<const Agreement> agreed;
};

// The context from the settings, agreed on all ranks of `comm` (commtap's private duplicate of
// MPI_COMM_WORLD; collective), whose ranks sit on `nodes` nodes: the algorithm (an unknown name
// is a problem, and native), the hosts and links to avoid (COMMTAP_AVOID_HOSTS: names and
// FROM->TO / A<->B links, or @FILE, a findings store's avoid list, read by rank 0), and the cost
// model (measured now with COMMTAP_CALIBRATE=1, read by rank 0 from COMMTAP_MODEL, or built
// in). `auto` on one node needs none of it. Problems for the user are appended to `problems`,
// to be printed once. `yield`: commtap's own waits yield the core (COMMTAP_YIELD, the
// interposer's setting).
Context start(const CollectivesSettings& settings, bool yield, MPI_Comm comm, int nodes,
              std::vector<std::string>& problems);

// Whether every all-reduce goes to the library without a look: native, or auto on one node.
inline bool leaves_allreduce_to_library(const Context& context) noexcept {
  return context.allreduce == Algorithm::native ||
         (context.allreduce == Algorithm::automatic && context.one_node);
}

// MPI_Allreduce, by commtap if `context` asks for one of its algorithms, the call is eligible
// (collectives/policy.hpp), its buffers are in host memory, the communicator has made 8
// collective calls (`seq`, its sequence number: a communicator made for one call is not worth
// the private communicators) and (automatic) the model or a trial picks one; else by `library`,
// the library's own call, which also reports every erroneous call. Returns the MPI error code,
// with `used` naming who ran it and `steps`, when given, receiving the messages commtap's
// algorithm posted, in order.
int allreduce_call(const Context& context, const void* sendbuf, void* recvbuf, MPI_Count count,
                   MPI_Datatype type, MPI_Op op, MPI_Comm comm, std::uint64_t seq,
                   const std::function<int()>& library, Algorithm& used, std::vector<Step>* steps);

}  // namespace commtap::collectives
