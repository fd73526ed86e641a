// The flat all-reduce forms, in place on a buffer among all ranks of one communicator:
// recursive doubling, Rabenseifner, ring, star, direct exchange and k-nomial.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/algorithms.hpp"
#include "collectives/point_to_point.hpp"

namespace commtap::collectives {

namespace {

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

}  // namespace

int flat(Algorithm algorithm, const Call& c, MPI_Comm comm, void* buffer, MPI_Count count,
         std::vector<char>& scratch, int root, const std::vector<int>& order, int radix) {
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

}  // namespace commtap::collectives
