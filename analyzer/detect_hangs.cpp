// Hangs and lost ranks (docs/analyzer.md).
#include "analyzer/detectors.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "analyzer/statistics.hpp"
#include "analyzer/trace_files.hpp"

namespace commtap::analyzer {

using json = nlohmann::json;

void detect_hangs(const Job& job, const HealthOptions& options, std::vector<Finding>& out) {
  const double stale_s =
      options.stale_after_s > 0 ? options.stale_after_s : 3 * job.interval_s + 1.0;
  const auto stale_ns = static_cast<std::uint64_t>(stale_s * 1e9);
  const auto hang_ns = static_cast<std::uint64_t>(options.hang_after_s * 1e9);
  // A launcher that tears a job down SIGKILLs ranks without a last window, so "never wrote how
  // it ended" alone does not mark the first to go; a heartbeat silent for a while does.
  // A rank that has not written its first heartbeat yet has been silent since its start.
  auto heard = [](const Rank& r) { return r.last.wall_ns != 0 ? r.last.wall_ns : r.start_ns; };
  auto lost = [&](const Rank& r) {
    return r.ended_by == "running" && job.now_wall > heard(r) + stale_ns;
  };
  // A rank that something other than MPI_Finalize ended (a signal: the batch system's time
  // limit, a user's scancel, a launcher tearing the job down; or exit, abort) is judged as it stood
  // at its last heartbeat before that, up to its end: a job killed while it hung did hang, and that
  // is what the analysis after the job is for.
  struct Seen {
    const Heartbeat& beat;
    std::uint64_t now;            // when it was seen so: now, or its end
    const std::string* ended_by;  // what ended it while it was so; null: it still runs
  };
  auto seen = [&](const Rank& r) {
    const bool killed = r.ended_by != "running" && r.ended_by != "finalize" &&
                        r.last.state == r.ended_by && r.last_running.wall_ns != 0;
    return killed ? Seen{r.last_running, r.last.wall_ns, &r.ended_by}
                  : Seen{r.last, job.now_wall, nullptr};
  };
  // Lost ranks: no heartbeat for a while although others go on (or ended properly).
  for (const auto& [number, r] : job.ranks) {
    if (!lost(r)) continue;
    Finding f;
    f.kind = finding_kind::rank_lost;
    f.subject = job.rank_name(number);
    f.severity = Severity::critical;
    f.first_seen_ns = heard(r);
    f.last_seen_ns = job.now_wall;
    const double silent = static_cast<double>(job.now_wall - heard(r));
    f.summary = job.rank_name(number) + ": no heartbeat for " + ms_text(silent) +
                " while other ranks go on (crashed or frozen); it was last " +
                (r.last.state == "in_call" ? "in " + r.last.function : r.last.state);
    f.evidence = {{"rank", number},
                  {"host", job.hosts[static_cast<std::size_t>(r.host)]},
                  {"last_heartbeat_ns", r.last.wall_ns},
                  {"silent_ns", job.now_wall - heard(r)},
                  {"last_state", r.last.state},
                  {"last_function", r.last.function}};
    f.host = job.hosts[static_cast<std::size_t>(r.host)];
    out.push_back(f);
  }
  // Ranks stuck in the same collective instance.
  std::map<std::pair<std::int64_t, std::uint64_t>, std::vector<int>> stuck;
  for (const auto& [number, r] : job.ranks) {
    const Seen v = seen(r);
    const Heartbeat& h = v.beat;
    // Silent long before its end (stopped, frozen): what it was doing then is long past.
    const bool silent = v.ended_by && v.now > h.wall_ns + stale_ns;
    if (lost(r) || silent || h.state != "in_call" || h.comm_id == 0 || h.seq == 0) continue;
    // ... unless its last window, newer than that heartbeat, has it through the call already.
    if (auto p = r.progress.find(h.comm_id);
        v.ended_by && p != r.progress.end() && p->second.completed >= h.seq)
      continue;
    if (v.now < h.since_ns + hang_ns) continue;
    stuck[{h.comm_id, h.seq}].push_back(number);
  }
  std::set<int> stuck_somewhere;
  for (const auto& [instance, ranks] : stuck) stuck_somewhere.insert(ranks.begin(), ranks.end());
  for (const auto& [instance, ranks] : stuck) {
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
      if (culprits.empty()) continue;
    }
    // Of several that never arrived, one that stopped writing heartbeats (it missed one at
    // least: stopped, crashed) or computes outside MPI is the cause, and one blocked inside an
    // MPI call all that time (a pipeline stage in MPI_Recv from the stopped one) waits for it.
    // Only when all are blocked inside calls (a point-to-point deadlock) are all named.
    std::vector<int> waiting;
    if (culprits.size() > 1) {
      const auto missed_ns = static_cast<std::uint64_t>((1.5 * job.interval_s + 0.5) * 1e9);
      auto cause = [&](int m) {
        auto r = job.ranks.find(m);
        if (r == job.ranks.end()) return true;  // no trace at all
        const Seen v = seen(r->second);
        const std::uint64_t heard_ns = v.ended_by ? v.beat.wall_ns : heard(r->second);
        return v.now > heard_ns + missed_ns || v.beat.state != "in_call";
      };
      if (std::any_of(culprits.begin(), culprits.end(), cause)) {
        for (int m : culprits)
          if (!cause(m)) waiting.push_back(m);
        std::erase_if(culprits, [&](int m) { return !cause(m); });
      }
    }
    const Seen first = seen(job.ranks.at(ranks.front()));
    std::uint64_t since = first.beat.since_ns, until = 0;
    for (int number : ranks) {
      const Seen v = seen(job.ranks.at(number));
      since = std::min(since, v.beat.since_ns);
      until = std::max(until, v.now);
    }
    Finding f;
    f.first_seen_ns = since;
    f.last_seen_ns = until;
    f.severity = Severity::critical;
    const std::string where =
        first.beat.function + " #" + std::to_string(seq) + " on comm " + std::to_string(comm_id);
    const std::string stuck_for =
        " for " + ms_text(static_cast<double>(until - since)) +
        (first.ended_by ? " until " + *first.ended_by + " ended the job" : "");
    json stuck_ranks = ranks;
    if (!culprits.empty()) {
      f.kind = finding_kind::hang;
      // All culprits on one host, and all of that host's ranks among them: name the host.
      std::set<int> culprit_hosts;
      for (int c : culprits)
        if (auto r = job.ranks.find(c); r != job.ranks.end()) culprit_hosts.insert(r->second.host);
      f.subject = job.rank_name(culprits.front());
      if (culprits.size() > 1 && culprit_hosts.size() == 1)
        f.subject = "host " + job.hosts[static_cast<std::size_t>(*culprit_hosts.begin())];
      std::string doing;
      for (int c : culprits) {
        auto r = job.ranks.find(c);
        if (!doing.empty()) doing += "; ";
        if (r == job.ranks.end()) {
          doing += "rank " + std::to_string(c) + " has no trace";
          continue;
        }
        const Rank& cr = r->second;
        std::uint64_t entered = 0;
        if (auto p = cr.progress.find(comm_id); p != cr.progress.end()) entered = p->second.entered;
        doing += job.rank_name(c) + " last entered #" + std::to_string(entered) + ", ";
        const Seen v = seen(cr);
        const std::string state =
            v.beat.state == "in_call" ? "in " + v.beat.function : v.beat.state;
        if (lost(cr))
          doing +=
              "no heartbeat for " + ms_text(static_cast<double>(job.now_wall - cr.last.wall_ns));
        else if (v.ended_by && v.now > v.beat.wall_ns + stale_ns)
          doing += "no heartbeat for " + ms_text(static_cast<double>(v.now - v.beat.wall_ns)) +
                   " before " + *v.ended_by + " ended it (stopped or frozen); it was last " + state;
        else if (v.beat.state == "in_call")
          doing += state + " for " + ms_text(static_cast<double>(v.now - v.beat.since_ns));
        else
          doing += state;
      }
      f.summary = std::to_string(ranks.size()) + " of " + std::to_string(members.size()) +
                  " ranks stuck in " + where + stuck_for + "; never arrived: " + doing;
      if (!waiting.empty()) {
        std::string names;
        for (int w : waiting) names += (names.empty() ? "" : ", ") + job.rank_name(w);
        f.summary += "; also not there, blocked in MPI calls (waiting for it): " + names;
      }
      f.evidence = {{"comm_id", comm_id},
                    {"seq", seq},
                    {"function", first.beat.function},
                    {"stuck_ranks", stuck_ranks},
                    {"culprits", culprits},
                    {"waiting_in_calls", waiting},
                    {"members", members.size()},
                    {"stuck_ns", until - since}};
    } else if (ranks.size() == members.size()) {
      f.kind = finding_kind::communication_hang;
      f.subject = "comm " + std::to_string(comm_id);
      f.summary = "all " + std::to_string(ranks.size()) + " ranks of comm " +
                  std::to_string(comm_id) + " entered " + where + " and none left" + stuck_for +
                  " (a communication hang: see the link findings for the likely link)";
      f.evidence = {{"comm_id", comm_id},
                    {"seq", seq},
                    {"stuck_ranks", stuck_ranks},
                    {"stuck_ns", until - since}};
    } else {
      continue;  // others passed this instance: a rooted collective's slow tail, not a hang
    }
    out.push_back(f);
  }
}

}  // namespace commtap::analyzer
