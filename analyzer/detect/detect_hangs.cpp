// Hangs and lost ranks (docs/analyzer.md).
#include "analyzer/detect/detectors.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "analyzer/findings/statistics.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::analyzer {

namespace {

struct Seen {
  const Heartbeat& beat;
  std::uint64_t now;            // when it was seen so: now, or its end
  const std::string* ended_by;  // what ended it while it was so; null: it still runs
};

// What the heartbeats say of each rank, for both kinds of hang below.
struct Liveness {
  const Job& job;
  std::uint64_t stale_ns;
  // A launcher that tears a job down SIGKILLs ranks without a last window, so "never wrote how
  // it ended" alone does not mark the first to go; a heartbeat silent for a while does.
  // A rank that has not written its first heartbeat yet has been silent since its start.
  static std::uint64_t heard(const Rank& r) {
    return r.last.wall_ns != 0 ? r.last.wall_ns : r.start_ns;
  }
  bool lost(const Rank& r) const {
    return r.ended_by == "running" && job.now_wall > heard(r) + stale_ns;
  }
  // Ended by a crash of its own: a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL) or abort() (SIGABRT),
  // written by its handler before the process died.
  static bool crashed(const Rank& r) {
    for (const char* name : {"SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT"})
      if (r.ended_by == name) return true;
    return false;
  }
  // Ended by a signal sent to stop it (a batch system's SIGTERM, Ctrl-C), not a crash.
  static bool ended_by_signal(const Rank& r) {
    return (r.ended_by.rfind("SIG", 0) == 0 || r.ended_by == "signal") && !crashed(r);
  }
  // The job is over and `r` went first without a word: its trace stops without an end, no later
  // than every other rank's, and the others ended after tearing their communicators down
  // (ncclCommAbort, MPI_Abort: the error a dead peer gives them), none by a signal (a job being
  // stopped, whose launcher may SIGKILL ranks before they write their end). That is a crash,
  // however soon the others followed.
  bool died_first(int number, const Rank& r) const {
    if (r.ended_by != "running") return false;
    bool torn_down = false;
    for (const auto& [other, o] : job.ranks) {
      if (other == number) continue;
      if (o.ended_by == "running" || ended_by_signal(o) || heard(o) < heard(r)) return false;
      torn_down =
          torn_down || o.nccl_aborts > 0 || o.ended_by == "abort" || o.ended_by == "mpi_error";
    }
    return torn_down;
  }
  // A fatal MPI error of the kind a failed peer gives: its transport's (MPICH reports a dead
  // UCX or TCP endpoint as MPI_ERR_OTHER) or the fault-tolerance extension's, not the caller's
  // own mistake (MPI_ERR_TAG, MPI_ERR_RANK, ...), whose peer may well be alive.
  static bool peer_failure(const MpiError& e) {
    for (const char* named :
         {"MPI_ERR_OTHER", "MPI_ERR_INTERN", "MPI_ERR_UNKNOWN", "MPI_ERR_IN_STATUS",
          "MPI_ERR_PENDING", "MPI_ERR_PROC_ABORTED", "MPIX_ERR_PROC_FAILED", "MPIX_ERR_REVOKED"})
      if (e.error_class == named) return true;
    return false;
  }
  // Where each fatal MPI error of a failed peer's kind points (erring rank -> that rank; -1:
  // none): the failing call's peer, where it has one; else (a collective, MPI_Waitall) the one
  // member of the call's communicator whose trace stops without an end no later than the error,
  // if only one does (a rank still heard from after the error is alive; several silent ones, as
  // when the launcher killed every rank at once, cannot be told apart). MPI aborts a job within
  // milliseconds of such an error and the launcher kills every rank, so all traces stop together
  // and only these errors say who went first. Each communicator's running members are sorted
  // once by when they were last heard: every survivor of a 10,000-rank all-reduce may have
  // recorded its error.
  std::map<int, int> error_targets() const {
    std::map<int, int> targets;
    std::map<std::int64_t, std::vector<std::pair<std::uint64_t, int>>> running_by_comm;
    auto silent_members = [&](std::int64_t comm_id) -> const auto& {
      auto [at, added] = running_by_comm.try_emplace(comm_id);
      if (!added) return at->second;
      std::vector<int> members;
      if (auto c = job.comms.find(comm_id); c != job.comms.end()) members = c->second.members;
      if (members.empty())
        for (const auto& [number, r] : job.ranks) members.push_back(number);
      for (int m : members)
        if (auto r = job.ranks.find(m); r != job.ranks.end() && r->second.ended_by == "running")
          at->second.emplace_back(heard(r->second), m);
      std::sort(at->second.begin(), at->second.end());
      return at->second;
    };
    for (const auto& [erring, e] : job.ranks) {
      if (e.ended_by != "mpi_error" || !peer_failure(e.error)) continue;
      int& target = targets[erring] = -1;
      if (e.error.peer >= 0) {
        auto p = job.ranks.find(e.error.peer);
        if (e.error.peer != erring && p != job.ranks.end() && p->second.ended_by == "running" &&
            heard(p->second) <= e.end_ns)
          target = e.error.peer;
        continue;
      }
      const auto& sorted = silent_members(e.error.comm_id);
      const auto silent =
          std::upper_bound(sorted.begin(), sorted.end(), std::make_pair(e.end_ns, INT_MAX)) -
          sorted.begin();
      if (silent == 1) target = sorted.front().second;
    }
    return targets;
  }
  // A rank that something other than MPI_Finalize ended (a signal: the batch system's time
  // limit, a user's scancel, a launcher tearing the job down; or exit, abort) is judged as it
  // stood at its last heartbeat before that, up to its end: a job killed while it hung did hang,
  // and that is what the analysis after the job is for.
  Seen seen(const Rank& r) const {
    const bool killed = r.ended_by != "running" && r.ended_by != "finalize" &&
                        r.last.state == r.ended_by && r.last_running.wall_ns != 0;
    return killed ? Seen{r.last_running, r.last.wall_ns, &r.ended_by}
                  : Seen{r.last, job.now_wall, nullptr};
  }
  // It missed a heartbeat at least, as it is seen (stopped, crashed, frozen): one that still
  // writes them runs, whatever it is doing.
  bool missed_heartbeat(const Rank& r) const {
    const auto missed_ns = static_cast<std::uint64_t>((1.5 * job.interval_s + 0.5) * 1e9);
    const Seen v = seen(r);
    return v.now > (v.ended_by ? v.beat.wall_ns : heard(r)) + missed_ns;
  }
  // Silent long before its end (stopped, frozen): what it was doing then is long past.
  bool silent(const Seen& v) const { return v.ended_by && v.now > v.beat.wall_ns + stale_ns; }
  // The newest heartbeat any rank wrote while it ran, as the ranks are seen.
  std::uint64_t newest_running_ns() const {
    std::uint64_t newest = 0;
    for (const auto& [number, r] : job.ranks) newest = std::max(newest, seen(r).beat.wall_ns);
    return newest;
  }
  // Silent long before a signal ended it (SIGSTOPped or frozen, then the job stopped), while
  // another rank was heard from long after it went quiet: what the analysis while it ran called
  // lost. `newest_ns`: newest_running_ns(); it is another rank's, being newer than this one's.
  bool frozen_before_end(const Rank& r, std::uint64_t newest_ns) const {
    const Seen v = seen(r);
    return silent(v) && newest_ns > v.beat.wall_ns + stale_ns;
  }
  // What a rank that never arrived at an instance on `comm_id` was doing: "rank 2 (h0) last
  // entered #100, computing".
  std::string doing(int c, std::int64_t comm_id) const {
    auto r = job.ranks.find(c);
    if (r == job.ranks.end()) return "rank " + std::to_string(c) + " has no trace";
    const Rank& cr = r->second;
    std::uint64_t entered = 0;
    if (auto p = cr.progress.find(comm_id); p != cr.progress.end()) entered = p->second.entered;
    std::string text = job.rank_name(c) + " last entered #" + std::to_string(entered) + ", ";
    const Seen v = seen(cr);
    const std::string state = v.beat.state == "in_call" ? "in " + v.beat.function : v.beat.state;
    if (lost(cr))
      text += "no heartbeat for " + ms_text(static_cast<double>(job.now_wall - cr.last.wall_ns));
    else if (silent(v))
      text += "no heartbeat for " + ms_text(static_cast<double>(v.now - v.beat.wall_ns)) +
              " before " + *v.ended_by + " ended it (stopped or frozen); it was last " + state;
    else if (v.beat.state == "in_call")
      text += state + " for " + ms_text(static_cast<double>(v.now - v.beat.since_ns));
    else
      text += state;
    return text;
  }
  // Of several ranks that never arrived, one that stopped writing heartbeats (it missed one at
  // least: stopped, crashed) or computes outside any call is the cause, and one blocked inside a
  // call all that time (a pipeline stage in MPI_Recv from the stopped one) waits for it. Only
  // when all are blocked inside calls (a point-to-point deadlock) are all named. Moves the
  // waiting ones from `culprits` to the result.
  std::vector<int> split_waiting(std::vector<int>& culprits) const {
    std::vector<int> waiting;
    if (culprits.size() <= 1) return waiting;
    auto cause = [&](int m) {
      auto r = job.ranks.find(m);
      if (r == job.ranks.end()) return true;  // no trace at all
      return missed_heartbeat(r->second) || seen(r->second).beat.state != "in_call";
    };
    if (std::any_of(culprits.begin(), culprits.end(), cause)) {
      for (int m : culprits)
        if (!cause(m)) waiting.push_back(m);
      std::erase_if(culprits, [&](int m) { return !cause(m); });
    }
    return waiting;
  }
  // "rank 3 (h1)", or "host h1" when several culprits are all of one host's ranks among them.
  std::string subject_of(const std::vector<int>& culprits) const {
    std::set<int> culprit_hosts;
    for (int c : culprits)
      if (auto r = job.ranks.find(c); r != job.ranks.end()) culprit_hosts.insert(r->second.host);
    if (culprits.size() > 1 && culprit_hosts.size() == 1)
      return "host " + job.hosts[static_cast<std::size_t>(*culprit_hosts.begin())];
    return job.rank_name(culprits.front());
  }
};

// The most specific part of an MPI error's text: MPICH's error stack goes from the call down to
// the transport, so its last line that says something ("... MPIDI_UCX_send Endpoint timeout"),
// without its "function(line)...:" prefix; the text as it is otherwise. The text was read as
// clean text (untrusted_input.hpp), its line breaks escaped as \x0A.
std::string innermost_error(const std::string& text) {
  static constexpr std::string_view kBreak = "\\x0A";
  std::string last;
  for (std::size_t begin = 0; begin <= text.size();) {
    std::size_t end = text.find(kBreak, begin);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + begin, end - begin);
    if (const std::size_t colon = line.find(": ");
        colon != std::string_view::npos && line.find('(') < colon)
      line.remove_prefix(colon + 2);
    if (const std::size_t start = line.find_first_not_of(' '); start != std::string_view::npos)
      last = line.substr(start);
    begin = end + kBreak.size();
  }
  return last.empty() ? "no text" : last;
}

std::string names_of(const Job& job, const std::vector<int>& ranks) {
  std::string names;
  for (int r : ranks) names += (names.empty() ? "" : ", ") + job.rank_name(r);
  return names;
}

// Hangs on communicators of another library (NCCL), from the ranks' progress: an NCCL call
// returns once its work is enqueued, and the host then waits outside any recorded call (in
// cudaStreamSynchronize), so every heartbeat says 'computing' and only the counts of collectives
// enqueued (`entered`) and completed on the GPU (`completed`) tell a hang. A comm_progress row is
// written when they change, so its wall time says since when they stand still.
// - Some members enqueued collective #s and the others never did, the counts of those that did
//   standing still for --hang-after (their kernels cannot finish without the others'): a hang,
//   naming those that never enqueued it (the cause), not everyone.
// - Every member enqueued it and its kernel has not finished for --hang-after, where the job's
//   completions are known (a completed count above 0 on the communicator; without a GPU they
//   never are): a communication hang of the communicator.
// A rank that called ncclCommAbort is named in the evidence as a consequence: the application
// (PyTorch's watchdog, say) tore the communicator down after the hang.
void detect_progress_hangs(const Job& job, const HealthOptions& options, const Liveness& live,
                           std::vector<Finding>& out) {
  const auto hang_ns = static_cast<std::uint64_t>(options.hang_after_s * 1e9);
  struct Member {
    int rank;
    std::uint64_t entered, completed, since;
    Seen v;
  };
  struct Stuck {
    std::int64_t comm_id;
    std::uint64_t seq;
    std::vector<int> members, waiting, culprits;
    bool kernel = false;  // every member enqueued it: its kernel does not finish
    std::uint64_t since, until;
  };
  std::vector<Stuck> stuck;
  for (const auto& [comm_id, comm] : job.comms) {
    if (!comm.nccl || comm.size < 2) continue;
    std::vector<Member> members;
    for (int m : comm.members) {
      auto r = job.ranks.find(m);
      if (m < 0 || r == job.ranks.end()) continue;
      const Rank& rank = r->second;
      Member member{m, 0, 0, rank.start_ns, live.seen(rank)};
      if (auto p = rank.progress.find(comm_id); p != rank.progress.end()) {
        member.entered = p->second.entered;
        member.completed = p->second.completed;
        member.since = rank.progress_since.at(comm_id);
      }
      members.push_back(member);
    }
    if (members.size() < 2) continue;
    std::uint64_t least = UINT64_MAX, most = 0;
    bool completions_known = false;
    for (const Member& m : members) {
      least = std::min(least, m.entered);
      most = std::max(most, m.entered);
      completions_known |= m.completed > 0;
    }
    if (most == 0) continue;
    // The first collective someone never enqueued; or, where all enqueued the same, the last.
    const bool all_entered = least == most;
    if (all_entered && !completions_known) continue;
    const std::uint64_t seq = all_entered ? most : least + 1;
    // Those that enqueued it and wait: their counts stand still, its kernel not done. One that
    // got through it, or whose counts still move, says the others are only slow (or that this
    // is not one collective of all of them): no hang. One that is gone says nothing either way.
    Stuck s{comm_id, seq, {}, {}, {}, all_entered, UINT64_MAX, 0};
    bool moving = false;
    for (const Member& m : members) {
      s.members.push_back(m.rank);
      if (m.entered < seq) {
        s.culprits.push_back(m.rank);
        continue;
      }
      if (live.lost(job.ranks.at(m.rank)) || live.silent(m.v)) continue;
      if ((completions_known && m.completed >= seq) || m.v.now < m.since + hang_ns) {
        moving = true;
        break;
      }
      s.waiting.push_back(m.rank);
      s.since = std::min(s.since, m.since);
      s.until = std::max(s.until, m.v.now);
    }
    if (moving || s.waiting.empty()) continue;
    stuck.push_back(std::move(s));
  }
  std::set<int> waiting_somewhere;
  for (const Stuck& s : stuck) waiting_somewhere.insert(s.waiting.begin(), s.waiting.end());
  for (Stuck& s : stuck) {
    // A rank that never enqueued because it waits on another communicator (its kernels there
    // cannot finish, and its host went no further) is not the cause; that communicator's finding
    // names the cause.
    if (!s.culprits.empty()) {
      std::erase_if(s.culprits, [&](int m) { return waiting_somewhere.count(m) > 0; });
      if (s.culprits.empty()) continue;
    }
    // A rank whose heartbeat stopped (stopped, frozen) is the cause before ranks that still
    // run: those wait on their streams for work that needs it (a ring's neighbour cannot finish
    // the previous step), and their host thread reads 'computing' as the cause's did.
    std::vector<int> behind;
    auto silent = [&](int m) {
      auto r = job.ranks.find(m);
      return r == job.ranks.end() || live.lost(r->second) || live.silent(live.seen(r->second));
    };
    if (std::any_of(s.culprits.begin(), s.culprits.end(), silent) &&
        !std::all_of(s.culprits.begin(), s.culprits.end(), silent)) {
      for (int m : s.culprits)
        if (!silent(m)) behind.push_back(m);
      std::erase_if(s.culprits, [&](int m) { return !silent(m); });
    }
    std::vector<int> blocked = live.split_waiting(s.culprits);
    blocked.insert(blocked.end(), behind.begin(), behind.end());
    std::vector<int> aborted;
    for (int m : s.members)
      if (job.ranks.at(m).nccl_aborts > 0) aborted.push_back(m);
    Finding f;
    f.first_seen_ns = s.since;
    f.last_seen_ns = s.until;
    f.severity = Severity::critical;
    const std::string where = "collective #" + std::to_string(s.seq) + " on comm " +
                              std::to_string(s.comm_id) + " (NCCL)";
    const Seen first = live.seen(job.ranks.at(s.waiting.front()));
    const std::string stuck_for =
        " for " + ms_text(static_cast<double>(s.until - s.since)) +
        (first.ended_by ? " until " + *first.ended_by + " ended the job" : "");
    if (!s.culprits.empty()) {
      f.kind = finding_kind::hang;
      f.subject = live.subject_of(s.culprits);
      std::string doing;
      for (int c : s.culprits) {
        doing += (doing.empty() ? "" : "; ") + live.doing(c, s.comm_id);
        // Ended while the others still wait (a process that exited): say so.
        const Rank& cr = job.ranks.at(c);
        if (!first.ended_by && cr.ended_by != "running")
          doing += " (it ended: " + cr.ended_by + ")";
      }
      f.summary = std::to_string(s.waiting.size()) + " of " + std::to_string(s.members.size()) +
                  " ranks enqueued " + where + " and wait for it" + stuck_for +
                  " (their kernels cannot finish); never enqueued: " + doing;
      if (!blocked.empty())
        f.summary += "; also not there, blocked in calls or on their streams (waiting for it): " +
                     names_of(job, blocked);
    } else {
      f.kind = finding_kind::communication_hang;
      f.subject = "comm " + std::to_string(s.comm_id);
      f.summary = "all " + std::to_string(s.waiting.size()) + " ranks of comm " +
                  std::to_string(s.comm_id) + " (NCCL) enqueued collective #" +
                  std::to_string(s.seq) + " and its kernel has not finished on any" + stuck_for +
                  " (a communication hang: see the link findings for the likely link)";
    }
    if (!aborted.empty())
      f.summary += "; then " + names_of(job, aborted) +
                   " called ncclCommAbort (a consequence: the communicator was torn down after "
                   "the hang)";
    f.evidence.rule = NcclHangEvidence{.comm_id = s.comm_id,
                                       .seq = s.seq,
                                       .stuck_ranks = s.waiting,
                                       .members = s.members.size(),
                                       .stuck_ns = s.until - s.since,
                                       .aborted = aborted,
                                       .culprits = s.culprits,
                                       .waiting_in_calls = blocked};
    out.push_back(f);
  }
}

// Lost ranks: no heartbeat for a while although others go on (or ended properly), or the first
// to go in a job the others then tore down.
void detect_lost_ranks(const Job& job, const Liveness& live, std::vector<Finding>& out) {
  auto lost = [&](const Rank& r) { return live.lost(r); };
  const std::map<int, int> error_targets = live.error_targets();
  std::map<int, std::vector<int>> named_by_errors;  // a rank -> the errors pointing at it
  for (const auto& [erring, target] : error_targets)
    if (target >= 0) named_by_errors[target].push_back(erring);
  std::set<int> found;
  const std::uint64_t newest_running_ns = live.newest_running_ns();
  for (const auto& [number, r] : job.ranks) {
    const auto named = named_by_errors.find(number);
    const std::vector<int> named_by =
        lost(r) || named == named_by_errors.end() ? std::vector<int>{} : named->second;
    const bool first_to_go = !lost(r) && (live.died_first(number, r) || !named_by.empty());
    const bool frozen = !lost(r) && live.frozen_before_end(r, newest_running_ns);
    if (!lost(r) && !first_to_go && !frozen && !Liveness::crashed(r)) continue;
    found.insert(number);
    Finding f;
    f.kind = finding_kind::rank_lost;
    f.subject = job.rank_name(number);
    f.severity = Severity::critical;
    // A crashed or frozen rank's newest heartbeat is its end; what it was doing is the one
    // before (none where it crashed within its first window). A frozen one was last heard then,
    // and silent until its end.
    const Heartbeat& last =
        (Liveness::crashed(r) || frozen) && r.last_running.wall_ns != 0 ? r.last_running : r.last;
    const Heartbeat& heard_last = frozen ? r.last_running : r.last;
    const std::uint64_t heard = frozen ? heard_last.wall_ns : Liveness::heard(r);
    const std::uint64_t until = frozen ? r.last.wall_ns : job.now_wall;
    f.first_seen_ns = heard;
    f.last_seen_ns = until;
    std::string how = ": no heartbeat for " + ms_text(static_cast<double>(until - heard)) +
                      " while other ranks go on (crashed or frozen)";
    if (frozen) {
      how = ": no heartbeat for " + ms_text(static_cast<double>(until - heard)) + " before " +
            r.ended_by + " ended it, while other ranks went on (stopped or frozen)";
    } else if (!named_by.empty()) {
      const Rank& first = job.ranks.at(named_by.front());
      const MpiError& e = first.error;
      how = ": its trace stops without an end, and " + job.rank_name(named_by.front()) + "'s " +
            (e.function.empty() ? "MPI call" : e.function) +
            (e.peer >= 0 ? " to it" : " (it alone of the communicator silent)") + " failed as a " +
            "dead peer's do (" + e.error_class + ": " + innermost_error(e.text) + ")" +
            (named_by.size() > 1 ? ", and " + count_text(named_by.size() - 1, "other rank") + "'s"
                                 : "") +
            " (crashed, or its host unreachable)";
    } else if (first_to_go) {
      how =
          ": its trace stops without an end, before every other rank's, which then tore their "
          "communicators down (crashed)";
    } else if (Liveness::crashed(r)) {
      how = ": crashed (" + r.ended_by + ", its last window written by commtap's handler)";
    }
    f.summary = job.rank_name(number) + how;
    if (!Liveness::crashed(r) || r.last_running.wall_ns != 0)
      f.summary +=
          "; it was last " + (last.state == "in_call" ? "in " + last.function : last.state);
    f.evidence.rule = RankLostEvidence{.rank = number,
                                       .host = job.hosts[static_cast<std::size_t>(r.host)],
                                       .last_heartbeat_ns = heard_last.wall_ns,
                                       .silent_ns = until - heard,
                                       .last_state = heard_last.state,
                                       .last_function = heard_last.function,
                                       .named_by_mpi_errors = named_by};
    f.host = job.hosts[static_cast<std::size_t>(r.host)];
    out.push_back(f);
  }
  // The fatal MPI errors no lost rank explains: a peer failure whose peer was found lost above
  // (or, with no one peer, any rank lost) is that rank's finding; the caller's own mistakes
  // (an invalid tag, rank, count) and failures of peers that went on are findings of their own.
  for (const auto& [number, r] : job.ranks) {
    if (r.ended_by != "mpi_error") continue;
    const MpiError& e = r.error;
    if (const auto t = error_targets.find(number);
        t != error_targets.end() && t->second >= 0 && found.count(t->second))
      continue;
    if (Liveness::peer_failure(e) && e.peer < 0 && !found.empty()) continue;
    // A collective's failure younger than a window and a half: the members' next windows tell
    // the dead one from the living (the rule above then names it), so it is not said yet. Once
    // they are in, or never came (the launcher killed every rank), it is.
    if (Liveness::peer_failure(e) && e.peer < 0 &&
        static_cast<double>(job.analyzed_at_wall) <
            static_cast<double>(r.end_ns) + 1.5e9 * job.interval_s)
      continue;
    Finding f;
    f.kind = finding_kind::mpi_error;
    f.subject = job.rank_name(number);
    f.severity = Severity::critical;
    f.host = job.hosts[static_cast<std::size_t>(r.host)];
    f.first_seen_ns = f.last_seen_ns = r.end_ns;
    f.summary = job.rank_name(number) + ": " + (e.function.empty() ? "an MPI call" : e.function) +
                (e.comm_id != 0 ? " on comm " + std::to_string(e.comm_id) : "") +
                (e.peer >= 0 ? " with " + job.rank_name(e.peer) : "") + " failed (" +
                (e.error_class.empty() ? "" : e.error_class + ": ") + innermost_error(e.text) +
                "): fatal, MPI aborted the rank";
    f.evidence.rule = MpiErrorEvidence{.rank = number,
                                       .function = e.function,
                                       .comm_id = e.comm_id,
                                       .peer = e.peer,
                                       .error_class = e.error_class,
                                       .text = e.text};
    out.push_back(f);
  }
}

// The longest each communicator's members waited in one of its collectives and still got
// through it, from the heartbeats written in them: how long this program's own instances take.
// A program whose rank 0 writes a 4 s checkpoint while the others wait in the next all-reduce
// is not hung the fifth time it does so (seen: a clean loop named `hang` of rank 0, computing,
// by the analysis that fell 3.4 s into one). Read only when an instance is stuck (one scan of
// the heartbeats in calls for longer than half of hang_ns: shorter waits change nothing).
class SurvivedWaits {
 public:
  SurvivedWaits(const Job& job, std::uint64_t hang_ns) : job_(job), hang_ns_(hang_ns) {}
  std::uint64_t of(std::int64_t comm_id) {
    if (!read_) read();
    auto w = longest_.find(comm_id);
    return w == longest_.end() ? 0 : w->second;
  }

 private:
  void read() {
    read_ = true;
    std::string error;  // an unreadable file teaches nothing: the instance is judged by hang_ns
    each_long_in_call_heartbeat(
        job_, static_cast<std::int64_t>(hang_ns_ / 2),
        [&](const InCallHeartbeatRow& h) {
          auto r = job_.ranks.find(h.rank);
          if (r == job_.ranks.end() || h.since_ns < 0 || h.wall_ns < h.since_ns ||
              static_cast<std::uint64_t>(h.wall_ns) > job_.now_wall ||
              static_cast<std::uint64_t>(h.since_ns) < r->second.start_ns)
            return;
          // Got through it: the rank went on past that instance on the communicator. Not its
          // first, which waits for the members' start-up (ranks launched seconds apart), not for
          // anything the program's steps do.
          if (h.seq <= 1) return;
          auto p = r->second.progress.find(h.comm_id);
          if (p == r->second.progress.end() ||
              p->second.completed < static_cast<std::uint64_t>(h.seq))
            return;
          std::uint64_t& longest = longest_[h.comm_id];
          longest = std::max(longest, static_cast<std::uint64_t>(h.wall_ns - h.since_ns));
        },
        error);
  }
  const Job& job_;
  std::uint64_t hang_ns_;
  bool read_ = false;
  std::map<std::int64_t, std::uint64_t> longest_;
};

// Ranks stuck in the same collective instance (communicator, sequence number) for hang_ns.
using StuckInstances = std::map<std::pair<std::int64_t, std::uint64_t>, std::vector<int>>;

StuckInstances stuck_instances(const Job& job, const Liveness& live, std::uint64_t hang_ns) {
  auto lost = [&](const Rank& r) { return live.lost(r); };
  auto seen = [&](const Rank& r) { return live.seen(r); };
  std::map<std::pair<std::int64_t, std::uint64_t>, std::vector<int>> stuck;
  for (const auto& [number, r] : job.ranks) {
    const Seen v = seen(r);
    const Heartbeat& h = v.beat;
    if (lost(r) || live.silent(v) || h.state != "in_call" || h.comm_id == 0 || h.seq == 0) continue;
    // ... unless its last window, newer than that heartbeat, has it through the call already.
    if (auto p = r.progress.find(h.comm_id);
        v.ended_by && p != r.progress.end() && p->second.completed >= h.seq)
      continue;
    if (v.now < h.since_ns + hang_ns) continue;
    stuck[{h.comm_id, h.seq}].push_back(number);
  }
  return stuck;
}

// A collective every member is in whose data still flows is slow, not hung: NPB FT's 96 MB
// all-to-alls over a host delayed 2-4 ms took 10 s each, its connections moving 3-7 MB a second
// per rank (docs/faults.md sweep 46), and were named communication hangs. Moving: the members'
// TCP connections to other hosts (tcp_links, the kernel's counts of bytes sent and acknowledged)
// sent kMovingBytesPerS at least, all together, over the kMovingSpanNs before `until`. commtap's
// own probes send nothing meanwhile (a communicator whose collectives the rounds use keeps the
// asynchronous ones off, and rounds come at collectives), and a hang moves nothing: a partition,
// a peer that stopped answering. Not a rate per member: a slow collective's tail moves over the
// few pairs that still have data to send (NPB FT's all-to-all over a host delayed 5 ms, whose
// lossy pair ctap2 <-> ctap3 was the last one sending, moved 12.0 MB in 3 s between its 4
// members, under 4 x 1 MiB a second, and was named a communication hang at 13 s;
// docs/faults.md sweep 55). A rank stopped inside the collective, whose kernel takes what fits
// in its receive buffers and then nothing, is named lost by its missing heartbeats whatever
// this says. Jobs without TCP rows (InfiniBand, shared memory, files before version 10) are
// judged as before.
constexpr double kMovingBytesPerS = 1 << 20;
constexpr std::uint64_t kMovingSpanNs = 3'000'000'000;

bool data_still_moving(const Job& job, const std::vector<int>& members, std::uint64_t until) {
  const std::set<int> member_set(members.begin(), members.end());
  const std::uint64_t from = until > kMovingSpanNs ? until - kMovingSpanNs : 0;
  // Per connection (rank, local, peer): its total at the newest row up to `from` and up to
  // `until` (a row is written only when a total changed).
  struct Totals {
    std::uint64_t before = 0, latest = 0;
    bool seen_before = false;
  };
  std::map<std::tuple<int, std::string, std::string>, Totals> connections;
  std::string error;
  const bool read = each_tcp_link(
      job,
      [&](const TcpLinkRow& row) {
        if (!member_set.count(row.rank) || row.local_address == row.peer_address) return;
        const auto wall = static_cast<std::uint64_t>(row.wall_ns);
        if (wall > until) return;
        Totals& t = connections[{row.rank, row.local_address, row.peer_address}];
        if (wall <= from) {
          t.before = std::max(t.before, row.bytes_acked);
          t.seen_before = true;
        }
        t.latest = std::max(t.latest, row.bytes_acked);
      },
      error);
  if (!read) return false;
  double moved = 0;
  for (const auto& [key, t] : connections)
    if (t.seen_before && t.latest > t.before) moved += static_cast<double>(t.latest - t.before);
  return moved >= kMovingBytesPerS * (static_cast<double>(kMovingSpanNs) / 1e9);
}

// hang (the ranks that never arrived at an instance others are stuck in) or communication_hang
// (every member stuck in it) for one stuck instance. `stuck_somewhere`: every stuck rank.
void judge_stuck_instance(const Job& job, const Liveness& live, std::uint64_t hang_ns,
                          SurvivedWaits& survived,
                          const std::pair<std::int64_t, std::uint64_t>& instance,
                          const std::vector<int>& ranks, const std::set<int>& stuck_somewhere,
                          std::vector<Finding>& out) {
  auto seen = [&](const Rank& r) { return live.seen(r); };
  const auto [comm_id, seq] = instance;
  std::vector<int> members;
  if (auto c = job.comms.find(comm_id); c != job.comms.end()) members = c->second.members;
  if (members.empty())
    for (const auto& [number, r] : job.ranks)
      if (r.progress.count(comm_id)) members.push_back(number);
  std::vector<int> culprits;
  for (int m : members) {
    if (std::find(ranks.begin(), ranks.end(), m) != ranks.end()) continue;
    auto r = job.ranks.find(m);
    std::uint64_t entered = 0;
    if (r != job.ranks.end())
      if (auto p = r->second.progress.find(comm_id); p != r->second.progress.end())
        entered = p->second.entered;
    if (entered < seq) culprits.push_back(m);
  }
  // A rank that never arrived because it is itself stuck in another collective (an earlier
  // instance that some ranks left and it did not: they went on to the next one) is waiting,
  // not the cause; the finding about the instance it is stuck in names the cause. When every
  // rank this instance waits for is such a one, this instance says nothing more.
  if (!culprits.empty()) {
    std::erase_if(culprits, [&](int m) { return stuck_somewhere.count(m) > 0; });
    if (culprits.empty()) return;
  }
  // Nor is one whose counts moved after the others began to wait here, less than hang_ns ago: it
  // completed a collective meanwhile, on this communicator or another, and is on its way (NPB
  // FT's all-to-alls over a delayed host took 10 s each: a rank still finishing the last one,
  // then computing for a moment, was named hung by a member 3.9 s into the next, and after the
  // job, killed mid-step, two ranks still in one were; docs/faults.md sweep 46). One that hangs
  // after such a move is named hang_ns after it, a heartbeat later at most than otherwise.
  if (!culprits.empty()) {
    std::uint64_t waiting_since = UINT64_MAX;
    for (int number : ranks)
      waiting_since = std::min(waiting_since, seen(job.ranks.at(number)).beat.since_ns);
    std::erase_if(culprits, [&](int m) {
      auto r = job.ranks.find(m);
      if (r == job.ranks.end() || live.lost(r->second)) return false;
      const Seen v = seen(r->second);
      if (live.silent(v)) return false;
      return std::any_of(
          r->second.progress_since.begin(), r->second.progress_since.end(),
          [&](const auto& c) { return c.second > waiting_since && v.now < c.second + hang_ns; });
    });
    if (culprits.empty()) return;
  }
  const Seen first = seen(job.ranks.at(ranks.front()));
  std::uint64_t since = first.beat.since_ns, until = 0;
  for (int number : ranks) {
    const Seen v = seen(job.ranks.at(number));
    since = std::min(since, v.beat.since_ns);
    until = std::max(until, v.now);
  }
  // Where the communicator's members have waited this long before and got through, the program
  // does so by design (a checkpoint, a long collective): culprits that still write heartbeats,
  // or an instance every member is in, are named only past twice that wait. A culprit that
  // stopped writing them (stopped, crashed) is named at hang_ns as ever.
  const bool all_running = std::none_of(culprits.begin(), culprits.end(), [&](int m) {
    auto r = job.ranks.find(m);
    return r == job.ranks.end() || live.lost(r->second) || live.missed_heartbeat(r->second);
  });
  const std::uint64_t survived_ns =
      all_running && (!culprits.empty() || ranks.size() == members.size()) ? survived.of(comm_id)
                                                                           : 0;
  if (until - since < std::max(hang_ns, 2 * survived_ns)) return;
  // Of several that never arrived, the cause and those blocked in MPI calls waiting for it.
  const std::vector<int> waiting = live.split_waiting(culprits);
  Finding f;
  f.first_seen_ns = since;
  f.last_seen_ns = until;
  f.severity = Severity::critical;
  const std::string where =
      first.beat.function + " #" + std::to_string(seq) + " on comm " + std::to_string(comm_id);
  const std::string stuck_for =
      " for " + ms_text(static_cast<double>(until - since)) +
      (first.ended_by ? " until " + *first.ended_by + " ended the job" : "") +
      (2 * survived_ns > hang_ns ? " (over twice the longest wait its members got through, " +
                                       ms_text(static_cast<double>(survived_ns)) + ")"
                                 : "");
  if (!culprits.empty()) {
    f.kind = finding_kind::hang;
    // All culprits on one host, and all of that host's ranks among them: name the host.
    f.subject = live.subject_of(culprits);
    std::string doing;
    for (int c : culprits) doing += (doing.empty() ? "" : "; ") + live.doing(c, comm_id);
    f.summary = std::to_string(ranks.size()) + " of " + std::to_string(members.size()) +
                " ranks stuck in " + where + stuck_for + "; never arrived: " + doing;
    if (!waiting.empty())
      f.summary +=
          "; also not there, blocked in MPI calls (waiting for it): " + names_of(job, waiting);
    f.evidence.rule = HangEvidence{.comm_id = comm_id,
                                   .seq = seq,
                                   .function = first.beat.function,
                                   .stuck_ranks = ranks,
                                   .culprits = culprits,
                                   .waiting_in_calls = waiting,
                                   .members = members.size(),
                                   .stuck_ns = until - since,
                                   .survived_wait_ns = survived_ns};
  } else if (ranks.size() == members.size()) {
    if (data_still_moving(job, ranks, until)) return;
    f.kind = finding_kind::communication_hang;
    f.subject = "comm " + std::to_string(comm_id);
    f.summary = "all " + std::to_string(ranks.size()) + " ranks of comm " +
                std::to_string(comm_id) + " entered " + where + " and none left" + stuck_for +
                " (a communication hang: see the link findings for the likely link)";
    f.evidence.rule = CommunicationHangEvidence{.comm_id = comm_id,
                                                .seq = seq,
                                                .stuck_ranks = ranks,
                                                .stuck_ns = until - since,
                                                .survived_wait_ns = survived_ns};
  } else {
    return;  // others passed this instance: a rooted collective's slow tail, not a hang
  }
  out.push_back(f);
}

// comm_aborted, where nothing else of this detector's explains an abort.
void detect_aborts(const Job& job, std::vector<Finding>& out) {
  // A rank that called ncclCommAbort with no hang or lost rank found: the application tore a
  // communicator down (on an error NCCL reported, its own timeout, or to shrink it around a
  // failed rank). Said when nothing else of this detector's explains it; a warning, since an
  // abort is the application's answer to a problem, not the problem.
  // An abort is the consequence of another rank's end (the peer's sockets closed, NCCL reported
  // a remote error) where another rank was ended by a signal (a job stopped by its batch
  // system's SIGTERM, whose ranks go in any order) or by MPI_Abort, or went silent without an
  // end before the aborting rank's last word (killed in that stop, or crashed: the liveness
  // rules above name a crash).
  auto ended_before = [&](int aborting) {
    const std::uint64_t heard = Liveness::heard(job.ranks.at(aborting));
    for (const auto& [number, r] : job.ranks)
      if (number != aborting && (Liveness::ended_by_signal(r) || r.ended_by == "abort" ||
                                 (r.ended_by == "running" && Liveness::heard(r) <= heard)))
        return true;
    return false;
  };
  std::vector<int> aborted;
  for (const auto& [number, r] : job.ranks)
    if (r.nccl_aborts > 0 && !ended_before(number)) aborted.push_back(number);
  if (aborted.empty()) return;
  Finding f;
  f.kind = finding_kind::comm_aborted;
  f.subject = job.rank_name(aborted.front());
  f.severity = Severity::warning;
  f.host = job.hosts[static_cast<std::size_t>(job.ranks.at(aborted.front()).host)];
  std::uint64_t calls = 0;
  for (int m : aborted) {
    const Rank& r = job.ranks.at(m);
    calls += r.nccl_aborts;
    // When it called is not recorded (call_totals are totals): by its newest heartbeat.
    const std::uint64_t heard = Liveness::heard(r);
    f.first_seen_ns = f.first_seen_ns == 0 ? heard : std::min(f.first_seen_ns, heard);
    f.last_seen_ns = std::max(f.last_seen_ns, heard);
  }
  f.summary = names_of(job, aborted) + " called ncclCommAbort (" + count_text(calls, "call") +
              "): a communicator was torn down, on an error NCCL reported, the "
              "application's own timeout, or to shrink it; no hang or lost rank was seen";
  f.evidence.rule = CommAbortedEvidence{.ranks = aborted, .calls = calls};
  out.push_back(f);
}

}  // namespace

void detect_hangs(const Job& job, const HealthOptions& options, std::vector<Finding>& out) {
  const double stale_s =
      options.stale_after_s > 0 ? options.stale_after_s : 3 * job.interval_s + 1.0;
  const auto stale_ns = static_cast<std::uint64_t>(stale_s * 1e9);
  const auto hang_ns = static_cast<std::uint64_t>(options.hang_after_s * 1e9);
  const Liveness live{job, stale_ns};
  const std::size_t found_before = out.size();
  detect_lost_ranks(job, live, out);
  const StuckInstances stuck = stuck_instances(job, live, hang_ns);
  std::set<int> stuck_somewhere;
  for (const auto& [instance, ranks] : stuck) stuck_somewhere.insert(ranks.begin(), ranks.end());
  SurvivedWaits survived(job, hang_ns);
  for (const auto& [instance, ranks] : stuck)
    judge_stuck_instance(job, live, hang_ns, survived, instance, ranks, stuck_somewhere, out);
  detect_progress_hangs(job, options, live, out);
  if (out.size() == found_before) detect_aborts(job, out);
}

}  // namespace commtap::analyzer
