// The cost model's formulas: what each form costs for a call's size on a topology (latency,
// bandwidth, reduction, per-message overheads, measured protocol steps, flagged links), what
// the library's own all-reduce is modelled to cost, and the choice between them.
#include "collectives/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>

namespace commtap::collectives {

std::optional<Algorithm> measured_choice(const CostModel& m, const Topology& t, MPI_Count bytes) {
  // Measured choices knew nothing of a link flagged since: the formulas route around it.
  if (t.has_flagged_link() || m.choices.empty() || bytes > m.choices.back().up_to_bytes ||
      m.measured_ranks != t.size || m.measured_nodes != t.nodes ||
      m.measured_largest_node != t.max_local_size)
    return std::nullopt;
  // A size between two measured ones gets commtap's algorithm only if both chose it: a choice
  // measured at 256 KiB said nothing about 128 KiB on the emulated cluster.
  for (std::size_t i = 0; i < m.choices.size(); ++i) {
    const MeasuredChoice& choice = m.choices[i];
    if (bytes > choice.up_to_bytes) continue;
    if (i == 0 || bytes == choice.up_to_bytes || m.choices[i - 1].algorithm == choice.algorithm)
      return choice.algorithm;
    return Algorithm::native;
  }
  return std::nullopt;
}

Predictions predict(const CostModel& m, const Topology& t, MPI_Count bytes) {
  Predictions predicted;
  const double n = static_cast<double>(bytes);
  const double p = t.size, nodes = std::max(1, t.nodes), local = std::max(1, t.max_local_size);
  const double inter_alpha = t.nodes > 1 ? m.inter_alpha : m.intra_alpha;
  const double inter_beta = t.nodes > 1 ? m.inter_beta : m.intra_beta;
  // Each message sent or received costs its rank `o` (twice per exchange with one peer).
  const double o = t.nodes > 1 ? m.inter_overhead : m.intra_overhead;
  auto log2_of = [](double x) { return std::ceil(std::log2(std::max(1.0, x))); };
  // What a round of messages of `size` bytes costs beyond alpha + size x beta where the measured
  // one-way times say so (CostModel::inter_points), interpolated between them; past the
  // largest, that one's excess.
  auto excess_of = [](const std::vector<std::pair<double, double>>& points, double alpha,
                      double beta, double size) {
    if (points.size() < 2 || size <= points.front().first) return 0.0;
    auto above = std::lower_bound(points.begin(), points.end(), size,
                                  [](const auto& point, double s) { return point.first < s; });
    double at = 0;
    if (above == points.end()) {
      at = points.back().second + (size - points.back().first) * beta;
    } else {
      const auto& [x1, y1] = *above;
      const auto& [x0, y0] = *(above - 1);
      at = y0 + (y1 - y0) * (size - x0) / (x1 - x0);
    }
    return std::max(0.0, at - (alpha + size * beta));
  };
  auto excess = [&](double size) {
    return t.nodes > 1 ? excess_of(m.inter_points, m.inter_alpha, m.inter_beta, size)
                       : excess_of(m.intra_points, m.intra_alpha, m.intra_beta, size);
  };
  auto intra_excess = [&](double size) {
    return excess_of(m.intra_points, m.intra_alpha, m.intra_beta, size);
  };
  // A flagged link between two of these hosts (COMMTAP_AVOID_HOSTS): a form that may cross it
  // pays what crossing it costs once (the library's too: commtap cannot see its pattern); a
  // star rooted off its ends and a ring ordered around it do not. A link named without figures
  // counts as ten times a healthy one, the analyzer's threshold for a slow link.
  const double detour = std::max(t.flagged_alpha + n * t.flagged_beta,
                                 t.flagged_unmeasured ? 9 * (inter_alpha + n * inter_beta) : 0.0);
  auto unless = [&](bool clear) { return clear ? 0.0 : detour; };
  // Flat algorithms pay the slowest link on every round.
  // Recursive doubling: its rounds between nodes at the network's cost, those that stay inside
  // nodes (round-robin placements) at the node's.
  // Past a power of two p2, the extra ranks fold in (a message in before the rounds and one
  // back after: two latencies, the fold counted as one round in rd_rounds_within_nodes).
  const double p2 = std::pow(2.0, std::floor(std::log2(p)));
  const double rd_rounds = std::log2(p2) + (p2 < p ? 2 : 0);
  const double rd_inside = t.nodes > 1 ? std::min<double>(t.rd_rounds_within_nodes, rd_rounds) : 0;
  const double rd =
      (rd_rounds - rd_inside) * (inter_alpha + 2 * o + n * inter_beta + n * m.gamma + excess(n)) +
      rd_inside * (m.intra_alpha + 2 * m.intra_overhead + n * m.intra_beta + n * m.gamma +
                   intra_excess(n)) +
      detour;
  const double ring_rounds = 2 * (p - 1) * (inter_alpha + 2 * o + excess(n / p)) +
                             2 * (p - 1) / p * n * inter_beta + (p - 1) / p * n * m.gamma;
  const double ring = ring_rounds + unless(t.ring_clear);
  // The star's root receives p-1 buffers and sends p-1.
  const double star = 2 * inter_alpha + (p - 1) * n * (inter_beta + m.gamma) + n * inter_beta +
                      2 * (p - 1) * o + 2 * excess(std::min(n, 256.0 * 1024)) +
                      unless(t.star_clear);
  // Direct exchange: one latency, but every rank sends, receives and reduces p-1 copies.
  const double direct =
      inter_alpha + (p - 1) * (n * (inter_beta + m.gamma) + 2 * o) + excess(n) + detour;
  // k-nomial among `ranks`: log_k(p') rounds of k-1 copies each, plus the fold of the ranks past
  // p' (a send in and one back); its cost at the best k for this size, and that k.
  auto knomial_of = [&](int ranks) {
    std::pair<double, int> best{1e300, 2};
    for (int k = 2; k <= std::max(2, std::min(ranks, 64)); ++k) {
      int participants = 1, rounds = 0;
      while (participants <= ranks / k) {
        participants *= k;
        ++rounds;
      }
      const double cost =
          rounds * (inter_alpha + (k - 1) * (n * (inter_beta + m.gamma) + 2 * o) + excess(n)) +
          (participants < ranks
               ? 2 * (inter_alpha + 2 * o + n * inter_beta + excess(n)) + n * m.gamma
               : 0) +
          detour;
      if (cost < best.first) best = {cost, k};
    }
    return best;
  };
  const auto [knomial, flat_radix] = knomial_of(t.size);
  const auto [leaders_knomial, leaders_radix] = knomial_of(std::max(1, t.nodes));
  // Hierarchical: two intra-node stages around a leaders' all-reduce.
  const double intra =
      local > 1
          ? 2 * log2_of(local) *
                    (m.intra_alpha + 2 * m.intra_overhead + n * m.intra_beta + intra_excess(n)) +
                log2_of(local) * n * m.gamma
          : 0;
  // The leaders' stage of hier: recursive doubling up to 64 KiB, a ring above (inter_algorithm).
  const double leaders =
      n <= 64 * 1024
          ? log2_of(nodes) * (inter_alpha + 2 * o + n * inter_beta + n * m.gamma + excess(n)) +
                detour
          : 2 * (nodes - 1) * (inter_alpha + 2 * o + excess(n / nodes)) +
                2 * (nodes - 1) / nodes * n * inter_beta + unless(t.leaders_ring_clear);
  const double hier = intra + (nodes > 1 ? leaders : 0);
  const double hier_direct =
      intra + (nodes > 1 ? inter_alpha + (nodes - 1) * (n * (inter_beta + m.gamma) + 2 * o) +
                               excess(n) + detour
                         : 0);
  const double hier_knomial = intra + (nodes > 1 ? leaders_knomial : 0);
  const double hier_star =
      intra + (nodes > 1 ? 2 * inter_alpha + (nodes - 1) * (n * (inter_beta + m.gamma) + 2 * o) +
                               n * inter_beta + 2 * excess(std::min(n, 256.0 * 1024)) +
                               unless(t.leaders_star_clear)
                         : 0);
  // Pipelined: the slower of the two levels, plus one segment's pass through the other to fill
  // and drain the pipeline, plus three latencies per segment (its leaders' stage is the
  // library's). Fewer segments fill longer, more pay more latencies: the best count by these
  // formulas, 1 to 64, segments of 64 KiB at least (what each costs beyond its latency, the
  // nonblocking collectives' own work, is not in the formulas).
  double pipe = hier;
  MPI_Count segment_bytes = std::max<MPI_Count>(1, bytes);
  if (t.nodes > 1 && t.max_local_size > 1) {
    const double most = std::clamp(std::floor(n / 65536), 1.0, 64.0);
    pipe = 1e300;
    for (double segments = 1; segments <= most; ++segments) {
      const double s = n / segments;
      const double library_leaders =
          std::min(log2_of(nodes) *
                       (inter_alpha + 2 * o + n * inter_beta + n * m.gamma + segments * excess(s)),
                   2 * (nodes - 1) * (inter_alpha + 2 * o + segments * excess(s / nodes)) +
                       2 * (nodes - 1) / nodes * n * inter_beta) +
          detour;
      const double node_stages = intra + segments * 2 * log2_of(local) * intra_excess(s);
      const double cost = std::max(node_stages, library_leaders) +
                          (node_stages + library_leaders) / segments +
                          segments * 3 * std::max(m.intra_alpha, inter_alpha);
      if (cost < pipe) {
        pipe = cost;
        segment_bytes = static_cast<MPI_Count>(std::ceil(s));
      }
    }
  }
  predicted.tuning = {flat_radix, leaders_radix, segment_bytes};
  // The library, as node-aware for small buffers (MPICH's and Open MPI's small all-reduces
  // reduce inside nodes first, one network latency per recursive-doubling round among the
  // nodes: what `hier` does), and the best of that and its flat algorithms. commtap's must win
  // clearly (10%).
  double native = std::min({rd, ring_rounds + detour, n <= 64 * 1024 ? hier : 1e300});
  if (m.library_short_bytes > 0 && bytes > m.library_short_bytes) {
    // A known library past its threshold (MPICH): reduce-scatter by recursive halving, then
    // all-gather by recursive doubling over the same pairs; twice recursive doubling's rounds,
    // round k moving 1/2^k of the buffer each way. The binary digits of the share across nodes
    // say which rounds cross. A buffer of fewer elements than the largest power of two ranks
    // keeps recursive doubling (16 bytes per element at most, so only below 16 p2 bytes may it
    // still: the better of the two then).
    double across = t.nodes > 1 ? t.halving_share_across_nodes : 0, rabenseifner = detour;
    double half = 0.5;
    for (double round = 0; round < std::log2(p2); ++round, half /= 2) {
      const bool crosses = across >= half;
      if (crosses) across -= half;
      const double message = n * half;
      rabenseifner += 2 * (crosses ? inter_alpha + 2 * o + message * inter_beta + excess(message)
                                   : m.intra_alpha + 2 * m.intra_overhead + message * m.intra_beta +
                                         intra_excess(message)) +
                      message * m.gamma;
    }
    if (p2 < p) rabenseifner += 2 * (inter_alpha + 2 * o + n * inter_beta + excess(n));
    // Node-aware up to 64 KiB as above, with the leaders' stage in the same form.
    double leaders_rabenseifner = detour;
    half = 0.5;
    for (double round = 0; round < log2_of(nodes); ++round, half /= 2)
      leaders_rabenseifner +=
          2 * (inter_alpha + 2 * o + n * half * inter_beta + excess(n * half)) + n * half * m.gamma;
    native = std::min({n >= 16 * p2 ? rabenseifner : std::min(rd, rabenseifner),
                       n <= 64 * 1024 ? intra + (nodes > 1 ? leaders_rabenseifner : 0) : 1e300});
  }
  predicted.native_s = native;
  predicted.forms = {{{hier_direct, Algorithm::hier_direct},
                      {direct, Algorithm::direct},
                      {knomial, Algorithm::knomial},
                      {hier_knomial, Algorithm::hier_knomial},
                      {hier, Algorithm::hier},
                      {pipe, Algorithm::hier_pipe},
                      {star, Algorithm::star},
                      {hier_star, Algorithm::hier_star},
                      {ring, Algorithm::ring}}};
  return predicted;
}

const std::pair<double, Algorithm>& Predictions::best_form() const noexcept {
  return *std::min_element(forms.begin(), forms.end(), [](auto& a, auto& b) {
    return a.first < b.first;  // the first of equals: the list's order of preference
  });
}

Algorithm choose(const CostModel& m, const Topology& t, MPI_Count bytes, Tuning* tuning) {
  const Predictions predicted = predict(m, t, bytes);
  if (tuning != nullptr) *tuning = predicted.tuning;
  if (const std::optional<Algorithm> measured = measured_choice(m, t, bytes)) return *measured;
  // On one host the library's shared-memory algorithms are what commtap's would be built on.
  if (t.nodes <= 1) return Algorithm::native;
  const auto& [best, form] = predicted.best_form();
  return best < 0.9 * predicted.native_s ? form : Algorithm::native;
}

std::vector<Algorithm> contenders(const CostModel& m, const Topology& t, MPI_Count bytes) {
  std::vector<Algorithm> chosen{Algorithm::native};
  if (t.nodes <= 1) return chosen;
  const Predictions predicted = predict(m, t, bytes);
  auto forms = predicted.forms;
  std::stable_sort(forms.begin(), forms.end(), [](auto& a, auto& b) { return a.first < b.first; });
  // The formulas were off by up to 1.8x against the library on the emulated cluster (MPICH's
  // 2 MiB all-reduce at 100 Mbit/s, predicted at the bound), so forms predicted near the
  // library's time are tried too, not only those predicted to win; at most three, those the
  // model ranks first.
  // Forms the formulas cost alike are mostly the same messages (with one rank per node,
  // hier-direct is direct, and knomial at k = p too): one of them takes the place.
  const double reach = 1.3 * std::min(predicted.native_s, forms.front().first);
  double last = -1;
  for (const auto& [seconds, form] : forms) {
    if (seconds > reach || chosen.size() == 4) break;
    if (seconds > last * 1.001) chosen.push_back(form);
    last = seconds;
  }
  return chosen;
}

bool asks_the_model(Algorithm algorithm) noexcept {
  return algorithm == Algorithm::automatic || algorithm == Algorithm::knomial ||
         algorithm == Algorithm::hier_knomial || algorithm == Algorithm::hier_pipe;
}

}  // namespace commtap::collectives
