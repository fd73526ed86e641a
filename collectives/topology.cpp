// A communicator's topology, made once and cached on it: its nodes and private communicators
// (from world::node_layout), and the routing decisions made from the avoid list.
#include "collectives/topology.hpp"

#include <algorithm>
#include <random>
#include <string>

#include "world/world.hpp"

namespace commtap::collectives {

namespace {

int delete_topology(MPI_Comm, int, void* value, void*) {
  auto* topology = static_cast<Topology*>(value);
  for (MPI_Comm* c : {&topology->flat, &topology->node, &topology->leaders, &topology->peers})
    if (*c != MPI_COMM_NULL) PMPI_Comm_free(c);
  delete topology;
  return MPI_SUCCESS;
}

int topology_keyval() {
  static const int keyval = [] {
    int k = MPI_KEYVAL_INVALID;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_topology, &k, nullptr);
    return k;
  }();
  return keyval;
}

}  // namespace

std::pair<std::vector<int>, int> ring_of_nodes(int nodes,
                                               const std::vector<std::pair<int, int>>& flagged) {
  std::vector<int> order(static_cast<std::size_t>(std::max(0, nodes)));
  for (int i = 0; i < nodes; ++i) order[static_cast<std::size_t>(i)] = i;
  auto crossings = [&](const std::vector<int>& o) {
    int n = 0;
    for (std::size_t i = 0; i < o.size() && o.size() > 1; ++i)
      n += static_cast<int>(std::count(flagged.begin(), flagged.end(),
                                       std::pair<int, int>{o[i], o[(i + 1) % o.size()]}));
    return n;
  };
  std::vector<int> best = order;
  int fewest = crossings(order);
  if (fewest == 0 || nodes < 3) return {best, fewest};
  auto consider = [&](const std::vector<int>& o) {
    const int n = crossings(o);
    if (n < fewest) {
      fewest = n;
      best = o;
    }
    return fewest == 0;
  };
  if (nodes <= 9) {  // node 0 first: every cyclic order once, 8! = 40,320 at most
    while (std::next_permutation(order.begin() + 1, order.end()))
      if (consider(order)) break;
    return {best, fewest};
  }
  std::reverse(order.begin() + 1, order.end());
  if (consider(order)) return {best, fewest};
  std::mt19937 shuffle(12345);  // seeded: every rank tries the same orders
  for (int attempt = 0; attempt < 2000; ++attempt) {
    std::shuffle(order.begin() + 1, order.end(), shuffle);
    if (consider(order)) break;
  }
  return {best, fewest};
}

namespace {

// Where the routing decisions of `t` come from: every rank's node and host name (pretend nodes
// are "test-node-K"), then the star roots, the ring orders and the flagged links' cost, the same
// on every rank.
void route(Topology& t, int test_nodes, const avoid_list::AvoidList& avoid) {
  // Host names are only matched against what is avoided (equal on all ranks, so every rank
  // skips this gather alike): MPI_MAX_PROCESSOR_NAME bytes per rank.
  std::vector<char> names;
  if (test_nodes == 0 && !(avoid.hosts.empty() && avoid.links.empty())) {
    char host[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    PMPI_Get_processor_name(host, &length);
    names.resize(static_cast<std::size_t>(t.size) * MPI_MAX_PROCESSOR_NAME);
    PMPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME,
                   MPI_CHAR, t.flat);
  }
  std::vector<int> node_of(static_cast<std::size_t>(t.size));
  PMPI_Allgather(&t.node_index, 1, MPI_INT, node_of.data(), 1, MPI_INT, t.flat);
  auto host_of = [&](int rank) {
    if (test_nodes > 0)
      return "test-node-" + std::to_string(node_of[static_cast<std::size_t>(rank)]);
    if (names.empty()) return std::string();
    return std::string(names.data() + static_cast<std::size_t>(rank) * MPI_MAX_PROCESSOR_NAME);
  };
  std::vector<std::string> node_host(static_cast<std::size_t>(t.nodes));
  for (int rank = t.size - 1; rank >= 0; --rank)  // a node's host: that of its leader
    node_host[static_cast<std::size_t>(node_of[static_cast<std::size_t>(rank)])] = host_of(rank);
  auto node_named = [&](const std::string& name) {
    return static_cast<int>(std::find(node_host.begin(), node_host.end(), name) -
                            node_host.begin());
  };
  // The flagged links between two of this communicator's nodes, and the nodes at their ends.
  std::vector<std::pair<int, int>> flagged;
  std::vector<bool> at_a_flagged_link(node_host.size()), avoided_host(node_host.size());
  for (const avoid_list::Link& link : avoid.links) {
    const int from = node_named(link.from), to = node_named(link.to);
    if (from >= t.nodes || to >= t.nodes || from == to) continue;
    flagged.emplace_back(from, to);
    at_a_flagged_link[static_cast<std::size_t>(from)] = true;
    at_a_flagged_link[static_cast<std::size_t>(to)] = true;
    t.flagged_alpha = std::max(t.flagged_alpha, link.extra_latency_s);
    t.flagged_beta = std::max(t.flagged_beta, link.extra_s_per_byte);
    t.flagged_unmeasured =
        t.flagged_unmeasured || (link.extra_latency_s <= 0 && link.extra_s_per_byte <= 0);
  }
  for (const std::string& name : avoid.hosts)
    if (const int node = node_named(name); node < t.nodes)
      avoided_host[static_cast<std::size_t>(node)] = true;
  // A star's root: the lowest rank (of `ranks`, in their communicator's order) on a node that is
  // neither avoided nor at either end of a flagged link; else on one not avoided; else the first.
  auto root_among = [&](const std::vector<int>& ranks, bool& clear) {
    for (int pass = 0; pass < 2; ++pass)
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        const std::size_t node =
            static_cast<std::size_t>(node_of[static_cast<std::size_t>(ranks[i])]);
        if (avoided_host[node] || (pass == 0 && at_a_flagged_link[node])) continue;
        clear = flagged.empty() || pass == 0;
        return static_cast<int>(i);
      }
    clear = flagged.empty();
    return 0;
  };
  std::vector<int> all(static_cast<std::size_t>(t.size)), leaders;
  for (int rank = 0; rank < t.size; ++rank) {
    all[static_cast<std::size_t>(rank)] = rank;
    if (leaders.size() == static_cast<std::size_t>(node_of[static_cast<std::size_t>(rank)]))
      leaders.push_back(rank);  // leaders' ranks are node indices, in the order of their ranks
  }
  t.star_root = root_among(all, t.star_clear);
  auto healthy = [&](int a, int b) {
    if (avoided_host[static_cast<std::size_t>(a)] || avoided_host[static_cast<std::size_t>(b)])
      return false;
    return std::none_of(flagged.begin(), flagged.end(), [&](const std::pair<int, int>& link) {
      return link == std::pair{a, b} || link == std::pair{b, a};
    });
  };
  t.calibration_nodes[0] = 0;
  t.calibration_nodes[1] = std::min(1, t.nodes - 1);
  bool found = false;
  for (int a = 0; a < t.nodes && !found; ++a)
    for (int b = a + 1; b < t.nodes && !found; ++b)
      if (healthy(a, b)) {
        t.calibration_nodes[0] = a;
        t.calibration_nodes[1] = b;
        found = true;
      }
  t.calibration_leader =
      leaders.empty() ? 0 : leaders[static_cast<std::size_t>(t.calibration_nodes[0])];
  t.leaders_star_root = root_among(leaders, t.leaders_star_clear);
  // The rings: nodes in the order that crosses the fewest flagged links, each node's ranks in a
  // row (one step in and one out of each node, not one per rank as rank order would give a
  // round-robin placement).
  const auto [nodes_in_order, crossed] = ring_of_nodes(t.nodes, flagged);
  t.ring_clear = t.leaders_ring_clear = crossed == 0;
  t.leaders_ring_order = nodes_in_order;
  for (int node : nodes_in_order)
    for (int rank = 0; rank < t.size; ++rank)
      if (node_of[static_cast<std::size_t>(rank)] == node) t.ring_order.push_back(rank);
  // Recursive doubling's rounds that stay inside nodes (as with_extra_ranks_folded pairs the
  // ranks): a round-robin placement keeps some, so the library's recursive doubling may need
  // fewer network latencies than log2 p.
  int p2 = 1;
  while (p2 * 2 <= t.size) p2 *= 2;
  const int extra = t.size - p2;
  auto node = [&](int rank) { return node_of[static_cast<std::size_t>(rank)]; };
  auto real_rank = [extra](int v) { return v < extra ? v * 2 + 1 : v + extra; };
  bool fold_inside = true;
  for (int i = 0; i < extra; ++i) fold_inside = fold_inside && node(2 * i) == node(2 * i + 1);
  t.rd_rounds_within_nodes = extra > 0 && fold_inside ? 1 : 0;
  // The same pairs halve the buffer in a reduce-scatter (round k, from distance 1, moves 1/2^k
  // of it): the share of those halves whose round crosses nodes.
  t.halving_share_across_nodes = 0;
  double half = 0.5;
  for (int distance = 1; distance < p2; distance *= 2, half /= 2) {
    bool inside = true;
    for (int v = 0; v < p2; ++v)
      inside = inside && node(real_rank(v)) == node(real_rank(v ^ distance));
    t.rd_rounds_within_nodes += inside ? 1 : 0;
    if (!inside) t.halving_share_across_nodes += half;
  }
}

}  // namespace

Topology* existing_topology(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, topology_keyval(), &value, &found);
  return found ? static_cast<Topology*>(value) : nullptr;
}

Topology* topology_of(MPI_Comm comm, int test_nodes, const avoid_list::AvoidList& avoid) {
  if (Topology* made = existing_topology(comm)) return made;

  auto* t = new Topology();
  PMPI_Comm_dup(comm, &t->flat);
  PMPI_Comm_size(t->flat, &t->size);
  PMPI_Comm_rank(t->flat, &t->rank);
  const world::NodeLayout layout = world::node_layout(t->flat, test_nodes);
  t->node = layout.node;
  t->leaders = layout.leaders;
  t->nodes = layout.nodes;
  t->node_index = layout.node_index;
  t->local_size = layout.local_size;
  t->local_rank = layout.local_rank;
  int sizes[2] = {t->local_size, -t->local_size}, extremes[2] = {0, 0};
  PMPI_Allreduce(sizes, extremes, 2, MPI_INT, MPI_MAX, t->flat);
  t->regular = extremes[0] == -extremes[1];
  t->max_local_size = extremes[0];
  if (t->regular && t->nodes > 1) PMPI_Comm_split(t->flat, t->local_rank, t->rank, &t->peers);
  route(*t, test_nodes, avoid);
  PMPI_Comm_set_attr(comm, topology_keyval(), t);
  return t;
}

}  // namespace commtap::collectives
