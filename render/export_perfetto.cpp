#include "render/export_perfetto.hpp"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "analyzer/model/job_model.hpp"
#include "analyzer/store/evidence_json.hpp"
#include "analyzer/trace/symbols.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/trace_rows.hpp"

namespace commtap::render {

using namespace commtap::analyzer;

namespace {

using json = nlohmann::json;

// A rank's operations that overlap in time (nonblocking ones in flight together, a commtap
// all-reduce's steps inside its MPI_Allreduce) go on extra tracks below the rank's: trace viewers
// need the slices of one track to nest, and MPI operations do not. Past this many tracks per
// rank the rest are left out (and counted).
constexpr int kMaxLanes = 32;
// Slices on one track are kept 2 ns apart: viewers turn microsecond decimals back into integer
// nanoseconds with a rounding of their own.
constexpr std::int64_t kLaneGapNs = 2;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Deterministic in the key, so every rank keeps the same instances and both sides of a message.
bool sampled(std::uint64_t one_in, std::initializer_list<std::uint64_t> key) {
  if (one_in <= 1) return true;
  std::uint64_t h = 0;
  for (std::uint64_t v : key) h = mix(h ^ v);
  return h % one_in == 0;
}

enum class Kind : std::uint8_t { collective, send, recv };

struct Slice {
  std::int64_t start = 0, end = 0;  // rank 0's clock, ns
  std::int64_t comm_id = 0;
  std::uint64_t number = 0;  // collective: seq; message: msg
  std::uint64_t bytes = 0;
  std::int64_t tag = 0;
  std::int32_t function = 0;   // into Strings
  std::int32_t algorithm = 0;  // into Strings; collectives only
  std::int32_t site = -1;
  std::int32_t peer_or_root = -1;  // message: the other side; collective: the root (-1: none)
  std::uint32_t flow = 0;          // 0: none
  int lane = -1;                   // -1: left out (too many overlapping)
  Kind kind = Kind::collective;
  bool unfinished = false;
};

class Strings {
 public:
  std::int32_t id(std::string_view text) {
    auto found = ids_.find(std::string(text));
    if (found != ids_.end()) return found->second;
    const auto next = static_cast<std::int32_t>(texts_.size());
    texts_.emplace_back(text);
    ids_.emplace(texts_.back(), next);
    return next;
  }
  const std::string& text(std::int32_t id) const { return texts_[static_cast<std::size_t>(id)]; }

 private:
  std::unordered_map<std::string, std::int32_t> ids_;
  std::vector<std::string> texts_;
};

struct Instant {
  int rank = 0;
  std::int64_t at = 0;
  json args;
  std::string name;
};

// "12.345" microseconds from nanoseconds, exactly (no binary fraction in between).
std::string microseconds(std::int64_t ns) {
  char text[40];
  const std::uint64_t magnitude =
      ns < 0 ? static_cast<std::uint64_t>(-(ns + 1)) + 1 : static_cast<std::uint64_t>(ns);
  std::snprintf(text, sizeof text, "%s%" PRIu64 ".%03" PRIu64, ns < 0 ? "-" : "", magnitude / 1000,
                magnitude % 1000);
  return text;
}

class Writer {
 public:
  explicit Writer(std::FILE* out) : out_(out) { std::fputs("{\"traceEvents\":[\n", out_); }
  // `event` without its timestamps, which are added as exact decimals.
  void add(const json& event, std::int64_t ts_ns = INT64_MIN, std::int64_t dur_ns = -1) {
    // Replace, not throw on, bytes that are not UTF-8 (a host or file name can hold any).
    std::string text = event.dump(-1, ' ', false, json::error_handler_t::replace);
    text.pop_back();  // the closing brace
    if (ts_ns != INT64_MIN) text += ",\"ts\":" + microseconds(ts_ns);
    if (dur_ns >= 0) text += ",\"dur\":" + microseconds(dur_ns);
    text += '}';
    if (count_++ > 0) std::fputs(",\n", out_);
    std::fwrite(text.data(), 1, text.size(), out_);
  }
  void finish(const json& other_data) {
    const std::string tail = "\n],\"displayTimeUnit\":\"ns\",\"otherData\":" +
                             other_data.dump(-1, ' ', false, json::error_handler_t::replace) +
                             "}\n";
    std::fwrite(tail.data(), 1, tail.size(), out_);
  }

 private:
  std::FILE* out_;
  std::uint64_t count_ = 0;
};

bool is_alltoall_block(const std::string& function) {
  // MPI_Alltoall, MPI_Ialltoall, MPI_Alltoall_init (and _c): `bytes` is one peer's block.
  const auto at = function.find("lltoall");
  return at != std::string::npos && function.find("lltoallv") == std::string::npos &&
         function.find("lltoallw") == std::string::npos;
}

}  // namespace

bool export_perfetto(const std::string& job_path, const PerfettoOptions& options, std::FILE* out,
                     PerfettoStats& stats, std::string& error) {
  stats = PerfettoStats{};
  Job job;
  job.path = job_path;
  if (!job_files(job_path, true, job.files, error) || !load_facts(job, HealthOptions{}, error))
    return false;

  // The timeline: rank 0's monotonic clock, 0 at the earliest rank's start.
  auto monotonic_of_wall = [](const Rank& r, std::int64_t wall) {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, wall - r.wall_minus_monotonic));
  };
  std::int64_t origin = INT64_MAX, end = INT64_MIN;
  for (const auto& [number, r] : job.ranks) {
    origin =
        std::min(origin, r.aligned(monotonic_of_wall(r, static_cast<std::int64_t>(r.start_ns))));
    if (r.last.wall_ns > 0)
      end =
          std::max(end, r.aligned(monotonic_of_wall(r, static_cast<std::int64_t>(r.last.wall_ns))));
  }
  if (end < origin) end = origin;
  const std::int64_t low = options.last_s > 0
                               ? end - static_cast<std::int64_t>(options.last_s * 1e9)
                               : origin + static_cast<std::int64_t>(options.since_s * 1e9);
  const std::int64_t high =
      options.until_s > 0 ? origin + static_cast<std::int64_t>(options.until_s * 1e9) : INT64_MAX;
  auto in_cut = [&](std::int64_t a, std::int64_t b) { return b >= low && a <= high; };
  auto rank_of = [&](int rank) -> const Rank* {
    auto found = job.ranks.find(rank);
    return found == job.ranks.end() ? nullptr : &found->second;
  };
  auto last_seen = [&](const Rank& r) {
    return r.aligned(monotonic_of_wall(r, static_cast<std::int64_t>(r.last.wall_ns)));
  };

  // Pass 1: how much falls in the cut, for the sampling stride.
  std::uint64_t collectives = 0, transfers = 0, heartbeats = 0;
  bool ok = each_collective_instance(
                job,
                [&](const CollectiveRow& row) {
                  const Rank* r = rank_of(row.rank);
                  if (r == nullptr) return;
                  const std::int64_t start = r->aligned(static_cast<std::uint64_t>(row.enter_ns));
                  const std::int64_t stop =
                      !row.finished ? std::max(start, last_seen(*r))
                                    : r->aligned(static_cast<std::uint64_t>(row.exit_ns));
                  collectives += in_cut(start, stop);
                },
                error) &&
            each_transfer(
                job,
                [&](const TransferRow& row) {
                  const Rank* r = rank_of(row.rank);
                  if (r == nullptr) return;
                  transfers += in_cut(r->aligned(row.start_ns), r->aligned(row.end_ns));
                },
                error) &&
            each_in_call_heartbeat(
                job,
                [&](const InCallHeartbeatRow& row) {
                  const Rank* r = rank_of(row.rank);
                  if (r == nullptr) return;
                  const std::int64_t at = r->aligned(monotonic_of_wall(*r, row.wall_ns));
                  heartbeats += in_cut(at, at);
                },
                error);
  if (!ok) return false;
  // Each message is two slices and two flow ends.
  const std::uint64_t wanted = collectives + 2 * transfers + heartbeats;
  const std::uint64_t budget = std::max<std::uint64_t>(options.max_events, 1);
  stats.keep_one_in = std::max<std::uint64_t>(1, (wanted + budget - 1) / budget);
  const std::uint64_t k = stats.keep_one_in;

  // Pass 2: the kept rows.
  Strings strings;
  std::map<std::pair<int, int>, std::string> callers;  // (rank, site) -> "symbol (file:line)"
  std::map<int, std::vector<Slice>> slices;            // per rank
  std::vector<Instant> instants;
  using MessageKey = std::tuple<std::int64_t, int, int, std::int64_t, std::uint64_t>;
  std::map<MessageKey, std::pair<std::size_t, std::size_t>> messages;  // -> (send, recv) + 1
  ok = each_call_site(
           job,
           [&](const CallSiteRow& row) {
             std::string text = demangle(row.symbol);
             if (row.file) text += " (" + *row.file + ":" + std::to_string(row.line) + ")";
             callers[{row.rank, row.site}] = std::move(text);
           },
           error) &&
       each_collective_instance(
           job,
           [&](const CollectiveRow& row) {
             const Rank* r = rank_of(row.rank);
             if (r == nullptr) return;
             Slice c;
             c.comm_id = row.comm_id;
             c.number = row.seq;
             c.start = r->aligned(static_cast<std::uint64_t>(row.enter_ns));
             c.unfinished = !row.finished;
             c.end = c.unfinished ? std::max(c.start, last_seen(*r))
                                  : r->aligned(static_cast<std::uint64_t>(row.exit_ns));
             if (!in_cut(c.start, c.end) ||
                 !sampled(k, {static_cast<std::uint64_t>(c.comm_id), c.number}))
               return;
             c.function = strings.id(row.function);
             c.bytes = static_cast<std::uint64_t>(row.bytes);
             c.peer_or_root = static_cast<std::int32_t>(row.root);
             c.site = static_cast<std::int32_t>(row.site);
             c.algorithm = strings.id(row.algorithm);
             c.end = std::max(c.end, c.start);
             slices[r->rank].push_back(c);
           },
           error) &&
       each_transfer(
           job,
           [&](const TransferRow& row) {
             const Rank* r = rank_of(row.rank);
             if (r == nullptr) return;
             Slice m;
             m.kind = row.send ? Kind::send : Kind::recv;
             m.peer_or_root = static_cast<std::int32_t>(row.peer);
             m.comm_id = row.comm_id;
             m.tag = row.tag;
             m.number = static_cast<std::uint64_t>(row.msg);
             m.start = r->aligned(row.start_ns);
             m.end = std::max(m.start, r->aligned(row.end_ns));
             const int sender = m.kind == Kind::send ? r->rank : m.peer_or_root;
             const int receiver = m.kind == Kind::send ? m.peer_or_root : r->rank;
             if (!in_cut(m.start, m.end) ||
                 !sampled(
                     k, {static_cast<std::uint64_t>(m.comm_id), static_cast<std::uint64_t>(sender),
                         static_cast<std::uint64_t>(receiver), static_cast<std::uint64_t>(m.tag),
                         m.number}))
               return;
             m.function = strings.id(row.function);
             m.bytes = static_cast<std::uint64_t>(row.bytes);
             m.site = static_cast<std::int32_t>(row.site);
             auto& list = slices[r->rank];
             list.push_back(m);
             auto& sides = messages[{m.comm_id, sender, receiver, m.tag, m.number}];
             (m.kind == Kind::send ? sides.first : sides.second) = list.size();
           },
           error) &&
       each_in_call_heartbeat(
           job,
           [&](const InCallHeartbeatRow& row) {
             const Rank* r = rank_of(row.rank);
             if (r == nullptr) return;
             const std::int64_t wall = row.wall_ns;
             const std::int64_t at = r->aligned(monotonic_of_wall(*r, wall));
             if (!in_cut(at, at) || !sampled(k, {static_cast<std::uint64_t>(r->rank),
                                                 static_cast<std::uint64_t>(wall)}))
               return;
             const double in_call_s = static_cast<double>(wall - row.since_ns) / 1e9;
             Instant i;
             i.rank = r->rank;
             i.at = at;
             i.name = "in " + row.function;
             i.args = {{"function", row.function},
                       {"in_call_s", std::round(in_call_s * 1e3) / 1e3},
                       {"threads_in_calls", row.threads_in_calls}};
             if (row.comm_id != 0) {
               i.args["comm_id"] = row.comm_id;
               if (row.seq != 0) i.args["seq"] = row.seq;
             }
             instants.push_back(std::move(i));
           },
           error);
  if (!ok) return false;

  // Tracks: first fit by start time, which uses the fewest tracks for intervals.
  std::map<int, int> lanes_of_rank;
  std::uint64_t left_out = 0;
  for (auto& [rank, list] : slices) {
    std::vector<std::size_t> order(list.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return std::tie(list[a].start, list[b].end) < std::tie(list[b].start, list[a].end);
    });
    std::vector<std::int64_t> lane_end;
    for (std::size_t i : order) {
      Slice& slice = list[i];
      std::size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] + kLaneGapNs > slice.start) ++lane;
      if (lane == lane_end.size()) {
        if (lane_end.size() == kMaxLanes) {
          ++left_out;
          continue;
        }
        lane_end.push_back(0);
      }
      lane_end[lane] = slice.end;
      slice.lane = static_cast<int>(lane);
    }
    lanes_of_rank[rank] = static_cast<int>(lane_end.size());
  }

  // Flows: messages whose two sides are both drawn.
  std::uint32_t next_flow = 0;
  for (const auto& [key, sides] : messages) {
    if (sides.first == 0 || sides.second == 0) continue;
    Slice& send = slices[std::get<1>(key)][sides.first - 1];
    Slice& recv = slices[std::get<2>(key)][sides.second - 1];
    if (send.lane < 0 || recv.lane < 0) continue;
    send.flow = recv.flow = ++next_flow;
  }

  // Perfetto and chrome://tracing group tracks by pid and name them by metadata events.
  auto pid_of = [&](int rank) { return job.ranks.at(rank).host + 1; };
  auto tid_of = [](int rank, int lane) { return (lane << 24) + rank + 1; };
  Writer writer(out);
  for (std::size_t h = 0; h < job.hosts.size(); ++h) {
    const int pid = static_cast<int>(h) + 1;
    writer.add({{"ph", "M"},
                {"name", "process_name"},
                {"pid", pid},
                {"tid", 0},
                {"args", {{"name", "host " + job.hosts[h]}}}});
    writer.add({{"ph", "M"},
                {"name", "process_sort_index"},
                {"pid", pid},
                {"tid", 0},
                {"args", {{"sort_index", h}}}});
  }
  for (const auto& [rank, r] : job.ranks) {
    const int lanes = std::max(1, lanes_of_rank.count(rank) ? lanes_of_rank[rank] : 1);
    for (int lane = 0; lane < lanes; ++lane) {
      const std::string name =
          "rank " + std::to_string(rank) + (lane ? " +" + std::to_string(lane) : "");
      writer.add({{"ph", "M"},
                  {"name", "thread_name"},
                  {"pid", pid_of(rank)},
                  {"tid", tid_of(rank, lane)},
                  {"args", {{"name", name}}}});
      writer.add({{"ph", "M"},
                  {"name", "thread_sort_index"},
                  {"pid", pid_of(rank)},
                  {"tid", tid_of(rank, lane)},
                  {"args", {{"sort_index", rank * kMaxLanes + lane}}}});
      ++stats.tracks;
    }
  }
  for (const auto& [rank, list] : slices)
    for (const Slice& slice : list) {
      if (slice.lane < 0) continue;
      const int pid = pid_of(rank), tid = tid_of(rank, slice.lane);
      const std::string& function = strings.text(slice.function);
      json args = {{"comm_id", slice.comm_id}, {"bytes", slice.bytes}};
      if (auto caller = callers.find({rank, slice.site}); caller != callers.end())
        args["caller"] = caller->second;
      const char* category = "collective";
      if (slice.kind == Kind::collective) {
        args["seq"] = slice.number;
        if (slice.peer_or_root >= 0) args["root"] = slice.peer_or_root;
        args["algorithm"] = strings.text(slice.algorithm);
        if (slice.unfinished) args["unfinished"] = true;
        if (is_alltoall_block(function)) {
          // What an all-to-all moved: `bytes` is each peer's block (docs/schema.md).
          args["bytes_per_peer"] = slice.bytes;
          if (auto comm = job.comms.find(slice.comm_id); comm != job.comms.end())
            args["bytes_total"] = slice.bytes * static_cast<std::uint64_t>(comm->second.size);
        }
      } else {
        category = "p2p";
        args["direction"] = slice.kind == Kind::send ? "send" : "recv";
        args["peer"] = slice.peer_or_root;
        args["tag"] = slice.tag;
        args["msg"] = slice.number;
      }
      writer.add({{"ph", "X"},
                  {"name", function},
                  {"cat", category},
                  {"pid", pid},
                  {"tid", tid},
                  {"args", std::move(args)}},
                 slice.start - origin, slice.end - slice.start);
      ++stats.slices;
      if (slice.flow != 0) {
        // Bound to the slice that encloses the middle: each track's slices never overlap.
        const bool send = slice.kind == Kind::send;
        json flow = {{"ph", send ? "s" : "f"}, {"name", "message"}, {"cat", "message"},
                     {"id", slice.flow},       {"pid", pid},        {"tid", tid}};
        if (!send) flow["bp"] = "e";
        writer.add(flow, slice.start + (slice.end - slice.start) / 2 - origin);
        stats.flows += send ? 1 : 0;
      }
    }
  for (const Instant& i : instants) {
    writer.add({{"ph", "i"},
                {"s", "t"},
                {"name", i.name},
                {"cat", "heartbeat"},
                {"pid", pid_of(i.rank)},
                {"tid", tid_of(i.rank, 0)},
                {"args", i.args}},
               i.at - origin);
    ++stats.instants;
  }
  if (options.findings) {
    JobHealth health;
    if (!analyze_job(job_path, options.health, health, error)) return false;
    for (const Finding& f : health.findings) {
      const std::int64_t first =
          static_cast<std::int64_t>(f.first_seen_ns) - job.wall_minus_aligned;
      const std::int64_t last = static_cast<std::int64_t>(f.last_seen_ns) - job.wall_minus_aligned;
      if (!in_cut(first, last)) continue;
      std::string severity = severity_name(f.severity);
      for (char& c : severity) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      // A global instant: a line across every track where the evidence begins.
      writer.add({{"ph", "i"},
                  {"s", "g"},
                  {"name", severity + " " + f.kind + ": " + f.subject},
                  {"cat", "finding"},
                  {"pid", 1},
                  {"tid", 1},
                  {"args",
                   {{"summary", f.summary},
                    {"severity", severity_name(f.severity)},
                    {"evidence", analyzer::evidence_json(f.evidence)},
                    {"last_seen_s", static_cast<double>(last - origin) / 1e9}}}},
                 std::min(std::max(first, std::max(low, origin)), high) - origin);
      ++stats.instants;
    }
  }
  writer.finish({{"commtap", "perfetto export"},
                 {"job_id", job.job_id},
                 {"clock", "rank 0's monotonic clock, each rank's offsets applied (interpolated)"},
                 {"origin_wall_ns", origin + job.wall_minus_aligned},
                 {"keep_one_in", k},
                 {"left_out_overlapping", left_out},
                 {"since_s", static_cast<double>(std::max(low, origin) - origin) / 1e9},
                 {"until_s", static_cast<double>(std::min(high, end) - origin) / 1e9}});
  if (std::ferror(out) != 0) {
    error = "cannot write the trace";
    return false;
  }
  return true;
}

}  // namespace commtap::render
