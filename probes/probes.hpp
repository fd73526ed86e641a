// probes: link probes between hosts. At points every rank agrees on, the node leaders (one rank
// per host) measure every directed host pair's latency and throughput with a few messages on a
// private communicator, so that a slow NIC or a congested link shows up in any job, even one
// whose own traffic commtap cannot see (collectives only). The rows go to the `probes` table.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "monitor/trace_schema.hpp"
#include "settings/module_settings.hpp"
#include "world/world.hpp"

namespace commtap::probes {

class LinkProber {
 public:
  // Collective over `comm` (commtap's private duplicate of MPI_COMM_WORLD), at MPI_Init, with
  // its hosts (MPI's shared-memory domains, or pretend ones: COMMTAP_TEST_NODES,
  // world::node_layout) and their leaders in `layout`; the communicators stay the caller's, who
  // keeps them until the prober is gone. Probes nothing if there is one host or
  // COMMTAP_PROBE_INTERVAL is 0.
  LinkProber(MPI_Comm comm, const world::NodeLayout& layout, const ProbeSettings& settings);
  LinkProber(const LinkProber&) = delete;
  LinkProber& operator=(const LinkProber&) = delete;

  // After the blocking collective `seq` on MPI_COMM_WORLD, on every rank (all reach the same
  // seq, in the same order). At agreed seqs rank 0 tells every rank whether to probe now and
  // when to ask again (one small broadcast per decision, about one per interval); when it says
  // so the leaders probe. Returns the rows this rank measured (leaders only).
  std::vector<monitor::ProbeRow> after_world_collective(std::uint64_t seq);
  // What probing has cost this rank so far: rounds run, and the time spent in them (from the
  // decision to leave together) and in the decisions themselves (COMMTAP_VERBOSE reports it).
  struct Cost {
    std::uint64_t rounds = 0, probing_ns = 0, deciding_ns = 0, since_ns = 0;
  };
  Cost cost() const { return cost_; }
  // The seq of the next decision (0: never), for a check without a lock on the hot path.
  std::uint64_t next_decision_seq() const {
    return next_decision_seq_.load(std::memory_order_relaxed);
  }

 private:
  std::vector<monitor::ProbeRow> probe_round();
  // One pair's two halves: this leader measures its direction to `peer` (filling the two rows
  // and the longest one-way leg it saw come back), or answers the peer's measurement.
  void measure(int peer, monitor::ProbeRow& latency, monitor::ProbeRow& transfer,
               std::uint64_t& slowest_back);
  void answer(int peer);
  void exchange(void* out, int out_bytes, void* in, int in_bytes, int peer);

  MPI_Comm comm_ = MPI_COMM_NULL;     // all ranks
  MPI_Comm leaders_ = MPI_COMM_NULL;  // one rank per host; MPI_COMM_NULL on the others
  int rank_ = 0, hosts_ = 0, host_index_ = 0;
  std::vector<std::string> host_names_;  // of each host index (leaders only)
  std::uint64_t interval_ns_ = 0;
  std::uint64_t probe_bytes_ = 0;
  // Written at decisions only, which all come from world collectives: never two at a time.
  std::atomic<std::uint64_t> next_decision_seq_{0};
  // Rank 0's view, for the decisions.
  std::uint64_t last_decision_seq_ = 0, last_decision_ns_ = 0, last_probe_end_ns_ = 0;
  // The last probe rounds' seconds (0: none yet), for the cost bound.
  static constexpr std::size_t kRoundsKept = 3;
  std::array<double, kRoundsKept> recent_rounds_s_{};
  std::size_t rounds_done_ = 0;
  Cost cost_;
  std::vector<char> buffer_;
  std::uint64_t began_ = 0;  // the current probe round's start, the rows' at_ns
};

// The pairs of round `round` of a round-robin tournament of `players` (the circle method): each
// index meets every other exactly once in players - 1 rounds (players rounded up to even; a
// partner >= players is a bye). Returns this index's partner.
int tournament_partner(int players, int round, int index);
// Rounds a tournament of `players` takes.
int tournament_rounds(int players);

}  // namespace commtap::probes
