#include "probes/probes.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "monitor/clock.hpp"
#include "world/world.hpp"

namespace commtap::probes {

int tournament_rounds(int players) {
  return players < 2 ? 0 : players + players % 2 - 1;
}

int tournament_partner(int players, int round, int index) {
  const int n = players + players % 2;  // a bye makes it even
  if (index == n - 1) return round;
  if (index == round) return n - 1;
  return ((2 * round - index) % (n - 1) + (n - 1)) % (n - 1);
}

int tournament_round_of(int players, int a, int b) {
  const int n = players + players % 2;
  if (a == n - 1) return b;
  if (b == n - 1) return a;
  // partner = 2 round - a (mod n - 1): round = (a + b) / 2, and n / 2 is the inverse of 2 modulo
  // the odd n - 1.
  return static_cast<int>((static_cast<std::int64_t>(a + b) * (n / 2)) % (n - 1));
}

namespace {

// Probing takes at most kMaxShare (async_probes.hpp) of the time between two probes, judged on the
// cheapest of the last three cycles, each a round and the decisions that led to it (everything this
// rank spent on probes: on 2 loaded cores the decisions cost as much as the rounds): a link that
// just became slow makes its transfers long, and the rounds that confirm it (the analyzer needs
// 2-3) still come at the set interval; a lasting fault then spaces them out so that the bound holds
// again. The decisions alone take at most this part of that share (of kConfirmShare right after a
// round and while a change waits to be confirmed): where one costs more than kMaxDecisionStepS
// allows (a dissemination among descheduled ranks), they are asked less often. Not before a rank's
// first three rounds, which come at the set interval whatever they cost.
constexpr double kDecisionPart = 0.25;
// Confirmations (changes.hpp): a round that measured a direction kChangeFactor times slower than
// its fastest of the rounds before (latency or transfer) found a change: a fault the analyzer
// needs two to four rounds to name (docs/analyzer.md), which the bound would otherwise put 20-40 s
// apart on a loaded machine (rounds of 100-200 ms), and even the set interval 10-20 s apart. The
// next round then comes kConfirmAfterS later (the set interval where that is shorter), for as long
// as rounds keep finding a change and everything spent on probes beyond the first rounds (rounds
// and decisions) stays under kConfirmShare of the time since probing began. A lasting fault reads
// as a change in the first round that sees it and the two after (ChangeDetector keeps three
// rounds), so it gets four rounds within about 3 s; a descheduled leader's round is a change once,
// and the next one reads fine. A fault there from a direction's first round reads as a change
// against the round's other directions for its first three rounds, so it too gets four rounds
// within about 3 s. kConfirmAfterS is the decisions' longest step, so a change waits for no more
// than one decision.

// A communicator asks again at least this often: the rate of its collectives that a rank turns
// seconds into sequence numbers with is a past one, and a job that speeds up would otherwise be
// probed late.
constexpr double kMaxDecisionStepS = 1.0;
// A communicator whose members are on some of the job's hosts only waits this much longer than
// the interval, so that one on all of them (the world's collectives, a Cartesian communicator
// of every rank), which asks at least every kMaxDecisionStepS, gets the rounds where both are
// used, and the pairs between the smaller ones' hosts are probed too. Only while such a one is
// in use, by this rank's account: it asked within as long. A program whose collectives are all on
// communicators of some hosts (a pipeline's stages split off without its first rank) would
// otherwise have its rounds, and its confirmations, that much later for nothing.
constexpr double kPartialWaitS = 2 * kMaxDecisionStepS;
// A pair without a round for this many set intervals is measured asynchronously, collectives or
// not (LinkProber::rounds_quiet).
constexpr double kOverdueIntervals = 2;
// The fastest of several: noise (a descheduled rank, other traffic) only ever adds time. Each is a
// round trip that waits for the other leader, which on a loaded machine is descheduled: the
// repeats stop once the two fastest agree (within kAgree), since noise that adds the same time to
// two of them is unlikely; they go on, up to the most, while they differ.
constexpr int kMinPings = 2, kPings = 5;
constexpr int kMinTransfers = 2, kTransfers = 3;
constexpr double kAgree = 1.25;
constexpr std::uint64_t kAgreeNs = 2'000;  // clock reads and a yield: below it, all agree
// ... except on a link so slow that noise cannot explain it (a busy node stalls a transfer for
// up to ~25 ms, seen on 2 loaded cores): one transfer says enough, and repeating it would
// triple the cost where probing costs most.
constexpr std::uint64_t kSlowTransferNs = 50'000'000;
// Each communicator's messages on the private communicator carry tags of their own (decisions,
// probes, leaving), below MPI's guaranteed MPI_TAG_UB of 32767 and apart from the collectives
// module's calibration tag (0x7ca1).
constexpr int kTagBase = 0x3000;
constexpr std::uint64_t kTagSlots = 4096;
constexpr int kDecideTag = 0, kProbeTag = 1, kLeaveTag = 2, kPairTag = 3;

// Completes requests that may take a while (members waiting for their leaders to finish a
// round): tests with sched_yield for kSpinNs, then sleeps kNapNs between tests, so that on an
// oversubscribed machine the waiting members leave the cores to the leaders, whose every message
// waits for them to be scheduled (on 2 loaded cores a round took 140-540 ms with the waiting
// members polling beside them).
constexpr std::uint64_t kSpinNs = 50'000, kNapNs = 200'000;
void wait_napping(int count, MPI_Request requests[]) {
  const std::uint64_t began = monitor::now_ns();
  for (;;) {
    int done = 0;
    if (PMPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS || done) return;
    if (monitor::elapsed_ns(began, monitor::now_ns()) < kSpinNs) {
      sched_yield();
    } else {
      const timespec nap{0, static_cast<long>(kNapNs)};
      ::nanosleep(&nap, nullptr);
    }
  }
}

// Whether tournament round `round` is among `rounds` (bits by round; empty: every round).
bool in_rounds(const std::vector<std::uint64_t>& rounds, int round) {
  return rounds.empty() || (rounds[static_cast<std::size_t>(round) / 64] >> (round % 64) & 1u) != 0;
}

// Whether the two fastest of `times` agree (there are two at least).
bool two_fastest_agree(std::vector<std::uint64_t> times) {
  std::partial_sort(times.begin(), times.begin() + 2, times.end());
  return static_cast<double>(times[1]) <= kAgree * static_cast<double>(times[0]) ||
         times[1] - times[0] <= kAgreeNs;
}

}  // namespace

LinkProber::LinkProber(MPI_Comm comm, const world::NodeLayout& layout,
                       const ProbeSettings& settings, bool thread_multiple) {
  interval_ns_ = static_cast<std::uint64_t>(settings.probe_interval) * 1'000'000'000ull;
  probe_bytes_ = static_cast<std::uint64_t>(settings.probe_bytes);
  hosts_ = layout.nodes;
  round_end_by_node_.assign(static_cast<std::size_t>(std::max(0, hosts_)), 0);
  // Every rank has the same layout: all return here, or none.
  if (interval_ns_ == 0 || hosts_ < 2) return;
  // Shared with commtap's other agreements, which use its collectives (and the collectives
  // module's calibration at MPI_Init, its own tag); the probes use point-to-point only.
  comm_ = comm;
  PMPI_Comm_size(comm_, &world_size_);
  // Every rank learns every world rank's host, so that each member of any communicator can
  // tell its hosts and their first members from the membership alone ...
  node_of_rank_.resize(static_cast<std::size_t>(world_size_));
  int mine = layout.node_index;
  MPI_Request request = MPI_REQUEST_NULL;
  PMPI_Iallgather(&mine, 1, MPI_INT, node_of_rank_.data(), 1, MPI_INT, comm_, &request);
  world::wait_all(1, &request, true);
  int any_multiple = 0, multiple = thread_multiple ? 1 : 0;
  PMPI_Iallreduce(&multiple, &any_multiple, 1, MPI_INT, MPI_MAX, comm_, &request);
  world::wait_all(1, &request, true);
  world_only_ = any_multiple != 0;
  // ... and every host's name, for the rows: the leaders gather them, and each tells its host.
  constexpr int kName = 256;
  char name[kName] = {};
  ::gethostname(name, kName - 1);
  std::vector<char> names(static_cast<std::size_t>(hosts_) * kName);
  if (layout.leaders != MPI_COMM_NULL) {
    PMPI_Iallgather(name, kName, MPI_CHAR, names.data(), kName, MPI_CHAR, layout.leaders, &request);
    world::wait_all(1, &request, true);
  }
  PMPI_Ibcast(names.data(), static_cast<int>(names.size()), MPI_CHAR, 0, layout.node, &request);
  world::wait_all(1, &request, true);
  for (int h = 0; h < hosts_; ++h)
    host_names_.emplace_back(&names[static_cast<std::size_t>(h) * kName]);
  send_buffer_.resize(probe_bytes_);
  receive_buffer_.resize(probe_bytes_);
  // The world's leaders meet once now, untimed: MPI connects a pair of processes on its first
  // message (TCP's handshake and its own), which the first round would otherwise pay, at load
  // for longer than a round (a first round of 203 ms against 84 ms for the later ones), and the
  // cost bound would space the next rounds by it.
  std::vector<int>& first_of_host = world_leaders_;
  first_of_host.assign(static_cast<std::size_t>(hosts_), -1);
  for (int r = world_size_ - 1; r >= 0; --r)
    first_of_host[static_cast<std::size_t>(node_of_rank_[static_cast<std::size_t>(r)])] = r;
  node_ = layout.node_index;
  int me = 0;
  PMPI_Comm_rank(comm_, &me);
  if (first_of_host[static_cast<std::size_t>(layout.node_index)] == me)
    for (int round = 0; round < tournament_rounds(hosts_); ++round) {
      const int peer = tournament_partner(hosts_, round, layout.node_index);
      if (peer >= hosts_) continue;  // a bye
      char out = 0, in = 0;
      exchange(&out, 1, &in, 1, first_of_host[static_cast<std::size_t>(peer)], kTagBase + kPairTag);
    }
  cost_.since_ns = monitor::now_ns();
}

LinkProber::Schedule* LinkProber::schedule_of(const Members& comm) {
  if (auto found = schedules_.find(comm.id); found != schedules_.end()) return found->second.get();
  auto s = std::make_unique<Schedule>();
  if (comm.world_ranks == nullptr || comm.world_ranks->empty()) {
    s->members.resize(static_cast<std::size_t>(comm.size));
    for (int r = 0; r < comm.size; ++r) s->members[static_cast<std::size_t>(r)] = r;
  } else {
    s->members = *comm.world_ranks;
  }
  if (static_cast<int>(s->members.size()) != comm.size || comm.rank < 0 || comm.rank >= comm.size)
    return nullptr;
  for (int member : s->members)
    if (member < 0 || member >= world_size_) return nullptr;  // a spawned process: not ours
  std::vector<int> hosts;
  for (int member : s->members) hosts.push_back(node_of_rank_[static_cast<std::size_t>(member)]);
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  if (hosts.size() < 2) return nullptr;
  s->hosts = hosts;
  s->leaders.assign(hosts.size(), -1);
  // Each host's member of the lowest rank in the communicator measures for it.
  for (int member : s->members) {
    const auto h =
        static_cast<std::size_t>(std::lower_bound(hosts.begin(), hosts.end(),
                                                  node_of_rank_[static_cast<std::size_t>(member)]) -
                                 hosts.begin());
    if (s->leaders[h] < 0) s->leaders[h] = member;
  }
  const int me = s->members[static_cast<std::size_t>(comm.rank)];
  s->host = static_cast<int>(
      std::lower_bound(hosts.begin(), hosts.end(), node_of_rank_[static_cast<std::size_t>(me)]) -
      hosts.begin());
  s->leader = s->leaders[static_cast<std::size_t>(s->host)] == me;
  s->tag = kTagBase + 4 * static_cast<int>(static_cast<std::uint64_t>(comm.id) % kTagSlots);
  s->last_decision_ns = cost_.since_ns;
  return schedules_.emplace(comm.id, std::move(s)).first->second.get();
}

bool LinkProber::can_probe(const Members& comm) {
  return interval_ns_ != 0 && hosts_ >= 2 && (comm.id == 1 || !world_only_) &&
         schedule_of(comm) != nullptr;
}

void LinkProber::all_max(const Schedule& s, int rank, std::uint64_t* values, int count, int tag,
                         bool napping, int or_from) {
  const int n = static_cast<int>(s.members.size());
  std::vector<std::uint64_t> in(static_cast<std::size_t>(std::max(count, 0)));
  char none_out = 0, none_in = 0;
  for (int k = 1; k < n; k <<= 1) {
    const int to = s.members[static_cast<std::size_t>((rank + k) % n)];
    const int from = s.members[static_cast<std::size_t>(((rank - k) % n + n) % n)];
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (count > 0) {
      PMPI_Irecv(in.data(), count, MPI_UINT64_T, from, tag, comm_, &requests[0]);
      PMPI_Isend(values, count, MPI_UINT64_T, to, tag, comm_, &requests[1]);
    } else {
      PMPI_Irecv(&none_in, 0, MPI_BYTE, from, tag, comm_, &requests[0]);
      PMPI_Isend(&none_out, 0, MPI_BYTE, to, tag, comm_, &requests[1]);
    }
    if (count > 0 && !napping)
      world::wait_all(2, requests, true);
    else
      wait_napping(2, requests);  // leaving: some wait for their leaders' round
    for (int i = 0; i < count; ++i)
      values[i] = i < or_from ? std::max(values[i], in[static_cast<std::size_t>(i)])
                              : values[i] | in[static_cast<std::size_t>(i)];
  }
}

std::uint64_t LinkProber::after_collective(const Members& comm, std::uint64_t seq,
                                           std::vector<monitor::ProbeRow>& rows) {
  Schedule* s = schedule_of(comm);
  if (s == nullptr) return kNever;
  const std::uint64_t entered = monitor::now_ns();
  // Each member says whether it may probe now: the interval has passed since its last round on
  // any communicator (grown so that the last cycles' cost, rounds and decisions, is at most
  // kMaxShare of it, once there are three: the first rounds are the pairs' baselines and come at
  // the set interval; longer for a communicator on some hosts only), and when it would ask again:
  // that many seconds of this communicator's collectives at their recent rate, but no sooner
  // than its decisions' own share allows (two earliest next seqs: at the routine share and at
  // the confirmations'); and whether its newest round found a change (or the communicator's pace
  // dropped since its last round of every pair, PaceWatch: then the round measures every pair),
  // and whether it may confirm one now. One all-reduce (the maximum of "not yet", the minimum of
  // the next seq, the maxima of "changed", of "may not confirm" and of the earliest next seqs)
  // carries all six, so every member agrees, and picks the earliest from what they agreed.
  ProbeBudget budget;
  budget.set_interval_s = static_cast<double>(interval_ns_) / 1e9;
  budget.cheapest_cycle_s = full_rounds_ < kRoundsKept ? 0.0
                                                       : *std::min_element(recent_cycles_s_.begin(),
                                                                           recent_cycles_s_.end());
  if (static_cast<int>(s->hosts.size()) == hosts_) last_full_decision_ns_ = entered;
  const bool full_in_use =
      last_full_decision_ns_ != 0 &&
      static_cast<double>(entered - last_full_decision_ns_) < kPartialWaitS * 1e9;
  budget.partial_wait_s =
      static_cast<int>(s->hosts.size()) < hosts_ && full_in_use ? kPartialWaitS : 0.0;
  budget.since_round_s = last_round_end_ns_ == 0
                             ? std::numeric_limits<double>::infinity()
                             : static_cast<double>(entered - last_round_end_ns_) / 1e9;
  budget.since_full_round_s = last_full_round_end_ns_ == 0
                                  ? std::numeric_limits<double>::infinity()
                                  : static_cast<double>(entered - last_full_round_end_ns_) / 1e9;
  // A change the second round finds is confirmed as soon as one the third finds: the third
  // round, which comes whatever it costs, then comes a second after the second.
  if (cost_.rounds >= kRoundsKept)
    budget.spent_since_first_s = static_cast<double>(cost_.probing_ns + cost_.deciding_ns -
                                                     excused_ns_ - first_rounds_spent_ns_) /
                                 1e9;
  budget.since_start_s = static_cast<double>(entered - cost_.since_ns) / 1e9;
  const RoundsDue due = rounds_due(budget);
  const double elapsed_s = std::max(1e-9, static_cast<double>(entered - s->last_decision_ns) / 1e9);
  const double per_s = static_cast<double>(seq - s->last_decision_seq) / elapsed_s;
  const double wait_s = std::min(
      kMaxDecisionStepS,
      due.routine ? due.interval_s : due.interval_s + budget.partial_wait_s - budget.since_round_s);
  auto seqs_in = [&](double seconds) {
    return seq + static_cast<std::uint64_t>(std::clamp(seconds * per_s, 1.0, 1e12));
  };
  // A decision's usual cost: the median of the last ones, not the mean since the start. The
  // first decisions and rounds are far dearer (on 8 ranks of 2 loaded cores rank 0 spent 266 ms
  // probing in the job's first second, 0-1 ms a second later), and a mean that kept them spaced
  // the decisions out for most of a 45 s job: no round from 3.0 s to 37.7 s, a 3 ms link named
  // 34 s after it began (docs/faults.md, sweep 51).
  std::array<std::uint64_t, kDecisionsKept> kept = recent_decisions_ns_;
  const auto known =
      static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(decisions_, kDecisionsKept));
  std::nth_element(kept.begin(), kept.begin() + known / 2, kept.begin() + known);
  const double usual_decision_s =
      known == 0 ? 0.0 : static_cast<double>(kept[static_cast<std::size_t>(known / 2)]) / 1e9;
  const bool spacing = cost_.rounds >= kRoundsKept;  // the first rounds come at the interval
  // After the eight maxima, the tournament rounds that would confirm a change, and those that
  // would confirm a strong one, as bits (OR).
  constexpr int kFixed = 8;
  const std::size_t words =
      (static_cast<std::size_t>(tournament_rounds(static_cast<int>(s->hosts.size()))) + 63) / 64;
  const ChangedRounds changed = changed_rounds(*s, words);
  if (s->pace.note(seq, entered)) s->pace_dropped = true;
  auto any = [](auto begin, auto end) {
    return std::any_of(begin, end, [](std::uint64_t w) { return w != 0; });
  };
  std::vector<std::uint64_t> decision = {
      due.routine ? 0u : 1u,
      UINT64_MAX - seqs_in(wait_s),
      any(changed.any.begin(), changed.any.end()) || s->pace_dropped ? 1u : 0u,
      due.confirm ? 0u : 1u,
      spacing ? seqs_in(usual_decision_s / (kMaxShare * kDecisionPart)) : 0u,
      spacing ? seqs_in(usual_decision_s / (kConfirmShare * kDecisionPart)) : 0u,
      due.confirm_strong ? 0u : 1u,
      confirm_every_pair_ || s->pace_dropped ? 1u : 0u};
  decision.insert(decision.end(), changed.any.begin(), changed.any.end());
  decision.insert(decision.end(), changed.strong.begin(), changed.strong.end());
  all_max(*s, comm.rank, decision.data(), static_cast<int>(decision.size()), s->tag + kDecideTag,
          false, kFixed);
  const auto strong_begin = decision.begin() + kFixed + static_cast<std::ptrdiff_t>(words);
  s->last_decision_seq = seq;
  s->last_decision_ns = entered;
  const std::uint64_t decided = monitor::now_ns();
  const std::uint64_t deciding_ns = monitor::elapsed_ns(entered, decided);
  cost_.deciding_ns += deciding_ns;
  deciding_since_round_ns_ += deciding_ns;
  recent_decisions_ns_[decisions_ % kDecisionsKept] = deciding_ns;
  ++decisions_;
  const bool routine = decision[0] == 0;
  const bool confirm = decision[2] != 0 && decision[3] == 0;
  // A strong change (changes.hpp) is confirmed whatever the share: the noise's changes spend it
  // (at 2 busy loops, seven confirmations of a noisy pair in the job's first 10 s), and a 5 ms
  // link found right after waited 8 s for its next round (docs/faults.md, sweep 37). Bounded by
  // kStrongConfirmations per direction over the job, whose cost beyond the usual turn the share
  // leaves out too (SlowTransferExcuses).
  const bool confirm_strong = decision[6] == 0 && any(strong_begin, decision.end());
  const bool probing = routine || confirm || confirm_strong;
  // After a round (which may find a change) and while a change waits, the next decision comes
  // at the confirmations' spacing, so that a confirming round is not held up by the routine one;
  // a strong change waiting for its confirmation's second asks within kMaxDecisionStepS whatever
  // the decisions cost (kStrongConfirmations per direction bound them): on 8 ranks of 2 loaded
  // cores a decision took 10-25 ms, which the spacing turned into 2-5 s, and a 5 ms link found in
  // a round waited 5.2 s for its confirmation (docs/faults.md, sweep 50).
  const bool strong_waits = decision[6] != 0 && any(strong_begin, decision.end());
  std::uint64_t next = strong_waits
                           ? UINT64_MAX - decision[1]
                           : std::max(UINT64_MAX - decision[1],
                                      probing || decision[2] != 0 ? decision[5] : decision[4]);
  if (!probing) return next;
  // A routine round measures every pair; a confirming one the tournament rounds of the changed
  // pairs only (a pair's both directions, and the pairs disjoint from it measured at the same
  // moment, which the analyzer tells a loaded machine's noise by): at h hosts, 1 of h - 1
  // tournament rounds for one changed pair, so that a loaded machine's noise and a fault both
  // get their confirmations within the share (docs/faults.md, sweep 37).
  // A direction's first strong change found in a round of some pairs only is confirmed by a
  // round of every pair: a host's network slows all its pairs, and one of them confirmed alone
  // three times before the others were measured again is named a link (a transpose's host
  // network named `ctap1 <-> ctap3` for 6 s before the host, docs/faults.md sweep 37).
  std::vector<std::uint64_t> confirming;  // empty: every tournament round
  if (!routine && decision[7] == 0 && confirm)
    confirming.assign(decision.begin() + kFixed, strong_begin);
  else if (!routine && decision[7] == 0)
    confirming.assign(strong_begin, decision.end());
  if (confirming.empty()) confirm_every_pair_ = s->pace_dropped = false;
  // This rank's host's partners in those rounds (schedule indexes), and their hosts (nodes).
  std::vector<int> peers, measured;
  const int players = static_cast<int>(s->hosts.size());
  for (int round = 0; round < tournament_rounds(players); ++round) {
    if (!in_rounds(confirming, round)) continue;
    const int peer = tournament_partner(players, round, s->host);
    if (peer >= players) continue;  // a bye
    peers.push_back(peer);
    measured.push_back(s->hosts[static_cast<std::size_t>(peer)]);
  }
  for (int node : measured) changed_nodes_.erase(node);
  round_excess_ns_ = 0;
  if (s->leader) rows = probe_round(*s, peers);
  if (!confirming.empty() && found_strong_alone_) confirm_every_pair_ = true;
  found_strong_alone_ = false;
  // Everyone leaves together: members that were not probing would otherwise reach the next
  // collective ahead of their leaders, and the leaders would look late. Leaving, they agree on
  // the round's excess: the most any leader's slow measurements took beyond what the share leaves
  // out (SlowTransferExcuses).
  // And whether a leader's round found a strong change: then the next decision comes when its
  // confirmation is due (the earliest of the members' seqs for kConfirmAfterS after this round),
  // not at the spacing agreed before the round.
  const ChangedRounds found = changed_rounds(*s, words);
  const bool strong_now = any(found.strong.begin(), found.strong.end());
  const double round_s = static_cast<double>(monitor::elapsed_ns(entered, monitor::now_ns())) / 1e9;
  std::uint64_t leaving[3] = {round_excess_ns_, strong_now ? 1u : 0u,
                              UINT64_MAX - seqs_in(round_s + kConfirmAfterS)};
  all_max(*s, comm.rank, leaving, 3, s->tag + kLeaveTag, true);
  const std::uint64_t excess = leaving[0];
  if (leaving[1] != 0) next = std::min(next, UINT64_MAX - leaving[2]);
  last_round_end_ns_ = monitor::now_ns();
  s->pace.restart(seq, last_round_end_ns_);
  for (int h : measured)
    if (h >= 0 && h < hosts_) round_end_by_node_[static_cast<std::size_t>(h)] = last_round_end_ns_;
  ++cost_.rounds;
  const std::uint64_t probing_ns = monitor::elapsed_ns(decided, last_round_end_ns_);
  cost_.probing_ns += probing_ns;
  excused_ns_ += std::min(excess, probing_ns);
  // A routine cycle's cost for the bound, as this rank paid it (a member that does not measure
  // waits for its leader as long). A confirming round's is paid from the confirmations' share.
  if (routine) {
    last_full_round_end_ns_ = last_round_end_ns_;
    last_round_partial_ = budget.partial_wait_s > 0;
    ++full_rounds_;
    recent_cycles_s_[(full_rounds_ - 1) % kRoundsKept] =
        static_cast<double>(probing_ns + deciding_since_round_ns_) / 1e9;
  }
  deciding_since_round_ns_ = 0;
  // The confirmations' share is what probing cost beyond the first rounds, which come whatever
  // they cost, over the time since probing began: a fault the second or third round sees (5 or
  // 10 s in, at the default interval) can be confirmed at once. Every member counts them, leader
  // or not, so all agree when.
  if (cost_.rounds == kRoundsKept)
    first_rounds_spent_ns_ = cost_.probing_ns + cost_.deciding_ns - excused_ns_;
  return next;
}

const std::vector<int>* LinkProber::probed_hosts(std::int64_t comm_id) const {
  const auto found = schedules_.find(comm_id);
  return found == schedules_.end() || found->second == nullptr ? nullptr : &found->second->hosts;
}

bool LinkProber::rounds_quiet(std::uint64_t now, std::uint64_t last_collective_ns,
                              int peer_node) const {
  const std::uint64_t round_end = peer_node >= 0 && peer_node < hosts_
                                      ? round_end_by_node_[static_cast<std::size_t>(peer_node)]
                                      : last_full_round_end_ns_;
  const std::uint64_t last = std::max(round_end, cost_.since_ns);
  // The set interval, and the one the cost bound grows it to.
  const auto set_interval_ns = static_cast<double>(interval_ns_);
  double interval_ns = set_interval_ns;
  if (full_rounds_ >= kRoundsKept)
    interval_ns =
        std::max(interval_ns, *std::min_element(recent_cycles_s_.begin(), recent_cycles_s_.end()) /
                                  kMaxShare * 1e9);
  // A communicator on some hosts only (while one of every host is in use) has its rounds
  // kPartialWaitS later than the interval.
  const double partial_ns = last_round_partial_ ? kPartialWaitS * 1e9 : 0.0;
  const auto since_round = static_cast<double>(monitor::elapsed_ns(last, now));
  // Overdue: whatever put the rounds off (the bound on a loaded machine, collectives seconds
  // apart, decisions placed by a rate of collectives that a fault then slowed), the pair is
  // measured asynchronously once kOverdueIntervals set intervals have passed without its round.
  if (since_round >= kOverdueIntervals * set_interval_ns + partial_ns) return true;
  return since_round >= interval_ns + partial_ns &&
         static_cast<double>(monitor::elapsed_ns(last_collective_ns, now)) >= interval_ns;
}

AsyncProber* LinkProber::start_async(AsyncProber::RowSink sink) {
  async_agreed_ = interval_ns_ != 0 && hosts_ >= 2 && !world_only_;
  if (!async_agreed_) return nullptr;
  int me = 0;
  PMPI_Comm_rank(comm_, &me);
  if (world_leaders_[static_cast<std::size_t>(node_)] != me) return nullptr;
  AsyncProber::Layout layout{comm_, node_, world_leaders_, host_names_, interval_ns_, probe_bytes_};
  async_ = std::make_unique<AsyncProber>(std::move(layout), *this, std::move(sink));
  return async_.get();
}

void LinkProber::before_finalize() {
  if (!async_agreed_) return;
  if (async_) async_->finish_measuring();
  MPI_Request barrier = MPI_REQUEST_NULL;
  PMPI_Ibarrier(comm_, &barrier);
  if (async_)
    async_->finish_with_barrier(barrier);
  else
    wait_napping(1, &barrier);
}

std::uint64_t SlowTransferExcuses::excuse(int peer_node, bool measured, std::uint64_t excess_ns) {
  if (excess_ns < kFloorNs) return 0;
  int& used = (measured ? measured_ : answered_)[peer_node];
  if (used >= (measured ? kMeasuredTurns : kAnsweredTurns)) return 0;
  ++used;
  return excess_ns;
}

TransferPlan transfer_plan(std::uint64_t probe_bytes, std::uint64_t last_ns,
                           std::uint64_t round_trip_ns) {
  if (last_ns < kCappedAfterNs || last_ns < kLatencyBound * round_trip_ns) return {probe_bytes, 0};
  return {std::max<std::uint64_t>(probe_bytes / 4, 1), kCappedTransferNs};
}

RoundsDue rounds_due(const ProbeBudget& b) {
  RoundsDue due;
  due.interval_s = std::max(b.set_interval_s, b.cheapest_cycle_s / kMaxShare);
  due.routine = b.since_full_round_s >= due.interval_s + b.partial_wait_s;
  due.confirm_strong =
      b.since_start_s > 0 &&
      b.since_round_s >= std::min(b.set_interval_s, kConfirmAfterS) + b.partial_wait_s;
  due.confirm = due.confirm_strong && b.spent_since_first_s <= kConfirmShare * b.since_start_s;
  return due;
}

LinkProber::ChangedRounds LinkProber::changed_rounds(const Schedule& s, std::size_t words) const {
  ChangedRounds bits{std::vector<std::uint64_t>(words, 0), std::vector<std::uint64_t>(words, 0)};
  const int players = static_cast<int>(s.hosts.size());
  for (const auto& [node, strong] : changed_nodes_) {
    const auto at = std::lower_bound(s.hosts.begin(), s.hosts.end(), node);
    if (at == s.hosts.end() || *at != node) continue;  // a pair this communicator does not span
    const int peer = static_cast<int>(at - s.hosts.begin());
    if (peer == s.host) continue;
    const int round = tournament_round_of(players, s.host, peer);
    const std::uint64_t bit = std::uint64_t{1} << (round % 64);
    bits.any[static_cast<std::size_t>(round) / 64] |= bit;
    if (strong) bits.strong[static_cast<std::size_t>(round) / 64] |= bit;
  }
  return bits;
}

std::vector<monitor::ProbeRow> LinkProber::probe_round(const Schedule& s,
                                                       const std::vector<int>& peers) {
  began_ = monitor::now_ns();
  std::vector<monitor::ProbeRow> rows;
  std::vector<ChangeDetector::Reading> readings;
  const int tag = s.tag + kProbeTag;
  for (const int peer : peers) {
    const int peer_rank = s.leaders[static_cast<std::size_t>(peer)];
    const bool first = s.host < peer;
    // The side that answers first has its receive posted before it says it is here, so that
    // the first measurement is not held up by it; and both leaders are here before anything is
    // timed: one still held by its previous pair (whose link stalled) would otherwise make this
    // pair's first round trip look stalled too.
    if (!first) post_answer_receive(peer_rank, tag);
    char here_out = 0, here_in = 0;
    exchange(&here_out, 1, &here_in, 1, peer_rank, s.tag + kPairTag);
    // Each side, in turn, measures its own direction: round trips of one byte for latency
    // (the fastest, halved), then `probe_bytes_` timed from its send to the receiver's
    // acknowledgement, less the acknowledgement's half round trip; an empty message ends a turn.
    // What each side saw come back from the other is the other's direction: it travels in the
    // message that ends the side's turn, and is kept in the latency row of the direction it
    // crossed.
    monitor::ProbeRow latency_row, transfer_row;
    std::uint64_t slowest_there = 0;
    if (first) {
      measure(s, peer, latency_row, transfer_row, true);
      slowest_there = answer(peer_rank, tag);
    } else {
      slowest_there = answer(peer_rank, tag);
      measure(s, peer, latency_row, transfer_row, false);
    }
    latency_row.slowest_oneway_ns = std::max(latency_row.slowest_oneway_ns, slowest_there);
    // The transfer at the probe's size, whether it was capped or not (transfer_plan).
    const int peer_node = s.hosts[static_cast<std::size_t>(peer)];
    // Their network parts, as the analyzer reads them: less what the messages may have waited off
    // the CPU for either leader (half of it for a latency, half a round trip).
    auto less = [](std::uint64_t ns, std::uint64_t held) { return ns > held ? ns - held : 1; };
    const std::uint64_t transfer_ns = last_transfer_ns_[peer_node];
    const std::uint64_t transfer_network =
        transfer_row.ns == 0
            ? transfer_ns
            : less(transfer_row.ns, transfer_row.from_held_ns + transfer_row.to_held_ns) *
                  transfer_ns / transfer_row.ns;
    readings.push_back(
        {peer_node, latency_row.ns, transfer_ns,
         less(latency_row.ns, (latency_row.from_held_ns + latency_row.to_held_ns) / 2),
         transfer_network});
    rows.push_back(std::move(latency_row));
    rows.push_back(std::move(transfer_row));
  }
  for (const ChangeDetector::Changed& c : changes_.note_round(readings)) {
    if (c.strong)
      round_excess_ns_ += excuses_.excuse(c.peer_node, true, turn_excess_ns_[c.peer_node]);
    int& strong_used = strong_changes_[c.peer_node];
    const bool strong = c.strong && strong_used < kStrongConfirmations;
    found_strong_alone_ |= strong && strong_used == 0;
    strong_used += strong ? 1 : 0;
    changed_nodes_[c.peer_node] = strong;
  }
  return rows;
}

void LinkProber::exchange(void* out, int out_bytes, void* in, int in_bytes, int peer_rank,
                          int tag) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (in != nullptr) PMPI_Irecv(in, in_bytes, MPI_BYTE, peer_rank, tag, comm_, &requests[0]);
  if (out != nullptr) PMPI_Isend(out, out_bytes, MPI_BYTE, peer_rank, tag, comm_, &requests[1]);
  world::wait_all(2, requests, true);
}

LinkProber::Completion LinkProber::wait_noting_hold(int count, MPI_Request requests[],
                                                    std::uint64_t since, MPI_Status* statuses) {
  // The last moment the requests were seen not complete: what completed them came later, so
  // it waited for this rank at most from then on. A rank that polls without a break sees it
  // within microseconds; one descheduled (2 loaded cores: milliseconds) only when it runs again.
  std::uint64_t last_miss = since;
  for (;;) {
    const std::uint64_t before = monitor::now_ns();
    int done = 0;
    const int rc =
        PMPI_Testall(count, requests, &done, statuses == nullptr ? MPI_STATUSES_IGNORE : statuses);
    const std::uint64_t after = monitor::now_ns();
    if (rc != MPI_SUCCESS || done) return {after, monitor::elapsed_ns(last_miss, after)};
    last_miss = before;
    sched_yield();
  }
}

LinkProber::Completion LinkProber::round_trip(const void* out, int out_bytes, PeerTimes& reply,
                                              std::uint64_t since, int peer_rank, int tag) {
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  PMPI_Irecv(&reply, sizeof reply, MPI_BYTE, peer_rank, tag, comm_, &requests[0]);
  PMPI_Isend(out, out_bytes, MPI_BYTE, peer_rank, tag, comm_, &requests[1]);
  return wait_noting_hold(2, requests, since, nullptr);
}

void LinkProber::post_answer_receive(int peer_rank, int tag) {
  PMPI_Irecv(receive_buffer_.data(), static_cast<int>(receive_buffer_.size()), MPI_BYTE, peer_rank,
             tag, comm_, &answer_request_);
}

void LinkProber::measure(const Schedule& s, int peer, monitor::ProbeRow& latency,
                         monitor::ProbeRow& transfer, bool answer_next) {
  const std::uint64_t turn_began = monitor::now_ns();
  const int peer_rank = s.leaders[static_cast<std::size_t>(peer)];
  const int tag = s.tag + kProbeTag;
  char byte = 0;
  struct Ping {
    std::uint64_t sent, peer_received, peer_replied, received, held_here, held_there;
  };
  std::vector<Ping> pings;
  std::vector<std::uint64_t> rtts;
  std::size_t fastest = 0;
  while (pings.size() < kPings) {
    PeerTimes far{};
    const std::uint64_t sent = monitor::now_ns();
    const Completion done = round_trip(&byte, 1, far, sent, peer_rank, tag);
    pings.push_back({sent, far.received_ns, far.replied_ns, done.at_ns, done.held_ns, far.held_ns});
    rtts.push_back(monitor::elapsed_ns(sent, done.at_ns));
    if (rtts.back() < rtts[fastest]) fastest = rtts.size() - 1;
    if (rtts.size() >= kMinPings && two_fastest_agree(rtts)) break;
  }
  // The peer's clock less this one's, from the fastest round trip (NTP's estimate: off by at
  // most half of it): it splits every round trip into its two one-way legs.
  const Ping& best = pings[fastest];
  const std::int64_t offset = (static_cast<std::int64_t>(best.peer_received - best.sent) +
                               static_cast<std::int64_t>(best.peer_replied - best.received)) /
                              2;
  // A leg is 1 ns at least: one the offset's error makes negative (a fastest round trip whose
  // way there waited 1.4 ms for a descheduled peer and whose way back took 70 us puts the offset
  // 0.65 ms off) is still measured, and 0 is the rows' "not recorded".
  auto there = [&](std::uint64_t sent_here, std::uint64_t received_there) {
    return static_cast<std::uint64_t>(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(received_there - sent_here) - offset));
  };
  auto back = [&](std::uint64_t sent_there, std::uint64_t received_here) {
    return static_cast<std::uint64_t>(
        std::max<std::int64_t>(1, static_cast<std::int64_t>(received_here - sent_there) + offset));
  };
  const std::uint64_t best_rtt = rtts[fastest];
  std::uint64_t worst_rtt = 0, slowest_there = 0;
  std::uint64_t slowest_back = 0;  // the longest one-way leg from the peer seen here
  for (const Ping& ping : pings) {
    worst_rtt = std::max(worst_rtt, monitor::elapsed_ns(ping.sent, ping.received));
    slowest_there = std::max(slowest_there, there(ping.sent, ping.peer_received));
    slowest_back = std::max(slowest_back, back(ping.peer_replied, ping.received));
  }
  // The transfers: the peer's receive is posted before its previous reply, so each is timed from
  // its send to the reply that says the peer had it all.
  std::vector<std::uint64_t> takes;
  std::uint64_t worst_transfer = 0, slowest_data = 0, held_here = 0, held_there = 0;
  std::size_t quickest = 0;
  const int to_node = s.hosts[static_cast<std::size_t>(peer)];
  const TransferPlan plan = transfer_plan(probe_bytes_, last_transfer_ns_[to_node], best_rtt);
  std::uint64_t bytes = probe_bytes_, acknowledgements = 1;
  if (plan.cap_ns > 0) {
    // One capped transfer (transfer_plan): its chunks' data legs and times held off the CPU add
    // up, and each chunk's reply is an acknowledgement less.
    const std::uint64_t t0 = monitor::now_ns();
    std::uint64_t end = t0;
    bytes = 0;
    acknowledgements = 0;
    while (bytes < probe_bytes_ && monitor::elapsed_ns(t0, end) < plan.cap_ns) {
      PeerTimes had{};
      const std::uint64_t c0 = monitor::now_ns();
      const Completion done = round_trip(send_buffer_.data(), static_cast<int>(plan.chunk_bytes),
                                         had, c0, peer_rank, tag);
      end = done.at_ns;
      bytes += plan.chunk_bytes;
      ++acknowledgements;
      held_here += done.held_ns;
      held_there += had.held_ns;
      slowest_data = std::max(slowest_data, there(c0, had.received_ns));
      slowest_back = std::max(slowest_back, back(had.replied_ns, done.at_ns));
    }
    takes.push_back(monitor::elapsed_ns(t0, end));
    worst_transfer = takes.back();
  }
  std::uint64_t beyond_cap_ns = 0;  // of the whole transfers (SlowTransferExcuses)
  while (plan.cap_ns == 0 && takes.size() < kTransfers) {
    PeerTimes had{};
    const std::uint64_t t0 = monitor::now_ns();
    const Completion done = round_trip(send_buffer_.data(), static_cast<int>(send_buffer_.size()),
                                       had, t0, peer_rank, tag);
    takes.push_back(monitor::elapsed_ns(t0, done.at_ns));
    if (takes.back() > kCappedTransferNs) beyond_cap_ns += takes.back() - kCappedTransferNs;
    if (takes.back() <= takes[quickest]) {
      quickest = takes.size() - 1;
      held_here = done.held_ns;
      held_there = had.held_ns;
    }
    worst_transfer = std::max(worst_transfer, takes.back());
    slowest_data = std::max(slowest_data, there(t0, had.received_ns));
    slowest_back = std::max(slowest_back, back(had.replied_ns, done.at_ns));
    if (takes[quickest] > kSlowTransferNs) break;
    if (takes.size() >= kMinTransfers && two_fastest_agree(takes)) break;
  }
  // What this turn cost beyond the direction's usual one, where it found the direction changed
  // by that much (a delayed link's pings and transfers wait for it round trip after round trip);
  // the usual turn stays the one from before the change while the direction reads changed.
  const std::uint64_t turn_ns = monitor::elapsed_ns(turn_began, monitor::now_ns());
  std::uint64_t& usual_turn = usual_turn_ns_[to_node];
  const bool slow_turn = usual_turn > 0 && static_cast<double>(turn_ns) >=
                                               kChangeFactor * static_cast<double>(usual_turn);
  const std::uint64_t beyond_usual = slow_turn ? turn_ns - usual_turn : 0;
  if (!slow_turn) usual_turn = turn_ns;
  // Left out of the share where the measurement is a strong change (probe_round).
  turn_excess_ns_[to_node] = std::max(beyond_cap_ns, beyond_usual);
  // The turn ends with the longest leg back (8 bytes: neither a ping nor a transfer) on the
  // peer's posted receive; this side's own receive for the peer's turn is posted before it, so
  // the peer may start at once.
  if (answer_next) post_answer_receive(peer_rank, tag);
  MPI_Request stop = MPI_REQUEST_NULL;
  PMPI_Isend(&slowest_back, sizeof slowest_back, MPI_BYTE, peer_rank, tag, comm_, &stop);
  world::wait_all(1, &stop, true);
  // Numbered and named by the job's hosts, whichever communicator's members measured.
  const int from_node = s.hosts[static_cast<std::size_t>(s.host)];
  const std::string& from = host_names_[static_cast<std::size_t>(from_node)];
  const std::string& to = host_names_[static_cast<std::size_t>(to_node)];
  latency = {began_,
             from_node,
             to_node,
             from,
             to,
             1,
             best_rtt / 2,
             best.sent,
             best.peer_received,
             best.peer_replied,
             best.received,
             worst_rtt / 2,
             slowest_there};
  latency.from_held_ns = best.held_here;
  latency.to_held_ns = best.held_there;
  auto less_ack = [&](std::uint64_t ns) {
    const std::uint64_t acks = acknowledgements * (best_rtt / 2);
    return ns > acks ? ns - acks : ns;
  };
  transfer = {began_, from_node, to_node, from, to, bytes, less_ack(takes[quickest])};
  last_transfer_ns_[to_node] = transfer.ns * probe_bytes_ / std::max<std::uint64_t>(1, bytes);
  transfer.slowest_ns = less_ack(worst_transfer);
  transfer.slowest_oneway_ns = slowest_data;
  transfer.from_held_ns = held_here;
  transfer.to_held_ns = held_there;
}

std::uint64_t LinkProber::answer(int peer_rank, int tag) {
  // Pings and transfers alike, on the receive posted before: each is answered with when it was
  // had and how long this side may have been held off the CPU with it waiting; the next receive
  // is posted before the reply, so that a transfer after it is not held up. The peer's longest
  // leg back ends its turn (returned).
  std::uint64_t since = monitor::now_ns();
  for (;;) {
    MPI_Status status;
    const Completion had = wait_noting_hold(1, &answer_request_, since, &status);
    int count = 0;
    PMPI_Get_count(&status, MPI_BYTE, &count);
    if (count == sizeof(std::uint64_t)) {
      std::uint64_t slowest = 0;
      std::memcpy(&slowest, receive_buffer_.data(), sizeof slowest);
      return slowest;
    }
    if (count <= 0) return 0;  // an error: nothing more comes
    // A whole transfer (not a ping, nor a capped transfer's chunk), since the reply before it.
    if (static_cast<std::uint64_t>(count) == probe_bytes_) {
      const std::uint64_t take = monitor::elapsed_ns(since, had.at_ns);
      if (take > kCappedTransferNs)
        round_excess_ns_ += excuses_.excuse(node_of_rank_[static_cast<std::size_t>(peer_rank)],
                                            false, take - kCappedTransferNs);
    }
    post_answer_receive(peer_rank, tag);
    PeerTimes far{had.at_ns, 0, had.held_ns};
    far.replied_ns = monitor::now_ns();
    MPI_Request reply = MPI_REQUEST_NULL;
    PMPI_Isend(&far, sizeof far, MPI_BYTE, peer_rank, tag, comm_, &reply);
    world::wait_all(1, &reply, true);
    since = monitor::now_ns();
  }
}

}  // namespace commtap::probes
