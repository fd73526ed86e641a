// The cost model measured on a topology (at MPI_Init with COMMTAP_CALIBRATE=1, or by `commtap
// calibrate`): one-way times, per-message costs and the local reduction, fitted per level; and
// the measured choices, the library's all-reduce timed against each of commtap's.
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "collectives/algorithms.hpp"
#include "collectives/cost_model.hpp"
#include "world/world.hpp"

namespace commtap::collectives {

namespace {

constexpr int kTag = 0x7ca1;  // commtap's private communicators carry no other traffic now

// A blocking send or receive that waits as the algorithms do (`yield`: test and yield, so that a
// rank waiting here leaves the CPU to the ranks being measured).
void send_s(const void* data, int count, int peer, MPI_Comm comm, bool yield) {
  MPI_Request request;
  PMPI_Isend(data, count, MPI_BYTE, peer, kTag, comm, &request);
  world::wait_all(1, &request, yield);
}
void receive_s(void* data, int count, int peer, MPI_Comm comm, bool yield) {
  MPI_Request request;
  PMPI_Irecv(data, count, MPI_BYTE, peer, kTag, comm, &request);
  world::wait_all(1, &request, yield);
}

// One-way time of `bytes` between `me` and `peer` on `comm` (the fastest of `repeats` round
// trips, halved); `me` < `peer` starts. Both ranks call it.
double one_way_s(MPI_Comm comm, int me, int peer, std::size_t bytes, int repeats, bool yield) {
  std::vector<char> buffer(std::max<std::size_t>(1, bytes));
  const int count = static_cast<int>(bytes);
  double best = 1e30;
  for (int i = 0; i < repeats + 1; ++i) {  // the first round trip warms the path up
    const double start = PMPI_Wtime();
    if (me < peer) {
      send_s(buffer.data(), count, peer, comm, yield);
      receive_s(buffer.data(), count, peer, comm, yield);
    } else {
      receive_s(buffer.data(), count, peer, comm, yield);
      send_s(buffer.data(), count, peer, comm, yield);
    }
    if (i > 0) best = std::min(best, (PMPI_Wtime() - start) / 2);
  }
  return best;
}

// What one more message costs: `me` < `peer` sends a burst of 16 messages of 8 bytes at once
// and `peer` answers when it has all of them; against one message's round trip (2 x `one_way`),
// the other 15 took the rest (the fastest of 10 bursts). Both ranks call it.
double per_message_s(MPI_Comm comm, int me, int peer, double one_way, bool yield) {
  constexpr int kBurst = 16;
  double data[kBurst] = {};
  MPI_Request requests[kBurst];
  double best = 1e30;
  for (int i = 0; i < 11; ++i) {  // the first burst warms up
    const double start = PMPI_Wtime();
    for (int k = 0; k < kBurst; ++k) {
      if (me < peer)
        PMPI_Isend(&data[k], 1, MPI_DOUBLE, peer, kTag, comm, &requests[k]);
      else
        PMPI_Irecv(&data[k], 1, MPI_DOUBLE, peer, kTag, comm, &requests[k]);
    }
    world::wait_all(kBurst, requests, yield);
    if (me < peer)
      receive_s(data, 1, peer, comm, yield);
    else
      send_s(data, 1, peer, comm, yield);
    if (i > 0) best = std::min(best, PMPI_Wtime() - start);
  }
  return std::max(0.0, (best - 2 * one_way) / (kBurst - 1));
}

// Latency, time per byte and per-message cost of one level, from the smallest and the largest
// message and a burst, and the one-way times of messages from 8 bytes to 256 KiB (doubling from
// 1 KiB) that show where the time leaves that line.
void fit(MPI_Comm comm, int me, int peer, bool yield, double& alpha, double& beta, double& overhead,
         std::vector<std::pair<double, double>>& points) {
  constexpr std::size_t kSmall = 8, kLarge = 256 * 1024;
  points.clear();
  points.emplace_back(kSmall, one_way_s(comm, me, peer, kSmall, 20, yield));
  for (std::size_t bytes = 1024; bytes <= kLarge; bytes *= 2)
    points.emplace_back(bytes, one_way_s(comm, me, peer, bytes, 5, yield));
  // A message takes no less time than a smaller one; a slower reading than a larger message's
  // is a moment the rank was off the CPU (more ranks than cores, waiting in blocking mode), not
  // a cost of that size: each point is no slower than any larger one. A real step (a protocol
  // switch) holds at every larger size and stays.
  for (std::size_t i = points.size() - 1; i-- > 0;)
    points[i].second = std::min(points[i].second, points[i + 1].second);
  const double small = points.front().second, large = points.back().second;
  alpha = small;
  beta = std::max(0.0, (large - small) / static_cast<double>(kLarge - kSmall));
  overhead = per_message_s(comm, me, peer, small, yield);
}

}  // namespace

CostModel measure_cost_model(const Topology& t, const CostModel& defaults) {
  constexpr bool yield = true;  // see cost_model.hpp
  // Inside a node: the first two ranks of node 0 (flat rank 0 among them). Between nodes: the
  // leaders of Topology::calibration_nodes (a pair no flagged link joins), the first of which
  // tells everyone its figures. Rank 0 then tells everyone the whole model.
  CostModel model = defaults;
  if (t.local_size > 1 && t.node_index == 0 && t.local_rank <= 1)
    fit(t.node, t.local_rank, 1 - t.local_rank, yield, model.intra_alpha, model.intra_beta,
        model.intra_overhead, model.intra_points);
  const auto [first, second] = t.calibration_nodes;
  if (t.leaders != MPI_COMM_NULL && t.nodes > 1 &&
      (t.node_index == first || t.node_index == second))
    fit(t.leaders, t.node_index, t.node_index == first ? second : first, yield, model.inter_alpha,
        model.inter_beta, model.inter_overhead, model.inter_points);
  if (t.nodes > 1 && t.calibration_leader != 0) {
    // The network's figures are the first calibration node's leader's.
    CostModel network = model;
    broadcast_cost_model(network, t.flat, yield, t.calibration_leader);
    model.inter_alpha = network.inter_alpha;
    model.inter_beta = network.inter_beta;
    model.inter_overhead = network.inter_overhead;
    model.inter_points = network.inter_points;
  }
  if (t.rank == 0) {
    std::vector<double> in(128 * 1024, 1.0), inout(in.size(), 2.0);
    double best = 1e30;
    for (int i = 0; i < 5; ++i) {
      const double start = PMPI_Wtime();
      PMPI_Reduce_local(in.data(), inout.data(), static_cast<int>(in.size()), MPI_DOUBLE, MPI_SUM);
      best = std::min(best, PMPI_Wtime() - start);
    }
    model.gamma = best / static_cast<double>(in.size() * sizeof(double));
  }
  // The ranks that measure nothing wait in the broadcast, yielding the CPU to the ones
  // measuring.
  broadcast_cost_model(model, t.flat, yield);
  return model;
}

namespace {

// The slowest rank's mean time of one all-reduce of `count` doubles with `algorithm` (native:
// the library's), over enough calls to take about 20 ms (at least 3).
double time_algorithm(Algorithm algorithm, Topology& t, int count, bool yield) {
  std::vector<double> in(static_cast<std::size_t>(count), 1.0), out(in.size());
  auto once = [&] {
    if (algorithm != Algorithm::native) {
      allreduce(algorithm, in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, t, yield);
      return;
    }
    if (!yield) {
      PMPI_Allreduce(in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, t.flat);
      return;
    }
    MPI_Request request;  // as commtap runs the library's in yield mode
    PMPI_Iallreduce(in.data(), out.data(), count, MPI_DOUBLE, MPI_SUM, t.flat, &request);
    world::wait_all(1, &request, true);
  };
  // The barriers and the maximum wait as the algorithms do: with more ranks than cores, a rank
  // spinning in a blocking barrier keeps the last one from arriving, and that skew would be
  // charged to the few calls that fill the window.
  auto slowest = [&](double mine) {
    double max = 0;
    MPI_Request request;
    PMPI_Iallreduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, t.flat, &request);
    world::wait_all(1, &request, yield);
    return max;
  };
  auto barrier = [&] {
    MPI_Request request;
    PMPI_Ibarrier(t.flat, &request);
    world::wait_all(1, &request, yield);
  };
  barrier();
  double start = PMPI_Wtime();
  once();  // also warms up
  const int calls = static_cast<int>(std::clamp(0.02 / slowest(PMPI_Wtime() - start), 3.0, 1e4));
  barrier();
  start = PMPI_Wtime();
  for (int i = 0; i < calls; ++i) once();
  return slowest((PMPI_Wtime() - start) / calls);
}

}  // namespace

void measure_choices(Topology& t, CostModel& model, std::int64_t max_bytes, int rounds,
                     bool yield) {
  // The library's first, then every one of commtap's.
  std::vector<Algorithm> candidates;
  for (int i = 0; i <= static_cast<int>(kLastAlgorithm); ++i)
    if (static_cast<Algorithm>(i) != Algorithm::automatic)
      candidates.push_back(static_cast<Algorithm>(i));
  const std::size_t kCandidates = candidates.size();
  model.measured_ranks = t.size;
  model.measured_nodes = t.nodes;
  model.measured_largest_node = t.max_local_size;
  model.choices.clear();
  for (std::int64_t bytes = 8; bytes <= max_bytes; bytes *= 4) {
    const int count = static_cast<int>(std::max<std::int64_t>(1, bytes / 8));
    // The tuned forms run with the k and segments the formulas give this size, as in the job.
    choose(model, t, count * 8, &t.tuning);
    std::vector<std::vector<double>> seconds(kCandidates);
    for (int round = 0; round < rounds; ++round)
      for (std::size_t k = 0; k < kCandidates; ++k)
        seconds[k].push_back(time_algorithm(candidates[k], t, count, yield));
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    auto slowest = [](const std::vector<double>& v) {
      return *std::max_element(v.begin(), v.end());
    };
    std::size_t best = 1;
    for (std::size_t k = 2; k < kCandidates; ++k)
      if (median(seconds[k]) < median(seconds[best])) best = k;
    // Clearly and consistently faster: 10% by the medians, and even its slowest round no slower
    // than the library's median one (a noisy machine then keeps the library's).
    const double native = median(seconds[0]);
    const bool clear_win =
        median(seconds[best]) <= 0.9 * native && slowest(seconds[best]) <= native;
    model.choices.push_back({bytes, clear_win ? candidates[best] : Algorithm::native, native * 1e6,
                             median(seconds[best]) * 1e6});
  }
}

}  // namespace commtap::collectives
