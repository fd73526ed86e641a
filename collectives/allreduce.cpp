// commtap's all-reduce algorithms over PMPI point-to-point on private communicators, and the
// topology they run on.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "collectives/collectives.hpp"
#include "datatypes/datatypes.hpp"
#include "monitor/monitor.hpp"
#include "world/world.hpp"

namespace commtap::collectives {

const char* algorithm_name(Algorithm algorithm) noexcept {
  switch (algorithm) {
#define COMMTAP_ALGORITHM_CASE(identifier, name, what) \
  case Algorithm::identifier:                          \
    return name;
    COMMTAP_ALLREDUCE_ALGORITHMS(COMMTAP_ALGORITHM_CASE)
#undef COMMTAP_ALGORITHM_CASE
  }
  return "?";
}

std::string algorithm_names() {
  std::string names;
  for (int i = 0; i <= static_cast<int>(kLastAlgorithm); ++i)
    names += (i == 0 ? "" : ", ") + std::string(algorithm_name(static_cast<Algorithm>(i)));
  return names;
}

bool parse_algorithm(const std::string& text, Algorithm& algorithm) noexcept {
  for (int i = 0; i <= static_cast<int>(kLastAlgorithm); ++i)
    if (const auto a = static_cast<Algorithm>(i); text == algorithm_name(a)) {
      algorithm = a;
      return true;
    }
  return false;
}

// ---- Topology ---------------------------------------------------------------------------------

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
void route(Topology& t, int test_nodes, const Avoid& avoid) {
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
  for (const AvoidedLink& link : avoid.links) {
    const int from = node_named(link.from), to = node_named(link.to);
    if (from >= t.nodes || to >= t.nodes || from == to) continue;
    flagged.emplace_back(from, to);
    at_a_flagged_link[static_cast<std::size_t>(from)] = true;
    at_a_flagged_link[static_cast<std::size_t>(to)] = true;
    t.flagged_alpha = std::max(t.flagged_alpha, link.extra_alpha);
    t.flagged_beta = std::max(t.flagged_beta, link.extra_beta);
    t.flagged_unmeasured = t.flagged_unmeasured || (link.extra_alpha <= 0 && link.extra_beta <= 0);
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

Topology* topology_of(MPI_Comm comm, int test_nodes, const Avoid& avoid) {
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, topology_keyval(), &value, &found);
  if (found) return static_cast<Topology*>(value);

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

// ---- Point-to-point helpers -------------------------------------------------------------------

namespace {

// The steps of a recorded call: each message is listed when posted, with the request slot it
// waits in, and ends at the return of the first wait over that slot.
class StepRecorder {
 public:
  StepRecorder(std::vector<Step>& steps, Topology& topology) : steps_(steps), t_(topology) {}

  void posted(bool send, MPI_Comm comm, int peer, MPI_Count bytes, const MPI_Request* slot) {
    steps_.push_back(
        {send, world_rank(comm, peer), static_cast<std::uint64_t>(bytes), monitor::now_ns(), 0});
    slots_.push_back(slot);
  }
  void completed(const MPI_Request* requests, int n) {
    const std::uint64_t now = monitor::now_ns();
    for (std::size_t i = open_; i < steps_.size(); ++i)
      if (steps_[i].end_ns == 0 && slots_[i] >= requests && slots_[i] < requests + n)
        steps_[i].end_ns = std::max(now, steps_[i].start_ns);
    while (open_ < steps_.size() && steps_[open_].end_ns != 0) ++open_;
  }

 private:
  int world_rank(MPI_Comm comm, int peer) {
    auto known = std::find_if(t_.world_ranks.begin(), t_.world_ranks.end(),
                              [&](const auto& entry) { return entry.first == comm; });
    if (known == t_.world_ranks.end()) {
      MPI_Group group = MPI_GROUP_NULL;
      PMPI_Comm_group(comm, &group);
      known = t_.world_ranks.insert(t_.world_ranks.end(), {comm, world::world_ranks_of(group)});
      PMPI_Group_free(&group);
    }
    const std::vector<int>& ranks = known->second;
    return peer >= 0 && static_cast<std::size_t>(peer) < ranks.size()
               ? ranks[static_cast<std::size_t>(peer)]
               : -1;
  }

  std::vector<Step>& steps_;
  Topology& t_;
  std::vector<const MPI_Request*> slots_;  // parallel to steps_
  std::size_t open_ = 0;                   // steps before it have ended
};

struct Call {
  MPI_Datatype type;
  MPI_Op op;
  MPI_Aint extent;  // builtin types: extent == size
  bool yield;
  StepRecorder* steps;  // nullptr: this call is not recorded
  char* at(void* base, MPI_Count elements) const {
    return static_cast<char*>(base) + elements * extent;
  }
};

int wait_all(const Call& c, int n, MPI_Request* requests) {
  const int rc = world::wait_all(n, requests, c.yield);
  if (c.steps != nullptr && rc == MPI_SUCCESS) c.steps->completed(requests, n);
  return rc;
}

// Every message of commtap's own algorithms is posted through these two.
int isend(const Call& c, const void* buffer, MPI_Count count, int peer, MPI_Comm comm,
          MPI_Request* request) {
  const int rc = PMPI_Isend_c(buffer, count, c.type, peer, 0, comm, request);
  if (c.steps != nullptr && rc == MPI_SUCCESS)
    c.steps->posted(true, comm, peer, count * c.extent, request);
  return rc;
}
int irecv(const Call& c, void* buffer, MPI_Count count, int peer, MPI_Comm comm,
          MPI_Request* request) {
  const int rc = PMPI_Irecv_c(buffer, count, c.type, peer, 0, comm, request);
  if (c.steps != nullptr && rc == MPI_SUCCESS)
    c.steps->posted(false, comm, peer, count * c.extent, request);
  return rc;
}

int exchange(const Call& c, MPI_Comm comm, int peer, const void* send, MPI_Count send_count,
             void* recv, MPI_Count recv_count) {
  MPI_Request requests[2];
  int rc = irecv(c, recv, recv_count, peer, comm, &requests[0]);
  if (rc != MPI_SUCCESS) return rc;
  rc = isend(c, send, send_count, peer, comm, &requests[1]);
  if (rc != MPI_SUCCESS) return rc;
  return wait_all(c, 2, requests);
}

int send(const Call& c, MPI_Comm comm, int peer, const void* buffer, MPI_Count count) {
  MPI_Request request;
  const int rc = isend(c, buffer, count, peer, comm, &request);
  return rc != MPI_SUCCESS ? rc : wait_all(c, 1, &request);
}

int receive(const Call& c, MPI_Comm comm, int peer, void* buffer, MPI_Count count) {
  MPI_Request request;
  const int rc = irecv(c, buffer, count, peer, comm, &request);
  return rc != MPI_SUCCESS ? rc : wait_all(c, 1, &request);
}

// inout = in op inout
int reduce(const Call& c, const void* in, void* inout, MPI_Count count) {
  return count == 0 ? MPI_SUCCESS : PMPI_Reduce_local_c(in, inout, count, c.type, c.op);
}

// COMMTAP_TEST_REVERSED_FOLD: this rank folds in the other order (see fold()).
bool reversed_fold_for_tests = false;

// buffer = slot(0) op (slot(1) op (... op slot(n - 1))): the one order in which every rank that
// folds the same n buffers does it (the highest first), so that all of them end with the same
// bits; floating-point sums in another association differ in the last ones.
template <typename Slot>
int fold(const Call& c, Slot slot, int n, void* buffer, MPI_Count count) {
  // The test's wrong order starts from slot(0) instead.
  const int first = reversed_fold_for_tests ? 0 : n - 1, step = reversed_fold_for_tests ? 1 : -1;
  std::memcpy(buffer, slot(first), static_cast<std::size_t>(count * c.extent));
  for (int i = first + step; i >= 0 && i < n; i += step)
    if (const int rc = reduce(c, slot(i), buffer, count); rc != MPI_SUCCESS) return rc;
  return MPI_SUCCESS;
}

#define COMMTAP_TRY(expression)         \
  do {                                  \
    const int rc_ = (expression);       \
    if (rc_ != MPI_SUCCESS) return rc_; \
  } while (0)

// ---- Flat algorithms (in place on `buffer`) ----------------------------------------------------

// Runs `core(virtual_rank, p2, real_rank)` on the largest power of two p2 <= size: the first
// 2 * extra ranks pair up, the even one of each pair hands its buffer to the odd one, which
// takes part as virtual rank rank / 2 and sends the result back at the end; the other ranks are
// virtual rank - extra. `real_rank(v)` is the communicator rank of virtual rank v.
template <typename Core>
int with_extra_ranks_folded(const Call& c, MPI_Comm comm, void* buffer, MPI_Count count, void* tmp,
                            Core core) {
  int size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  int p2 = 1;
  while (p2 * 2 <= size) p2 *= 2;
  const int extra = size - p2;
  const int virtual_rank = rank >= 2 * extra ? rank - extra : (rank % 2 == 1 ? rank / 2 : -1);
  auto real_rank = [extra](int v) { return v < extra ? v * 2 + 1 : v + extra; };
  if (rank < 2 * extra) {
    if (rank % 2 == 0) {
      COMMTAP_TRY(send(c, comm, rank + 1, buffer, count));
    } else {
      COMMTAP_TRY(receive(c, comm, rank - 1, tmp, count));
      COMMTAP_TRY(reduce(c, tmp, buffer, count));
    }
  }
  if (virtual_rank >= 0) COMMTAP_TRY(core(virtual_rank, p2, real_rank));
  if (rank < 2 * extra) {
    if (rank % 2 == 1)
      COMMTAP_TRY(send(c, comm, rank - 1, buffer, count));
    else
      COMMTAP_TRY(receive(c, comm, rank + 1, buffer, count));
  }
  return MPI_SUCCESS;
}

// Recursive doubling (extra ranks folded in first). Every exchange combines two partial results
// of equal shape, and the operations are commutative, so all ranks end with the same bits.
int recursive_doubling(const Call& c, MPI_Comm comm, void* buffer, MPI_Count count,
                       std::vector<char>& scratch) {
  scratch.resize(static_cast<std::size_t>(count * c.extent));
  void* tmp = scratch.data();
  return with_extra_ranks_folded(
      c, comm, buffer, count, tmp, [&](int virtual_rank, int p2, auto real_rank) {
        for (int mask = 1; mask < p2; mask <<= 1) {
          COMMTAP_TRY(exchange(c, comm, real_rank(virtual_rank ^ mask), buffer, count, tmp, count));
          COMMTAP_TRY(reduce(c, tmp, buffer, count));
        }
        return MPI_SUCCESS;
      });
}

// Rabenseifner: a reduce-scatter by recursive halving (each round exchanges half of what is
// left, so every rank ends owning one fully reduced chunk), then an all-gather by recursive
// doubling; extra ranks folded in as for recursive doubling. Each chunk is reduced by one rank
// only and then copied, so all ranks end with the same bits. Moves 2n bytes per rank instead
// of recursive doubling's n log p.
int rabenseifner(const Call& c, MPI_Comm comm, void* buffer, MPI_Count count,
                 std::vector<char>& scratch) {
  scratch.resize(static_cast<std::size_t>(std::max<MPI_Count>(1, count) * c.extent));
  void* tmp = scratch.data();
  return with_extra_ranks_folded(
      c, comm, buffer, count, tmp, [&](int virtual_rank, int p2, auto real_rank) {
        // Chunk i holds elements [offset(i), offset(i + 1)).
        auto offset = [&](int i) { return count / p2 * i + std::min<MPI_Count>(i, count % p2); };
        int low = 0, high = p2;  // the chunks this rank still reduces
        for (int mask = p2 / 2; mask >= 1; mask >>= 1) {
          const int middle = (low + high) / 2;
          const bool lower = (virtual_rank & mask) == 0;
          const int keep_low = lower ? low : middle, keep_high = lower ? middle : high;
          const int give_low = lower ? middle : low, give_high = lower ? high : middle;
          const MPI_Count keep = offset(keep_high) - offset(keep_low);
          COMMTAP_TRY(exchange(c, comm, real_rank(virtual_rank ^ mask),
                               c.at(buffer, offset(give_low)), offset(give_high) - offset(give_low),
                               tmp, keep));
          COMMTAP_TRY(reduce(c, tmp, c.at(buffer, offset(keep_low)), keep));
          low = keep_low;
          high = keep_high;
        }
        for (int mask = 1; mask < p2; mask <<= 1) {
          // Blocks of `mask` chunks: this rank's is complete; swap it for the partner's.
          const int partner = virtual_rank ^ mask;
          const int mine = virtual_rank & ~(mask - 1), theirs = partner & ~(mask - 1);
          COMMTAP_TRY(exchange(c, comm, real_rank(partner), c.at(buffer, offset(mine)),
                               offset(mine + mask) - offset(mine), c.at(buffer, offset(theirs)),
                               offset(theirs + mask) - offset(theirs)));
        }
        return MPI_SUCCESS;
      });
}

// Ring: reduce-scatter, then all-gather, over `size` chunks. Each chunk is reduced along one
// chain and then copied, so all ranks end with the same bits. `order`: the ranks around the
// ring (empty: rank order); a rank sends to the next and receives from the one before.
int ring(const Call& c, MPI_Comm comm, void* buffer, MPI_Count count, std::vector<char>& scratch,
         const std::vector<int>& order) {
  int size = 0, real_rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &real_rank);
  const bool ordered = order.size() == static_cast<std::size_t>(size);
  // Positions around the ring stand for ranks below.
  const int rank =
      ordered ? static_cast<int>(std::find(order.begin(), order.end(), real_rank) - order.begin())
              : real_rank;
  auto at_position = [&](int position) {
    return ordered ? order[static_cast<std::size_t>(position)] : position;
  };
  std::vector<MPI_Count> counts(static_cast<std::size_t>(size)), offsets(counts.size());
  for (int i = 0; i < size; ++i) {
    counts[static_cast<std::size_t>(i)] = count / size + (i < count % size ? 1 : 0);
    if (i > 0)
      offsets[static_cast<std::size_t>(i)] =
          offsets[static_cast<std::size_t>(i - 1)] + counts[static_cast<std::size_t>(i - 1)];
  }
  scratch.resize(static_cast<std::size_t>((count / size + 1) * c.extent));
  const int right = at_position((rank + 1) % size), left = at_position((rank + size - 1) % size);
  auto chunk = [&](int i) { return static_cast<std::size_t>(((i % size) + size) % size); };
  for (int step = 0; step < size - 1; ++step) {
    const std::size_t out = chunk(rank - step), in = chunk(rank - step - 1);
    MPI_Request requests[2];
    COMMTAP_TRY(irecv(c, scratch.data(), counts[in], left, comm, &requests[0]));
    COMMTAP_TRY(isend(c, c.at(buffer, offsets[out]), counts[out], right, comm, &requests[1]));
    COMMTAP_TRY(wait_all(c, 2, requests));
    COMMTAP_TRY(reduce(c, scratch.data(), c.at(buffer, offsets[in]), counts[in]));
  }
  for (int step = 0; step < size - 1; ++step) {
    const std::size_t out = chunk(rank + 1 - step), in = chunk(rank - step);
    MPI_Request requests[2];
    COMMTAP_TRY(irecv(c, c.at(buffer, offsets[in]), counts[in], left, comm, &requests[0]));
    COMMTAP_TRY(isend(c, c.at(buffer, offsets[out]), counts[out], right, comm, &requests[1]));
    COMMTAP_TRY(wait_all(c, 2, requests));
  }
  return MPI_SUCCESS;
}

// Star (TPI-LLM): every rank sends its buffer to `root` in segments; the root reduces each
// segment in rank order as soon as it has it, with the next segment's receives already posted,
// then sends the result to every rank directly (one latency round each way).
int star(const Call& c, MPI_Comm comm, void* buffer, MPI_Count count, std::vector<char>& scratch,
         int root = 0) {
  int size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  const MPI_Count segment = std::max<MPI_Count>(1, (256 * 1024) / c.extent);
  const MPI_Count segments = (count + segment - 1) / segment;
  if (rank != root) {
    std::vector<MPI_Request> requests(static_cast<std::size_t>(segments));
    for (MPI_Count s = 0; s < segments; ++s) {
      const MPI_Count first = s * segment, n = std::min(segment, count - first);
      COMMTAP_TRY(
          isend(c, c.at(buffer, first), n, root, comm, &requests[static_cast<std::size_t>(s)]));
    }
    COMMTAP_TRY(wait_all(c, static_cast<int>(segments), requests.data()));
    return receive(c, comm, root, buffer, count);
  }
  // Two segments in flight: one being reduced, the next one arriving.
  const std::size_t segment_bytes = static_cast<std::size_t>(segment * c.extent);
  scratch.resize(2 * static_cast<std::size_t>(size) * segment_bytes);
  std::vector<MPI_Request> posted(2 * static_cast<std::size_t>(size), MPI_REQUEST_NULL);
  auto post = [&](MPI_Count s) -> int {
    const std::size_t slot = static_cast<std::size_t>(s % 2);
    const MPI_Count first = s * segment, n = std::min(segment, count - first);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == root) continue;
      char* into =
          scratch.data() +
          (slot * static_cast<std::size_t>(size) + static_cast<std::size_t>(peer)) * segment_bytes;
      COMMTAP_TRY(
          irecv(c, into, n, peer, comm,
                &posted[slot * static_cast<std::size_t>(size) + static_cast<std::size_t>(peer)]));
    }
    return MPI_SUCCESS;
  };
  COMMTAP_TRY(post(0));
  for (MPI_Count s = 0; s < segments; ++s) {
    if (s + 1 < segments) COMMTAP_TRY(post(s + 1));
    const std::size_t slot = static_cast<std::size_t>(s % 2);
    COMMTAP_TRY(wait_all(c, size, &posted[slot * static_cast<std::size_t>(size)]));
    const MPI_Count first = s * segment, n = std::min(segment, count - first);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == root) continue;
      const char* from =
          scratch.data() +
          (slot * static_cast<std::size_t>(size) + static_cast<std::size_t>(peer)) * segment_bytes;
      COMMTAP_TRY(reduce(c, from, c.at(buffer, first), n));
    }
  }
  std::vector<MPI_Request> sends;
  sends.reserve(static_cast<std::size_t>(size));  // the slots stay put (StepRecorder)
  for (int peer = 0; peer < size; ++peer) {
    if (peer == root) continue;
    sends.emplace_back();
    COMMTAP_TRY(isend(c, buffer, count, peer, comm, &sends.back()));
  }
  return wait_all(c, static_cast<int>(sends.size()), sends.data());
}

// Direct exchange: every rank sends its buffer to every other at once and reduces what it
// receives, so the whole all-reduce takes one network latency (the lower bound for small
// buffers) instead of log2(p). Every rank folds the same p contributions in the same order
// (rank p-1 first, then p-2 op that, ... rank 0 last), so all end with the same bits. Moves
// (p-1)n bytes each way per rank: for small buffers and few ranks (the cost model's choice).
int direct(const Call& c, MPI_Comm comm, void* buffer, MPI_Count count,
           std::vector<char>& scratch) {
  int size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  if (size == 1 || count == 0) return MPI_SUCCESS;
  const std::size_t bytes = static_cast<std::size_t>(count * c.extent);
  scratch.resize(static_cast<std::size_t>(size) * bytes);
  auto slot = [&](int peer) { return scratch.data() + static_cast<std::size_t>(peer) * bytes; };
  std::vector<MPI_Request> requests;
  requests.reserve(2 * static_cast<std::size_t>(size));  // the slots stay put (StepRecorder)
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    requests.emplace_back();
    COMMTAP_TRY(irecv(c, slot(peer), count, peer, comm, &requests.back()));
  }
  // Sends start with the next rank up, so that not everyone sends to rank 0 first.
  for (int step = 1; step < size; ++step) {
    requests.emplace_back();
    COMMTAP_TRY(isend(c, buffer, count, (rank + step) % size, comm, &requests.back()));
  }
  std::memcpy(slot(rank), buffer, bytes);
  COMMTAP_TRY(wait_all(c, static_cast<int>(requests.size()), requests.data()));
  return fold(c, slot, size, buffer, count);
}

// k-nomial (recursive multiplying): the largest power of k not above p, p', takes part; each
// other rank r first hands its buffer to rank r mod p' (which folds its own and theirs in rank
// order) and gets the result back at the end. In round j every rank sends its buffer to the k-1
// ranks that differ from it in base-k digit j alone, and all k fold the same k buffers in digit
// order (the highest first, as `direct` does), so they end with the same bits: log_k(p')
// latencies, (k-1)n bytes each way per round. k = 2 is recursive doubling, k = p the direct
// exchange.
int knomial(const Call& c, MPI_Comm comm, void* buffer, MPI_Count count, std::vector<char>& scratch,
            int radix) {
  int size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  if (size == 1 || count == 0) return MPI_SUCCESS;
  const int k = std::clamp(radix, 2, size);
  int participants = 1;
  while (participants <= size / k) participants *= k;
  const std::size_t bytes = static_cast<std::size_t>(count * c.extent);
  if (rank >= participants) {
    COMMTAP_TRY(send(c, comm, rank % participants, buffer, count));
    return receive(c, comm, rank % participants, buffer, count);
  }
  scratch.resize(static_cast<std::size_t>(k) * bytes);
  auto slot = [&](int d) { return scratch.data() + static_cast<std::size_t>(d) * bytes; };
  // The extra ranks folded into this one, in rank order.
  std::vector<int> extras;
  for (int r = rank + participants; r < size; r += participants) extras.push_back(r);
  for (int r : extras) {
    COMMTAP_TRY(receive(c, comm, r, slot(0), count));
    COMMTAP_TRY(reduce(c, slot(0), buffer, count));
  }
  std::vector<MPI_Request> requests;
  for (int stride = 1; stride < participants; stride *= k) {
    const int digit = rank / stride % k, base = rank - digit * stride;
    requests.clear();
    requests.reserve(2 * static_cast<std::size_t>(k));  // the slots stay put (StepRecorder)
    for (int d = 0; d < k; ++d) {
      if (d == digit) continue;
      requests.emplace_back();
      COMMTAP_TRY(irecv(c, slot(d), count, base + d * stride, comm, &requests.back()));
    }
    for (int step = 1; step < k; ++step) {  // the next digit up first, as `direct` sends
      requests.emplace_back();
      COMMTAP_TRY(
          isend(c, buffer, count, base + (digit + step) % k * stride, comm, &requests.back()));
    }
    std::memcpy(slot(digit), buffer, bytes);
    COMMTAP_TRY(wait_all(c, static_cast<int>(requests.size()), requests.data()));
    COMMTAP_TRY(fold(c, slot, k, buffer, count));
  }
  for (int r : extras) COMMTAP_TRY(send(c, comm, r, buffer, count));
  return MPI_SUCCESS;
}

// `root`: the star's; `order`: the ring's (empty: rank order); `radix`: knomial's k.
int flat(Algorithm algorithm, const Call& c, MPI_Comm comm, void* buffer, MPI_Count count,
         std::vector<char>& scratch, int root = 0, const std::vector<int>& order = {},
         int radix = 2) {
  switch (algorithm) {
    case Algorithm::star:
      return star(c, comm, buffer, count, scratch, root);
    case Algorithm::ring:
      return ring(c, comm, buffer, count, scratch, order);
    case Algorithm::rabenseifner:
      return rabenseifner(c, comm, buffer, count, scratch);
    case Algorithm::direct:
      return direct(c, comm, buffer, count, scratch);
    case Algorithm::knomial:
      return knomial(c, comm, buffer, count, scratch, radix);
    default:
      return recursive_doubling(c, comm, buffer, count, scratch);
  }
}

// Hierarchical in segments: while the leaders all-reduce segment s across nodes, the node
// reduces segment s+1 and broadcasts segment s-1, so that the node's shared memory and the
// network work at once. Every stage is the library's nonblocking collective on commtap's
// private communicators, started in the same order on every rank (as MPI requires); a
// non-leader waits for its own reduction of a segment before the broadcast overwrites it.
//
// The segment size is the cost model's for this call (Tuning::segment_bytes), equal on all ranks.
int pipelined_hierarchical(const Call& c, Topology& t, void* buffer, MPI_Count count) {
  const MPI_Count segment_bytes = std::max<MPI_Count>(1, t.tuning.segment_bytes);
  const MPI_Count per_segment = std::max<MPI_Count>(1, (segment_bytes + c.extent - 1) / c.extent);
  const MPI_Count segments = (count + per_segment - 1) / per_segment;
  const bool leader = t.local_rank == 0;
  auto first = [&](MPI_Count s) { return s * per_segment; };
  auto length = [&](MPI_Count s) { return std::min(per_segment, count - first(s)); };
  std::vector<MPI_Request> reduced(static_cast<std::size_t>(segments), MPI_REQUEST_NULL);
  std::vector<MPI_Request> combined(static_cast<std::size_t>(segments), MPI_REQUEST_NULL);
  std::vector<MPI_Request> broadcast(static_cast<std::size_t>(segments), MPI_REQUEST_NULL);
  for (MPI_Count step = 0; step < segments + 2; ++step) {
    if (step < segments) {
      void* at = c.at(buffer, first(step));
      COMMTAP_TRY(PMPI_Ireduce_c(leader ? MPI_IN_PLACE : at, leader ? at : nullptr, length(step),
                                 c.type, c.op, 0, t.node,
                                 &reduced[static_cast<std::size_t>(step)]));
    }
    if (leader && step >= 1 && step <= segments) {
      const MPI_Count s = step - 1;
      COMMTAP_TRY(wait_all(c, 1, &reduced[static_cast<std::size_t>(s)]));
      COMMTAP_TRY(PMPI_Iallreduce_c(MPI_IN_PLACE, c.at(buffer, first(s)), length(s), c.type, c.op,
                                    t.leaders, &combined[static_cast<std::size_t>(s)]));
    }
    if (step >= 2) {
      const MPI_Count s = step - 2;
      MPI_Request& before =
          leader ? combined[static_cast<std::size_t>(s)] : reduced[static_cast<std::size_t>(s)];
      COMMTAP_TRY(wait_all(c, 1, &before));
      COMMTAP_TRY(PMPI_Ibcast_c(c.at(buffer, first(s)), length(s), c.type, 0, t.node,
                                &broadcast[static_cast<std::size_t>(s)]));
    }
  }
  return wait_all(c, static_cast<int>(segments), broadcast.data());
}

// The leaders' (or peers') algorithm inside a hierarchical one: few ranks, so recursive
// doubling for small buffers and a ring for large ones.
Algorithm inter_algorithm(MPI_Count bytes) {
  return bytes <= 64 * 1024 ? Algorithm::rd : Algorithm::ring;
}

}  // namespace

void reverse_folds_for_tests(bool on) {
  reversed_fold_for_tests = on;
}

int allreduce(Algorithm algorithm, const void* sendbuf, void* recvbuf, MPI_Count count,
              MPI_Datatype type, MPI_Op op, Topology& t, bool yield, std::vector<Step>* steps) {
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  std::optional<StepRecorder> recorder;
  if (steps != nullptr) recorder.emplace(*steps, t);
  const Call c{type, op, extent, yield, recorder ? &*recorder : nullptr};
  if (sendbuf != MPI_IN_PLACE)
    std::memcpy(recvbuf, sendbuf, static_cast<std::size_t>(count * extent));
  const MPI_Count bytes = count * extent;
  switch (algorithm) {
    case Algorithm::star:
    case Algorithm::ring:
    case Algorithm::rd:
    case Algorithm::rabenseifner:
    case Algorithm::direct:
    case Algorithm::knomial:
      return flat(algorithm, c, t.flat, recvbuf, count, t.scratch, t.star_root, t.ring_order,
                  t.tuning.flat_radix);
    case Algorithm::hier_pipe:
      // Rank-independent facts only: a rank alone on its node takes part all the same.
      if (t.nodes > 1 && t.max_local_size > 1) return pipelined_hierarchical(c, t, recvbuf, count);
      [[fallthrough]];
    case Algorithm::hier_rs:
      if (t.regular && t.local_size > 1 && t.nodes > 1) {
        // Each local rank owns a slice: reduce-scatter inside the node, all-reduce the slice
        // with the same local rank of every other node, all-gather inside the node.
        std::vector<MPI_Count> counts(static_cast<std::size_t>(t.local_size));
        std::vector<MPI_Aint> displacements(counts.size());
        for (int i = 0; i < t.local_size; ++i) {
          counts[static_cast<std::size_t>(i)] = count / t.local_size + (i < count % t.local_size);
          if (i > 0)
            displacements[static_cast<std::size_t>(i)] =
                displacements[static_cast<std::size_t>(i - 1)] +
                static_cast<MPI_Aint>(counts[static_cast<std::size_t>(i - 1)]);
        }
        const MPI_Count mine = counts[static_cast<std::size_t>(t.local_rank)];
        std::vector<char> slice(static_cast<std::size_t>(std::max<MPI_Count>(1, mine) * extent));
        MPI_Request request;
        COMMTAP_TRY(PMPI_Ireduce_scatter_c(recvbuf, slice.data(), counts.data(), type, op, t.node,
                                           &request));
        COMMTAP_TRY(wait_all(c, 1, &request));
        if (mine > 0)
          COMMTAP_TRY(
              flat(inter_algorithm(mine * extent), c, t.peers, slice.data(), mine, t.scratch));
        COMMTAP_TRY(PMPI_Iallgatherv_c(slice.data(), mine, type, recvbuf, counts.data(),
                                       displacements.data(), type, t.node, &request));
        return wait_all(c, 1, &request);
      }
      [[fallthrough]];
    case Algorithm::hier:
    case Algorithm::hier_star:
    case Algorithm::hier_direct:
    case Algorithm::hier_knomial:
    default: {
      // The node stages use the library's (shared-memory) collectives, nonblocking so that
      // yield mode can wait without spinning.
      MPI_Request request;
      if (t.local_size > 1) {
        COMMTAP_TRY(PMPI_Ireduce_c(t.local_rank == 0 ? MPI_IN_PLACE : recvbuf,
                                   t.local_rank == 0 ? recvbuf : nullptr, count, type, op, 0,
                                   t.node, &request));
        COMMTAP_TRY(wait_all(c, 1, &request));
      }
      if (t.leaders != MPI_COMM_NULL && t.nodes > 1) {
        const Algorithm leaders = algorithm == Algorithm::hier_star      ? Algorithm::star
                                  : algorithm == Algorithm::hier_direct  ? Algorithm::direct
                                  : algorithm == Algorithm::hier_knomial ? Algorithm::knomial
                                                                         : inter_algorithm(bytes);
        COMMTAP_TRY(flat(leaders, c, t.leaders, recvbuf, count, t.scratch, t.leaders_star_root,
                         t.leaders_ring_order, t.tuning.leaders_radix));
      }
      if (t.local_size > 1) {
        COMMTAP_TRY(PMPI_Ibcast_c(recvbuf, count, type, 0, t.node, &request));
        COMMTAP_TRY(wait_all(c, 1, &request));
      }
      return MPI_SUCCESS;
    }
  }
}

Algorithm choose(const CostModel& m, const Topology& t, MPI_Count bytes, Tuning* tuning) {
  // Measured choices knew nothing of a link flagged since: the formulas route around it.
  const bool flagged = t.flagged_alpha > 0 || t.flagged_beta > 0 || t.flagged_unmeasured;
  if (!flagged && !m.choices.empty() && bytes <= m.choices.back().up_to_bytes &&
      m.measured_ranks == t.size && m.measured_nodes == t.nodes &&
      m.measured_largest_node == t.max_local_size) {
    // A size between two measured ones gets commtap's algorithm only if both chose it: a
    // choice measured at 256 KiB said nothing about 128 KiB on the emulated cluster.
    for (std::size_t i = 0; i < m.choices.size(); ++i) {
      const MeasuredChoice& choice = m.choices[i];
      if (bytes > choice.up_to_bytes) continue;
      if (i == 0 || bytes == choice.up_to_bytes || m.choices[i - 1].algorithm == choice.algorithm)
        return choice.algorithm;
      return Algorithm::native;
    }
  }
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
  const double rd_inside = t.nodes > 1 ? std::min<double>(t.rd_rounds_within_nodes, log2_of(p)) : 0;
  const double rd =
      (log2_of(p) - rd_inside) * (inter_alpha + 2 * o + n * inter_beta + n * m.gamma + excess(n)) +
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
  if (tuning != nullptr) *tuning = {flat_radix, leaders_radix, segment_bytes};
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
    const double p2 = std::pow(2.0, std::floor(std::log2(p)));
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
  // On one host the library's shared-memory algorithms are what commtap's would be built on.
  if (t.nodes <= 1) return Algorithm::native;
  const std::pair<double, Algorithm> forms[] = {{hier_direct, Algorithm::hier_direct},
                                                {direct, Algorithm::direct},
                                                {knomial, Algorithm::knomial},
                                                {hier_knomial, Algorithm::hier_knomial},
                                                {hier, Algorithm::hier},
                                                {pipe, Algorithm::hier_pipe},
                                                {star, Algorithm::star},
                                                {hier_star, Algorithm::hier_star},
                                                {ring, Algorithm::ring}};
  const auto best = std::min_element(std::begin(forms), std::end(forms), [](auto& a, auto& b) {
    return a.first < b.first;  // the first of equals: the list's order of preference
  });
  return best->first < 0.9 * native ? best->second : Algorithm::native;
}

bool asks_the_model(Algorithm algorithm) noexcept {
  return algorithm == Algorithm::automatic || algorithm == Algorithm::knomial ||
         algorithm == Algorithm::hier_knomial || algorithm == Algorithm::hier_pipe;
}

std::optional<int> try_allreduce(const Context& context, const void* sendbuf, void* recvbuf,
                                 MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                                 Algorithm& used, std::vector<Step>* steps) {
  used = Algorithm::native;
  if (context.allreduce == Algorithm::native ||
      allreduce_eligibility(count, type, op, comm) != Eligibility::eligible)
    return std::nullopt;
  using datatypes::MemoryKind;
  if (datatypes::memory_kind(recvbuf) != MemoryKind::host ||
      (sendbuf != MPI_IN_PLACE && datatypes::memory_kind(sendbuf) != MemoryKind::host))
    return std::nullopt;
  Topology* topology = topology_of(comm, context.test_nodes, context.avoid);
  Algorithm algorithm = context.allreduce;
  if (asks_the_model(algorithm)) {
    MPI_Count size = 0;
    PMPI_Type_size_c(type, &size);
    auto cached = topology->chosen.find(count * size);
    if (cached == topology->chosen.end()) {
      if (topology->chosen.size() >= 4096) topology->chosen.clear();
      Tuning tuning;
      const Algorithm best = choose(context.cost_model, *topology, count * size, &tuning);
      cached = topology->chosen.emplace(count * size, std::make_pair(best, tuning)).first;
    }
    const auto [chosen, tuning] = cached->second;
    topology->tuning = tuning;
    if (context.knomial_radix > 0)
      topology->tuning.flat_radix = topology->tuning.leaders_radix = context.knomial_radix;
    if (algorithm == Algorithm::automatic) algorithm = chosen;
    if (algorithm == Algorithm::native) return std::nullopt;
  }
  used = algorithm;
  return allreduce(algorithm, sendbuf, recvbuf, count, type, op, *topology, context.yield, steps);
}

}  // namespace commtap::collectives
