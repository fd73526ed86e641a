// What a commtap Perfetto export must satisfy, for the unit test (synthetic jobs) and for
// tests/mpi/export.sh (real jobs, through perfetto_check): the processes and tracks, slices that
// never overlap on a track (viewers drop misnested slices), every flow bound to a send slice at
// one end and its receive at the other, and the clocks aligned: nobody leaves an MPI_Allreduce
// or MPI_Barrier before the last rank entered it, on rank 0's clock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace commtap::test {

struct PerfettoExpectations {
  int hosts = 1;
  int ranks = 1;
  bool flows = true;         // the job sent messages: some flow must be there
  double since_us = -1e300;  // every slice overlaps [since_us, until_us]
  double until_us = 1e300;
  std::uint64_t max_events = 0;  // 0: no bound to check
  double alignment_tolerance_us = 1000;
};

struct PerfettoCheck {
  std::string problem;  // empty: fine
  std::uint64_t slices = 0, flows = 0, instants = 0, aligned_instances = 0;
  double first_us = 0, last_us = 0;  // the earliest slice's start, the latest one's end
  double worst_misalignment_us = 0;  // last entry - first exit, over instances: < 0 is right
};

inline PerfettoCheck check_perfetto(const nlohmann::json& trace, const PerfettoExpectations& e) {
  PerfettoCheck c;
  auto fail = [&](const std::string& why) {
    if (c.problem.empty()) c.problem = why;
    return c;
  };
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    return fail("no traceEvents array");
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, int> rank_of_track;
  std::set<int> ranks_named;
  struct Slice {
    double ts, dur;
    const nlohmann::json* event;
  };
  std::map<std::pair<int, int>, std::vector<Slice>> tracks;
  std::vector<const nlohmann::json*> flow_events;
  for (const auto& event : trace["traceEvents"]) {
    const std::string ph = event.value("ph", "");
    if (ph.empty() || !event.contains("pid"))
      return fail("event without ph or pid: " + event.dump());
    const int pid = event["pid"].get<int>();
    const int tid = event.value("tid", 0);
    if (ph == "M") {
      const std::string name = event.value("name", "");
      if (name == "process_name") processes[pid] = event["args"].value("name", "");
      if (name == "thread_name") {
        const std::string thread = event["args"].value("name", "");
        if (thread.rfind("rank ", 0) != 0) return fail("thread not named after a rank: " + thread);
        const int rank = std::stoi(thread.substr(5));
        rank_of_track[{pid, tid}] = rank;
        if (thread.find('+') == std::string::npos) ranks_named.insert(rank);
      }
      continue;
    }
    if (!event.contains("ts") || !event["ts"].is_number()) return fail("no ts: " + event.dump());
    if (ph == "X") {
      const double dur = event.value("dur", -1.0);
      if (dur < 0) return fail("slice without dur: " + event.dump());
      tracks[{pid, tid}].push_back({event["ts"].get<double>(), dur, &event});
      ++c.slices;
    } else if (ph == "s" || ph == "f") {
      flow_events.push_back(&event);
    } else if (ph == "i") {
      ++c.instants;
    } else {
      return fail("unexpected phase " + ph);
    }
  }
  if (static_cast<int>(processes.size()) != e.hosts)
    return fail(std::to_string(processes.size()) + " processes for " + std::to_string(e.hosts) +
                " hosts");
  if (static_cast<int>(ranks_named.size()) != e.ranks ||
      (!ranks_named.empty() && *ranks_named.rbegin() != e.ranks - 1))
    return fail(std::to_string(ranks_named.size()) + " rank tracks for " + std::to_string(e.ranks) +
                " ranks");
  for (const auto& [track, rank] : rank_of_track)
    if (!processes.count(track.first)) return fail("a rank track outside any host's process");
  c.first_us = std::numeric_limits<double>::infinity();
  c.last_us = -c.first_us;
  for (auto& [track, slices] : tracks) {
    if (!rank_of_track.count(track)) return fail("slices on a track without a rank's name");
    for (const Slice& s : slices) {
      c.first_us = std::min(c.first_us, s.ts);
      c.last_us = std::max(c.last_us, s.ts + s.dur);
    }
    std::sort(slices.begin(), slices.end(),
              [](const Slice& a, const Slice& b) { return a.ts < b.ts; });
    for (std::size_t i = 0; i < slices.size(); ++i) {
      const Slice& s = slices[i];
      if (s.ts + s.dur < e.since_us || s.ts > e.until_us)
        return fail("a slice outside the cut: " + s.event->dump());
      if (i > 0 && slices[i - 1].ts + slices[i - 1].dur > s.ts)
        return fail("overlapping slices on one track: " + slices[i - 1].event->dump() + " and " +
                    s.event->dump());
    }
  }
  // Flows: each id once as "s" inside a send slice, once as "f" inside its receive.
  auto enclosing = [&](const nlohmann::json& f) -> const nlohmann::json* {
    auto found = tracks.find({f["pid"].get<int>(), f.value("tid", 0)});
    if (found == tracks.end()) return nullptr;
    const double ts = f["ts"].get<double>();
    for (const Slice& s : found->second)
      if (s.ts <= ts && ts <= s.ts + s.dur) return s.event;
    return nullptr;
  };
  std::map<std::uint64_t, std::pair<const nlohmann::json*, const nlohmann::json*>> flows;
  for (const nlohmann::json* f : flow_events) {
    auto& ends = flows[(*f)["id"].get<std::uint64_t>()];
    const bool start = (*f)["ph"] == "s";
    if ((start ? ends.first : ends.second) != nullptr) return fail("a flow id used twice");
    (start ? ends.first : ends.second) = f;
  }
  for (const auto& [id, ends] : flows) {
    if (ends.first == nullptr || ends.second == nullptr) return fail("a flow with one end");
    const nlohmann::json* send = enclosing(*ends.first);
    const nlohmann::json* recv = enclosing(*ends.second);
    if (send == nullptr || recv == nullptr) return fail("a flow end outside any slice");
    if ((*send)["args"].value("direction", "") != "send" ||
        (*recv)["args"].value("direction", "") != "recv")
      return fail("a flow not from a send to a receive: " + send->dump() + " -> " + recv->dump());
    const int sender = rank_of_track[{(*send)["pid"].get<int>(), (*send)["tid"].get<int>()}];
    const int receiver = rank_of_track[{(*recv)["pid"].get<int>(), (*recv)["tid"].get<int>()}];
    if ((*send)["args"]["peer"] != receiver || (*recv)["args"]["peer"] != sender ||
        (*send)["args"]["msg"] != (*recv)["args"]["msg"] ||
        (*send)["args"]["tag"] != (*recv)["args"]["tag"])
      return fail("a flow between sides of different messages");
    ++c.flows;
  }
  if (e.flows && c.flows == 0) return fail("no message flows");
  // Clock alignment on synchronizing collectives recorded by every rank.
  std::map<std::tuple<std::int64_t, std::uint64_t>, std::vector<Slice>> instances;
  for (const auto& [track, slices] : tracks)
    for (const Slice& s : slices) {
      const std::string name = (*s.event)["name"];
      if ((*s.event)["cat"] != "collective" || (name != "MPI_Allreduce" && name != "MPI_Barrier"))
        continue;
      const auto& args = (*s.event)["args"];
      instances[{args["comm_id"].get<std::int64_t>(), args["seq"].get<std::uint64_t>()}].push_back(
          s);
    }
  c.worst_misalignment_us = -std::numeric_limits<double>::infinity();
  for (const auto& [key, members] : instances) {
    if (static_cast<int>(members.size()) != e.ranks) continue;
    double last_enter = -1e300, first_exit = 1e300;
    for (const Slice& s : members) {
      last_enter = std::max(last_enter, s.ts);
      first_exit = std::min(first_exit, s.ts + s.dur);
    }
    c.worst_misalignment_us = std::max(c.worst_misalignment_us, last_enter - first_exit);
    ++c.aligned_instances;
  }
  if (c.aligned_instances == 0) c.worst_misalignment_us = 0;
  if (c.worst_misalignment_us > e.alignment_tolerance_us)
    return fail("a rank left a collective " + std::to_string(c.worst_misalignment_us) +
                " us before the last rank entered it: clocks not aligned");
  if (e.max_events > 0 && c.slices + 2 * c.flows + c.instants > e.max_events * 3 / 2)
    return fail(std::to_string(c.slices + 2 * c.flows + c.instants) + " events for a bound of " +
                std::to_string(e.max_events));
  return c;
}

}  // namespace commtap::test
