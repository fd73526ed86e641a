// The all-reduce algorithms, once: the enumeration, the names COMMTAP_ALLREDUCE takes, the
// setting's description and bench/allreduce's columns are all made from this list. Macros only
// (no declarations), so that settings/all.def and programs that do not link commtap can use it.
//
// X(identifier, name, what it does)
#pragma once

// clang-format off
#define COMMTAP_ALLREDUCE_ALGORITHMS(X)                                                           \
  X(native, "native", "the MPI library's")                                                        \
  X(automatic, "auto", "the library's, or one of commtap's where it measured 10% faster in a "   \
                       "trial on the job's own calls (the cost model names the contenders)")      \
  X(hier, "hier", "node reduce, leaders' all-reduce, node broadcast")                             \
  X(hier_rs, "hier-rs", "node reduce-scatter, all-reduce of each slice across nodes, node "       \
                        "all-gather")                                                             \
  X(hier_pipe, "hier-pipe", "hier in segments whose node and network stages overlap")             \
  X(star, "star", "one root gathers, reduces and sends the result back, segmented; the root "     \
                  "avoids COMMTAP_AVOID_HOSTS")                                                   \
  X(ring, "ring", "reduce-scatter then all-gather around a ring")                                 \
  X(rd, "rd", "recursive doubling")                                                               \
  X(rabenseifner, "rabenseifner", "recursive-halving reduce-scatter, then recursive-doubling "    \
                                  "all-gather")                                                   \
  X(hier_star, "hier-star", "node reduce, star among the node leaders, node broadcast")        \
  X(direct, "direct", "every rank sends its buffer to every other and reduces all of them in "   \
                      "rank order: one network latency")                                         \
  X(hier_direct, "hier-direct", "node reduce, direct exchange among the node leaders, node "     \
                                "broadcast")                                                      \
  X(knomial, "knomial", "recursive multiplying: log_k(p) rounds, each an exchange among k ranks " \
                        "that all fold the k buffers in the same order (k: "                      \
                        "COMMTAP_KNOMIAL_RADIX, or the cost model's)")                            \
  X(hier_knomial, "hier-knomial", "node reduce, knomial among the node leaders (k: "              \
                                  "COMMTAP_KNOMIAL_RADIX, or the cost model's for the leaders), " \
                                  "node broadcast")
// clang-format on

// "name (what it does); " for each, as one string literal.
#define COMMTAP_ALGORITHM_DESCRIPTION(identifier, name, what) name " (" what "); "
