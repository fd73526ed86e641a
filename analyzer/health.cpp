#include "analyzer/health.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <unordered_map>

#include "monitor/monitor.hpp"

namespace commtap::analyzer {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::info:
      return "info";
    case Severity::warning:
      return "warning";
    case Severity::error:
      return "error";
    case Severity::critical:
      return "critical";
  }
  return "?";
}

bool parse_severity(const std::string& text, Severity& severity) {
  for (Severity s : {Severity::info, Severity::warning, Severity::error, Severity::critical})
    if (text == severity_name(s)) {
      severity = s;
      return true;
    }
  return false;
}

namespace {

// ---- Reading ------------------------------------------------------------------------------------

// One database file, opened read-only (a live job's writers are never blocked).
class Reader {
 public:
  static std::unique_ptr<Reader> open(const std::string& path, std::string& error) {
    auto reader = std::unique_ptr<Reader>(new Reader());
    reader->path_ = path;
    const std::string uri = "file:" + path + "?mode=ro";
    if (sqlite3_open_v2(uri.c_str(), &reader->db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                        nullptr) != SQLITE_OK) {
      error = path + ": " + (reader->db_ ? sqlite3_errmsg(reader->db_) : "cannot open");
      return nullptr;
    }
    sqlite3_busy_timeout(reader->db_, 2000);
    int version = -1;
    if (!reader->each(
            "PRAGMA user_version", {}, [&](sqlite3_stmt* s) { version = sqlite3_column_int(s, 0); },
            error))
      return nullptr;
    if (version != monitor::kSchemaVersion) {
      error = path + ": not a commtap trace database of schema version " +
              std::to_string(monitor::kSchemaVersion) + " (found " + std::to_string(version) + ")";
      return nullptr;
    }
    return reader;
  }
  ~Reader() { sqlite3_close(db_); }

  // Runs `sql` with integer parameters, calling `row` for each result row.
  bool each(const std::string& sql, std::initializer_list<std::int64_t> binds,
            const std::function<void(sqlite3_stmt*)>& row, std::string& error) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
      error = path_ + ": " + sqlite3_errmsg(db_);
      return false;
    }
    int index = 1;
    for (std::int64_t value : binds) sqlite3_bind_int64(stmt, index++, value);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) row(stmt);
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
      error = path_ + ": " + sqlite3_errmsg(db_);
      return false;
    }
    return true;
  }

 private:
  Reader() = default;
  sqlite3* db_ = nullptr;
  std::string path_;
};

std::int64_t column_i64(sqlite3_stmt* s, int i) {
  return sqlite3_column_int64(s, i);
}
std::string column_text(sqlite3_stmt* s, int i) {
  const unsigned char* text = sqlite3_column_text(s, i);
  return text ? reinterpret_cast<const char*>(text) : "";
}

// ---- What the analysis knows about the job ------------------------------------------------------

struct Heartbeat {
  std::uint64_t wall_ns = 0;
  std::string state, function;
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0;
  std::uint64_t since_ns = 0;
};

struct Rank {
  int rank = 0;
  int host = 0;  // index into Job::hosts
  std::string ended_by;
  std::uint64_t start_ns = 0;
  std::int64_t init_offset_ns = 0;
  std::vector<monitor::ClockEstimate> clocks;  // sorted by at_ns
  std::int64_t wall_minus_monotonic = 0;       // of this rank's clock
  Heartbeat last;                              // newest heartbeat
  std::map<std::int64_t, monitor::CommProgress> progress;
  bool seen = false;

  // This rank's monotonic time on rank 0's clock: the offset interpolated between estimates.
  std::int64_t aligned(std::uint64_t t) const {
    if (clocks.empty()) return static_cast<std::int64_t>(t) + init_offset_ns;
    if (t <= clocks.front().at_ns || clocks.size() == 1)
      return static_cast<std::int64_t>(t) + clocks.front().offset.offset_ns;
    if (t >= clocks.back().at_ns)
      return static_cast<std::int64_t>(t) + clocks.back().offset.offset_ns;
    auto next = std::upper_bound(
        clocks.begin(), clocks.end(), t,
        [](std::uint64_t v, const monitor::ClockEstimate& e) { return v < e.at_ns; });
    auto previous = next - 1;
    const double f = static_cast<double>(t - previous->at_ns) /
                     static_cast<double>(next->at_ns - previous->at_ns);
    const double offset =
        static_cast<double>(previous->offset.offset_ns) +
        f * static_cast<double>(next->offset.offset_ns - previous->offset.offset_ns);
    return static_cast<std::int64_t>(t) + static_cast<std::int64_t>(offset);
  }
};

struct Communicator {
  int size = 0;
  std::vector<int> members;  // world ranks
};

struct Job {
  std::string path;
  std::string job_id;
  std::vector<std::string> files;  // each holds one or more ranks
  std::vector<std::string> hosts;
  std::map<int, Rank> ranks;
  std::map<std::int64_t, Communicator> comms;
  double interval_s = 1.0;
  std::uint64_t now_wall = 0;
  // rank 0's clock (aligned ns) -> wall ns
  std::int64_t wall_minus_aligned = 0;
  // --at: rows written after this wall time are ignored (INT64_MAX: none are).
  std::int64_t until_wall = INT64_MAX;
  std::int64_t until_aligned() const {
    return until_wall == INT64_MAX ? INT64_MAX : until_wall - wall_minus_aligned;
  }

  std::string rank_name(int rank) const {
    auto found = ranks.find(rank);
    const std::string host =
        found == ranks.end() ? "?" : hosts[static_cast<std::size_t>(found->second.host)];
    return "rank " + std::to_string(rank) + " (" + host + ")";
  }
};

std::vector<int> parse_members(const std::string& text) {
  std::vector<int> out;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    out.push_back(item == "?" ? -1 : std::atoi(item.c_str()));
    start = comma + 1;
  }
  return out;
}

// Which files make up the job at `path`.
bool job_files(const std::string& path, std::vector<std::string>& files, std::string& error) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (fs::exists(fs::path(path) / "job.db")) {
      files = {(fs::path(path) / "job.db").string()};
      return true;
    }
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("rank-", 0) == 0 && name.size() > 8 &&
          name.compare(name.size() - 3, 3, ".db") == 0)
        files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      error = path + ": no rank-<N>.db files and no job.db";
      return false;
    }
    return true;
  }
  if (fs::is_regular_file(path, ec)) {
    files = {path};
    return true;
  }
  error = path + ": no such file or directory";
  return false;
}

bool load_facts(Job& job, const HealthOptions& options, std::string& error) {
  if (options.at_s > 0) {
    std::int64_t start = INT64_MAX;
    for (const std::string& file : job.files) {
      auto reader = Reader::open(file, error);
      if (!reader || !reader->each(
                         "SELECT min(start_ns) FROM ranks", {},
                         [&](sqlite3_stmt* s) {
                           if (sqlite3_column_type(s, 0) != SQLITE_NULL)
                             start = std::min(start, column_i64(s, 0));
                         },
                         error))
        return false;
    }
    if (start != INT64_MAX) job.until_wall = start + static_cast<std::int64_t>(options.at_s * 1e9);
  }
  std::set<std::string> host_names;
  std::map<int, std::string> host_of_rank;
  for (const std::string& file : job.files) {
    auto reader = Reader::open(file, error);
    if (!reader) return false;
    bool ok =
        reader->each(
            "SELECT value FROM meta WHERE key = 'job_id'", {},
            [&](sqlite3_stmt* s) { job.job_id = column_text(s, 0); }, error) &&
        reader->each(
            "SELECT rank, host, CASE WHEN end_ns > ?1 THEN 'running' ELSE ended_by END, "
            "start_ns, coalesce(clock_offset_ns, 0) FROM ranks WHERE start_ns <= ?1",
            {job.until_wall},
            [&](sqlite3_stmt* s) {
              Rank& r = job.ranks[static_cast<int>(column_i64(s, 0))];
              r.rank = static_cast<int>(column_i64(s, 0));
              host_of_rank[r.rank] = column_text(s, 1);
              host_names.insert(column_text(s, 1));
              r.ended_by = column_text(s, 2);
              r.start_ns = static_cast<std::uint64_t>(column_i64(s, 3));
              r.init_offset_ns = column_i64(s, 4);
              r.seen = true;
            },
            error) &&
        reader->each(
            "SELECT rank, at_ns, offset_ns, error_ns FROM clock_offsets ORDER BY at_ns", {},
            [&](sqlite3_stmt* s) {
              monitor::ClockEstimate e;
              e.at_ns = static_cast<std::uint64_t>(column_i64(s, 1));
              e.offset.offset_ns = column_i64(s, 2);
              e.offset.error_ns = column_i64(s, 3);
              job.ranks[static_cast<int>(column_i64(s, 0))].clocks.push_back(e);
            },
            error) &&
        reader->each(
            "SELECT value FROM settings WHERE name = 'COMMTAP_INTERVAL' LIMIT 1", {},
            [&](sqlite3_stmt* s) {
              const double ms = std::atof(column_text(s, 0).c_str());
              if (ms > 0) job.interval_s = ms / 1000.0;
            },
            error) &&
        reader->each(
            "SELECT rank, wall_ns, state, coalesce(function, ''), coalesce(comm_id, 0), "
            "coalesce(seq, 0), coalesce(since_ns, 0) FROM heartbeats h WHERE wall_ns = "
            "(SELECT max(wall_ns) FROM heartbeats g WHERE g.rank = h.rank AND g.wall_ns <= ?1)",
            {job.until_wall},
            [&](sqlite3_stmt* s) {
              Heartbeat& h = job.ranks[static_cast<int>(column_i64(s, 0))].last;
              h.wall_ns = static_cast<std::uint64_t>(column_i64(s, 1));
              h.state = column_text(s, 2);
              h.function = column_text(s, 3);
              h.comm_id = column_i64(s, 4);
              h.seq = static_cast<std::uint64_t>(column_i64(s, 5));
              h.since_ns = static_cast<std::uint64_t>(column_i64(s, 6));
            },
            error) &&
        reader->each(
            "SELECT rank, comm_id, entered, completed FROM comm_progress p WHERE wall_ns = "
            "(SELECT max(wall_ns) FROM comm_progress q WHERE q.rank = p.rank AND "
            "q.comm_id = p.comm_id AND q.wall_ns <= ?1)",
            {job.until_wall},
            [&](sqlite3_stmt* s) {
              monitor::CommProgress p;
              p.comm_id = column_i64(s, 1);
              p.entered = static_cast<std::uint64_t>(column_i64(s, 2));
              p.completed = static_cast<std::uint64_t>(column_i64(s, 3));
              job.ranks[static_cast<int>(column_i64(s, 0))].progress[p.comm_id] = p;
            },
            error) &&
        reader->each(
            "SELECT comm_id, size, members FROM communicators WHERE members IS NOT NULL AND "
            "inter = 0",
            {},
            [&](sqlite3_stmt* s) {
              Communicator& c = job.comms[column_i64(s, 0)];
              c.size = static_cast<int>(column_i64(s, 1));
              c.members = parse_members(column_text(s, 2));
            },
            error);
    if (!ok) return false;
  }
  // A rank that appears only in other tables has no ranks row: not a usable rank.
  for (auto it = job.ranks.begin(); it != job.ranks.end();)
    it = it->second.seen ? std::next(it) : job.ranks.erase(it);
  if (job.ranks.empty()) {
    error = job.path + ": no rank has written its facts yet";
    return false;
  }
  job.hosts.assign(host_names.begin(), host_names.end());
  for (auto& [number, rank] : job.ranks) {
    rank.host = static_cast<int>(
        std::lower_bound(job.hosts.begin(), job.hosts.end(), host_of_rank[number]) -
        job.hosts.begin());
    rank.wall_minus_monotonic =
        static_cast<std::int64_t>(rank.start_ns) -
        static_cast<std::int64_t>(rank.clocks.empty() ? 0 : rank.clocks.front().at_ns);
    job.now_wall = std::max(job.now_wall, rank.last.wall_ns);
  }
  const Rank& first = job.ranks.begin()->second;
  job.wall_minus_aligned = first.wall_minus_monotonic;
  return true;
}

// ---- Statistics ---------------------------------------------------------------------------------

// Lateness histogram: < 1 us in bucket 0, then 4 buckets per power of two of microseconds.
struct LogHistogram {
  static constexpr int kBuckets = 72;
  std::array<std::uint32_t, kBuckets> counts{};
  std::uint32_t total = 0;
  static int bucket_of(std::int64_t ns) {
    if (ns < 1000) return 0;
    const int b = 1 + static_cast<int>(std::log2(static_cast<double>(ns) / 1000.0) * 4.0);
    return std::min(b, kBuckets - 1);
  }
  static double value_of(int bucket) {  // the bucket's geometric middle, in ns
    if (bucket == 0) return 500.0;
    return 1000.0 * std::exp2((bucket - 0.5) / 4.0);
  }
  void add(std::int64_t ns) {
    ++counts[static_cast<std::size_t>(bucket_of(ns))];
    ++total;
  }
  double quantile(double q) const {
    if (total == 0) return 0;
    const double target = q * total;
    double seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
      seen += counts[static_cast<std::size_t>(b)];
      if (seen >= target && counts[static_cast<std::size_t>(b)] > 0) return value_of(b);
    }
    return value_of(kBuckets - 1);
  }
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
double lower_quartile_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 4];
}

std::string ms_text(double ns) {
  char buffer[64];
  if (ns >= 1e9)
    std::snprintf(buffer, sizeof buffer, "%.2f s", ns / 1e9);
  else if (ns >= 1e6)
    std::snprintf(buffer, sizeof buffer, "%.1f ms", ns / 1e6);
  else
    std::snprintf(buffer, sizeof buffer, "%.0f us", ns / 1e3);
  return buffer;
}
std::string percent_text(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.0f%%", 100.0 * fraction);
  return buffer;
}
std::string with_commas(std::uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Runs `sql` on every file of the job (one at a time: memory does not grow with the files).
bool each_row(const Job& job, const char* sql, const std::function<void(sqlite3_stmt*)>& row,
              std::string& error) {
  for (const std::string& file : job.files) {
    auto reader = Reader::open(file, error);
    if (!reader || !reader->each(sql, {}, row, error)) return false;
  }
  return true;
}

// The oldest wall-clock time --since keeps (INT64_MIN: everything).
std::int64_t since_wall_ns(const Job& job, const HealthOptions& options) {
  return options.since_s > 0 ? static_cast<std::int64_t>(job.now_wall) -
                                   static_cast<std::int64_t>(options.since_s * 1e9)
                             : INT64_MIN;
}
// The same on rank 0's monotonic clock, for instance and transfer times.
std::int64_t since_aligned_ns(const Job& job, const HealthOptions& options) {
  const std::int64_t wall = since_wall_ns(job, options);
  return wall == INT64_MIN ? wall : wall - job.wall_minus_aligned;
}

// ---- Hangs and lost ranks -----------------------------------------------------------------------

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
  // Lost ranks: no heartbeat for a while although others go on (or ended properly).
  for (const auto& [number, r] : job.ranks) {
    if (!lost(r)) continue;
    Finding f;
    f.kind = "rank_lost";
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
    out.push_back(f);
  }
  // Ranks stuck in the same collective instance.
  std::map<std::pair<std::int64_t, std::uint64_t>, std::vector<int>> stuck;
  for (const auto& [number, r] : job.ranks) {
    const Heartbeat& h = r.last;
    if (lost(r) || h.state != "in_call" || h.comm_id == 0 || h.seq == 0) continue;
    if (job.now_wall < h.since_ns + hang_ns) continue;
    stuck[{h.comm_id, h.seq}].push_back(number);
  }
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
    const Rank& first = job.ranks.at(ranks.front());
    std::uint64_t since = first.last.since_ns;
    for (int number : ranks) since = std::min(since, job.ranks.at(number).last.since_ns);
    Finding f;
    f.first_seen_ns = since;
    f.last_seen_ns = job.now_wall;
    f.severity = Severity::critical;
    const std::string where =
        first.last.function + " #" + std::to_string(seq) + " on comm " + std::to_string(comm_id);
    json stuck_ranks = ranks;
    if (!culprits.empty()) {
      f.kind = "hang";
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
        if (lost(cr))
          doing +=
              "no heartbeat for " + ms_text(static_cast<double>(job.now_wall - cr.last.wall_ns));
        else if (cr.last.state == "in_call")
          doing += "in " + cr.last.function + " for " +
                   ms_text(static_cast<double>(job.now_wall - cr.last.since_ns));
        else
          doing += cr.last.state;
      }
      f.summary = std::to_string(ranks.size()) + " of " + std::to_string(members.size()) +
                  " ranks stuck in " + where + " for " +
                  ms_text(static_cast<double>(job.now_wall - since)) + "; never arrived: " + doing;
      f.evidence = {{"comm_id", comm_id},
                    {"seq", seq},
                    {"function", first.last.function},
                    {"stuck_ranks", stuck_ranks},
                    {"culprits", culprits},
                    {"members", members.size()},
                    {"stuck_ns", job.now_wall - since}};
    } else if (ranks.size() == members.size()) {
      f.kind = "communication_hang";
      f.subject = "comm " + std::to_string(comm_id);
      f.summary = "all " + std::to_string(ranks.size()) + " ranks of comm " +
                  std::to_string(comm_id) + " entered " + where + " and none left for " +
                  ms_text(static_cast<double>(job.now_wall - since)) +
                  " (a communication hang: see the link findings for the likely link)";
      f.evidence = {{"comm_id", comm_id},
                    {"seq", seq},
                    {"stuck_ranks", stuck_ranks},
                    {"stuck_ns", job.now_wall - since}};
    } else {
      continue;  // others passed this instance: a rooted collective's slow tail, not a hang
    }
    out.push_back(f);
  }
}

// ---- Slow ranks and hosts (compute side) --------------------------------------------------------

struct Instance {
  std::int64_t earliest = INT64_MAX;
  std::int64_t latest = INT64_MIN;
  std::int32_t latest_rank = -1;
  std::uint32_t count = 0;
};

struct PairHash {
  std::size_t operator()(const std::pair<std::int64_t, std::uint64_t>& k) const {
    return std::hash<std::int64_t>()(k.first) * 31 + std::hash<std::uint64_t>()(k.second);
  }
};

// Per rank and window: instances, lateness distribution.
struct RankWindow {
  std::uint32_t instances = 0;
  std::uint32_t last = 0;  // instances it was the last to arrive at
  LogHistogram lateness;
};

constexpr int kWindowsKept = 30;  // persistence looks at the latest windows only

bool detect_slow_nodes(const Job& job, const HealthOptions& options, JobHealth& health,
                       std::string& error) {
  const char* sql =
      "SELECT rank, comm_id, seq, enter_ns FROM collectives WHERE exit_ns IS NOT NULL";
  const std::int64_t since_aligned = since_aligned_ns(job, options);
  const std::int64_t until_aligned = job.until_aligned();
  // Pass 1: earliest and latest arrival of every instance.
  std::unordered_map<std::pair<std::int64_t, std::uint64_t>, Instance, PairHash> instances;
  if (!each_row(
          job, sql,
          [&](sqlite3_stmt* s) {
            const int rank = static_cast<int>(column_i64(s, 0));
            auto r = job.ranks.find(rank);
            if (r == job.ranks.end()) return;
            const std::int64_t t = r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 3)));
            if (t < since_aligned || t > until_aligned) return;
            Instance& i =
                instances[{column_i64(s, 1), static_cast<std::uint64_t>(column_i64(s, 2))}];
            i.earliest = std::min(i.earliest, t);
            if (t > i.latest) {
              i.latest = t;
              i.latest_rank = rank;
            }
            ++i.count;
          },
          error))
    return false;
  // Only instances every member recorded (and communicators of two or more) are compared.
  std::int64_t first = INT64_MAX, last = INT64_MIN;
  for (auto it = instances.begin(); it != instances.end();) {
    auto comm = job.comms.find(it->first.first);
    const bool complete = comm != job.comms.end() && comm->second.size >= 2 &&
                          it->second.count == static_cast<std::uint32_t>(comm->second.size);
    if (!complete) {
      it = instances.erase(it);
      continue;
    }
    first = std::min(first, it->second.earliest);
    last = std::max(last, it->second.earliest);
    ++it;
  }
  health.instances = instances.size();
  if (instances.empty()) return true;
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const int windows_total = static_cast<int>((last - first) / window_ns) + 1;
  const int first_kept = std::max(0, windows_total - kWindowsKept);
  const int windows = windows_total - first_kept;

  // Pass 2: each rank's lateness per window, and which host arrived last.
  std::map<int, std::vector<RankWindow>> per_rank;
  std::vector<std::vector<std::uint32_t>> host_last(
      static_cast<std::size_t>(windows), std::vector<std::uint32_t>(job.hosts.size(), 0));
  std::vector<std::uint32_t> window_instances(static_cast<std::size_t>(windows), 0);
  if (!each_row(
          job, sql,
          [&](sqlite3_stmt* s) {
            const int rank = static_cast<int>(column_i64(s, 0));
            auto found =
                instances.find({column_i64(s, 1), static_cast<std::uint64_t>(column_i64(s, 2))});
            if (found == instances.end()) return;
            const Instance& i = found->second;
            const int w = static_cast<int>((i.earliest - first) / window_ns) - first_kept;
            if (w < 0) return;
            const Rank& r = job.ranks.at(rank);
            const std::int64_t t = r.aligned(static_cast<std::uint64_t>(column_i64(s, 3)));
            auto& windows_of_rank = per_rank[rank];
            if (windows_of_rank.empty()) windows_of_rank.resize(static_cast<std::size_t>(windows));
            RankWindow& rw = windows_of_rank[static_cast<std::size_t>(w)];
            ++rw.instances;
            rw.lateness.add(t - i.earliest);
            if (rank == i.latest_rank) {
              ++host_last[static_cast<std::size_t>(w)][static_cast<std::size_t>(r.host)];
              ++window_instances[static_cast<std::size_t>(w)];
              ++rw.last;
            }
          },
          error))
    return false;

  // Per window: which ranks stand out.
  const double min_lateness = options.min_lateness_ms * 1e6;
  std::map<int, int> flagged_windows, eligible_windows;
  std::map<int, std::vector<double>> rank_lateness, other_lateness, host_last_fraction;
  json timeline = json::object();
  for (int w = 0; w < windows; ++w) {
    std::vector<double> medians;
    std::map<int, double> median_of_rank;
    for (auto& [rank, ws] : per_rank) {
      const RankWindow& rw = ws[static_cast<std::size_t>(w)];
      if (rw.instances < static_cast<std::uint32_t>(options.min_instances)) continue;
      const double m = rw.lateness.quantile(0.5);
      medians.push_back(m);
      median_of_rank[rank] = m;
      timeline[std::to_string(rank)].push_back(m / 1e6);
    }
    if (medians.size() < 2) continue;
    const double baseline = lower_quartile_of(medians);
    for (const auto& [rank, m] : median_of_rank) {
      // How often the rank, or its host, was the last to arrive: the host's share counts when
      // the job spans several hosts (two slow ranks of one host take turns being last).
      const int host = job.ranks.at(rank).host;
      const RankWindow& rw = per_rank[rank][static_cast<std::size_t>(w)];
      double fraction = static_cast<double>(rw.last) / rw.instances;
      if (job.hosts.size() > 1 && window_instances[static_cast<std::size_t>(w)] > 0)
        fraction = std::max(
            fraction, static_cast<double>(
                          host_last[static_cast<std::size_t>(w)][static_cast<std::size_t>(host)]) /
                          window_instances[static_cast<std::size_t>(w)]);
      ++eligible_windows[rank];
      rank_lateness[rank].push_back(m);
      other_lateness[rank].push_back(baseline);
      host_last_fraction[rank].push_back(fraction);
      if (m >= min_lateness && m >= options.lateness_factor * baseline &&
          fraction >= options.last_fraction)
        ++flagged_windows[rank];
    }
  }
  health.details["lateness_ms"] = timeline;

  std::set<int> slow;
  for (const auto& [rank, flagged] : flagged_windows)
    if (flagged >= 1 && flagged >= options.persistence * eligible_windows[rank]) slow.insert(rank);
  if (slow.empty()) return true;
  // Arriving late is not enough: a rank that waits in a receive for a message that comes late
  // (a slow link or host upstream) arrives late too, and then spends more of its time inside
  // MPI than the others. A rank that computes too slowly spends less (the others wait for it).
  // Each rank's share of time inside blocking MPI calls, from the aggregates.
  std::map<int, double> mpi_share;
  {
    const std::int64_t since_wall = since_wall_ns(job, options);
    std::map<int, std::pair<double, std::set<std::int64_t>>> busy;  // ns, windows
    if (!each_row(
            job, "SELECT rank, wall_ns, total_ns FROM aggregates",
            [&](sqlite3_stmt* s) {
              const std::int64_t wall = column_i64(s, 1);
              if (wall < since_wall || wall > job.until_wall) return;
              auto& [ns, walls] = busy[static_cast<int>(column_i64(s, 0))];
              ns += static_cast<double>(column_i64(s, 2));
              walls.insert(wall);
            },
            error))
      return false;
    for (const auto& [rank, b] : busy)
      mpi_share[rank] = b.first / (static_cast<double>(b.second.size()) * job.interval_s * 1e9);
  }
  // A host whose ranks are all slow is a slow host; otherwise the slow ranks are named.
  std::map<int, std::vector<int>> slow_by_host, ranks_by_host;
  for (const auto& [number, r] : job.ranks) ranks_by_host[r.host].push_back(number);
  for (int rank : slow) slow_by_host[job.ranks.at(rank).host].push_back(rank);
  const std::uint64_t first_wall = static_cast<std::uint64_t>(
      first + job.wall_minus_aligned + static_cast<std::int64_t>(first_kept) * window_ns);
  for (const auto& [host, ranks] : slow_by_host) {
    const bool whole_host = ranks.size() == ranks_by_host[host].size();
    std::vector<int> subjects = whole_host ? std::vector<int>{ranks.front()} : ranks;
    for (int subject_rank : subjects) {
      std::vector<double> own, others, fractions;
      std::uint64_t n = 0;
      for (int rank : whole_host ? ranks : std::vector<int>{subject_rank}) {
        own.insert(own.end(), rank_lateness[rank].begin(), rank_lateness[rank].end());
        others.insert(others.end(), other_lateness[rank].begin(), other_lateness[rank].end());
        fractions.insert(fractions.end(), host_last_fraction[rank].begin(),
                         host_last_fraction[rank].end());
        for (const RankWindow& rw : per_rank[rank]) n += rw.instances;
      }
      std::vector<double> own_share, others_share;
      for (const auto& [rank, share] : mpi_share)
        (std::find(ranks.begin(), ranks.end(), rank) != ranks.end() ? own_share : others_share)
            .push_back(share);
      const double own_mpi = own_share.empty() ? 0.0 : median_of(own_share);
      const double others_mpi = others_share.empty() ? 1.0 : median_of(others_share);
      // Clearly less (a fifth): with equal shares nobody is waiting for this rank.
      if (!own_share.empty() && !others_share.empty() && own_mpi > 0.8 * others_mpi) continue;
      Finding f;
      f.kind = whole_host ? "slow_host" : "slow_rank";
      const std::string host_name = job.hosts[static_cast<std::size_t>(host)];
      f.subject = whole_host ? "host " + host_name : job.rank_name(subject_rank);
      f.severity = Severity::error;
      f.first_seen_ns = first_wall;
      f.last_seen_ns = job.now_wall;
      const int flagged = flagged_windows[subject_rank], eligible = eligible_windows[subject_rank];
      f.summary = f.subject + ": last to arrive in " + percent_text(median_of(fractions)) + " of " +
                  with_commas(n / (whole_host ? ranks.size() : 1)) +
                  " collectives, median lateness " + ms_text(median_of(own)) + " vs " +
                  ms_text(median_of(others)) + " for the others, in " + std::to_string(flagged) +
                  " of " + std::to_string(eligible) + " windows, inside MPI " +
                  percent_text(own_mpi) + " of the time vs " + percent_text(others_mpi) +
                  " for the others (compute side: it arrives late)";
      f.evidence = {{"host", host_name},
                    {"mpi_time_share", own_mpi},
                    {"others_mpi_time_share", others_mpi},
                    {"ranks", whole_host ? ranks : std::vector<int>{subject_rank}},
                    {"last_fraction", median_of(fractions)},
                    {"median_lateness_ns", median_of(own)},
                    {"others_lateness_ns", median_of(others)},
                    {"windows_flagged", flagged},
                    {"windows", eligible}};
      health.findings.push_back(f);
    }
  }
  return true;
}

// ---- Links (network side) -----------------------------------------------------------------------

struct MessageKey {
  std::int64_t comm_id;
  std::int64_t tag;
  std::int64_t msg;
  int sender, receiver;
  bool operator==(const MessageKey&) const = default;
};
struct MessageKeyHash {
  std::size_t operator()(const MessageKey& k) const {
    std::size_t h = std::hash<std::int64_t>()(k.comm_id);
    h = h * 1000003 ^ std::hash<std::int64_t>()(k.tag);
    h = h * 1000003 ^ std::hash<std::int64_t>()(k.msg);
    h = h * 1000003 ^ static_cast<std::size_t>(k.sender) * 65599 ^
        static_cast<std::size_t>(k.receiver);
    return h;
  }
};

// A bounded sample of latencies (reservoir sampling, fixed seed).
struct Reservoir {
  static constexpr std::size_t kCapacity = 2048;
  std::vector<double> values;
  std::uint64_t seen = 0;
  void add(double v, std::mt19937_64& random) {
    ++seen;
    if (values.size() < kCapacity) {
      values.push_back(v);
    } else {
      const std::uint64_t slot = random() % seen;
      if (slot < kCapacity) values[slot] = v;
    }
  }
};

int size_class(std::int64_t bytes) {  // powers of four
  int c = 0;
  while (bytes >= 4 && c < 20) {
    bytes /= 4;
    ++c;
  }
  return c;
}

// One message of the recent window, as evidence about its link: either its one-way time
// (it was in flight when the receive was posted) or only an upper bound on it (it had arrived
// before the receive was posted: it took at most that long).
struct LinkObservation {
  double ns = 0;
  bool upper_bound = false;
  bool later_half = false;  // sent in the second half of the recent window
};

bool detect_slow_links(const Job& job, const HealthOptions& options, JobHealth& health,
                       std::string& error) {
  const std::int64_t since_aligned = since_aligned_ns(job, options);
  const std::int64_t until_aligned = job.until_aligned();
  // The recent window, on rank 0's clock: where a link is judged slow or not.
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const std::int64_t recent_aligned =
      static_cast<std::int64_t>(job.now_wall) - job.wall_minus_aligned - window_ns;
  const std::int64_t recent_middle = recent_aligned + window_ns / 2;
  struct Sent {
    std::int64_t start;
    std::int64_t bytes;
  };
  std::unordered_map<MessageKey, Sent, MessageKeyHash> sends;
  if (!each_row(
          job,
          "SELECT rank, peer, comm_id, tag, msg, bytes, start_ns FROM transfers "
          "WHERE direction = 'send'",
          [&](sqlite3_stmt* s) {
            const int rank = static_cast<int>(column_i64(s, 0));
            auto r = job.ranks.find(rank);
            if (r == job.ranks.end()) return;
            const std::int64_t start =
                r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 6)));
            if (start < since_aligned || start > until_aligned) return;
            sends[{column_i64(s, 2), column_i64(s, 3), column_i64(s, 4), rank,
                   static_cast<int>(column_i64(s, 1))}] = {start, column_i64(s, 5)};
          },
          error))
    return false;
  // Per (sender host, receiver host, size class): one-way times of the messages measured in
  // flight (for the baseline and the matrix), and the recent window's observations.
  using CellKey = std::tuple<int, int, int>;
  std::map<CellKey, Reservoir> cells;
  std::map<CellKey, std::vector<LinkObservation>> recent;
  std::mt19937_64 random(12345);
  std::uint64_t joined = 0;
  if (!each_row(
          job,
          "SELECT rank, peer, comm_id, tag, msg, start_ns, end_ns FROM transfers "
          "WHERE direction = 'recv'",
          [&](sqlite3_stmt* s) {
            const int rank = static_cast<int>(column_i64(s, 0));
            const int peer = static_cast<int>(column_i64(s, 1));
            auto found =
                sends.find({column_i64(s, 2), column_i64(s, 3), column_i64(s, 4), peer, rank});
            auto r = job.ranks.find(rank);
            auto p = job.ranks.find(peer);
            if (found == sends.end() || r == job.ranks.end() || p == job.ranks.end()) return;
            const std::int64_t posted =
                r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 5)));
            const std::int64_t done =
                r->second.aligned(static_cast<std::uint64_t>(column_i64(s, 6)));
            if (done > until_aligned) return;
            ++joined;
            if (r->second.host == p->second.host) return;  // shared memory: not a link
            // In flight (the receive was posted before the send, or the data came in well
            // after the post): completion minus send is the one-way time. Otherwise the data
            // was there when the receive was posted: the one-way time was at most that, and a
            // receiver that posts late says nothing more about the link.
            const std::int64_t start = found->second.start;
            constexpr std::int64_t kCopyNs = 50'000;  // a receive of data already there
            const bool in_flight = posted <= start || done - posted >= kCopyNs;
            const CellKey key{p->second.host, r->second.host, size_class(found->second.bytes)};
            const double one_way = std::max(0.0, static_cast<double>(done - start));
            if (in_flight) cells[key].add(one_way, random);
            if (start >= recent_aligned)
              recent[key].push_back({one_way, !in_flight, start >= recent_middle});
          },
          error))
    return false;
  health.messages = joined;
  if (cells.empty()) return true;
  // Baseline per size class: the lower quartile of the cells' medians (robust to a slow host,
  // whose cells can be most of a small cluster's).
  std::map<int, std::vector<double>> class_medians;
  std::map<CellKey, double> cell_median;
  for (auto& [key, reservoir] : cells) {
    const double m = median_of(reservoir.values);
    cell_median[key] = m;
    class_medians[std::get<2>(key)].push_back(m);
  }
  std::map<int, double> baseline;
  for (auto& [c, medians] : class_medians) baseline[c] = lower_quartile_of(medians);
  // Per directed host pair. A link is slow when, in the recent window, at least kMinSlow
  // messages took longer than the threshold (link_factor times the baseline and
  // min_link_delay more) and, in each half of the window, slow messages were at least as many
  // as the messages shown to be faster (measured faster, or arrived before a receive posted
  // sooner than the threshold): a slowness that lasts, not a burst. Counting the censored
  // messages matters: behind a slow host the receivers are late and find most messages
  // already there, so a median over the measured ones alone would be mostly from before the
  // fault. The matrix shows the medians over the whole --since range.
  constexpr std::uint64_t kMinSlow = 3;
  struct Cell {
    double ratio = 0, median = 0, base = 0;
    std::uint64_t messages = 0, recent_slow = 0, recent_fast = 0;
    std::uint64_t half_slow[2] = {0, 0}, half_fast[2] = {0, 0};
    bool slow = false;
    // Some slow messages and no more fast ones, but not (yet) enough to call it slow.
    bool suspect = false;
  };
  std::map<std::pair<int, int>, Cell> pairs;
  for (auto& [key, reservoir] : cells) {
    Cell& cell = pairs[{std::get<0>(key), std::get<1>(key)}];
    const double base = std::max(1000.0, baseline[std::get<2>(key)]);
    const double weight = static_cast<double>(reservoir.seen);
    cell.ratio += weight * cell_median[key] / base;
    cell.median += weight * cell_median[key];
    cell.base += weight * base;
    cell.messages += reservoir.seen;
  }
  for (auto& [key, observations] : recent) {
    Cell& cell = pairs[{std::get<0>(key), std::get<1>(key)}];
    auto c = baseline.find(std::get<2>(key));
    if (c == baseline.end()) continue;  // no message of this size class measured anywhere
    const double base = std::max(1000.0, c->second);
    const double threshold =
        std::max(base * options.link_factor, base + options.min_link_delay_us * 1e3);
    for (const LinkObservation& o : observations) {
      if (o.ns < threshold) {
        ++cell.recent_fast;
        ++cell.half_fast[o.later_half];
      } else if (!o.upper_bound) {
        ++cell.recent_slow;
        ++cell.half_slow[o.later_half];
      }
    }
  }
  json matrix = json::array();
  for (auto& [pair, cell] : pairs) {
    const double n = static_cast<double>(std::max<std::uint64_t>(1, cell.messages));
    cell.ratio /= n;
    cell.median /= n;
    cell.base /= n;
    auto half_slow = [&](int h) {
      return cell.half_slow[h] > 0 && cell.half_slow[h] >= cell.half_fast[h];
    };
    cell.slow = cell.recent_slow >= kMinSlow && half_slow(0) && half_slow(1);
    cell.suspect = !cell.slow && cell.recent_slow > 0 && cell.recent_slow >= cell.recent_fast;
    matrix.push_back({{"from", job.hosts[static_cast<std::size_t>(pair.first)]},
                      {"to", job.hosts[static_cast<std::size_t>(pair.second)]},
                      {"median_us", cell.median / 1e3},
                      {"ratio", cell.ratio},
                      {"messages", cell.messages},
                      {"recent_slow", cell.recent_slow},
                      {"recent_fast", cell.recent_fast},
                      {"slow", cell.slow}});
  }
  health.details["links"] = matrix;
  json delayed = json::array();  // hosts that receive slow (or suspect) messages
  for (const auto& [pair, cell] : pairs)
    if (cell.slow || cell.suspect)
      delayed.push_back(job.hosts[static_cast<std::size_t>(pair.second)]);
  health.details["delayed_hosts"] = delayed;
  // A host most of whose links are slow (while links elsewhere are fine) is the host's NIC or
  // network; the remaining slow cells are links. Candidates are taken strongest first (by the
  // fewest slow messages on any of their slow pairs), and a later one counts only the pairs no
  // accepted host explains: behind a slow host, a neighbour that sends to it completes its
  // other messages late too (a receive completed by the same MPI_Waitall as a send stuck
  // towards the slow host reads slow), so the neighbour can look like a second slow host.
  auto involves = [](const std::pair<int, int>& pair, int h) {
    return pair.first == h || pair.second == h;
  };
  std::vector<std::pair<std::uint64_t, int>> candidates;  // strength, host
  for (int h = 0; h < static_cast<int>(job.hosts.size()); ++h) {
    int involved = 0, slow = 0, healthy_elsewhere = 0;
    std::uint64_t weakest = ~0ull;
    for (const auto& [pair, cell] : pairs) {
      if (involves(pair, h)) {
        ++involved;
        slow += cell.slow;
        if (cell.slow) weakest = std::min(weakest, cell.recent_slow);
      } else if (!cell.slow) {
        ++healthy_elsewhere;
      }
    }
    if (involved >= 2 && healthy_elsewhere > 0 && slow >= options.host_cell_fraction * involved)
      candidates.emplace_back(weakest, h);
  }
  std::sort(candidates.rbegin(), candidates.rend());
  std::set<int> slow_hosts;
  auto explained = [&](const std::pair<int, int>& pair) {
    return std::any_of(slow_hosts.begin(), slow_hosts.end(),
                       [&](int h) { return involves(pair, h); });
  };
  for (const auto& [strength, h] : candidates) {
    int involved = 0, slow = 0;
    for (const auto& [pair, cell] : pairs) {
      if (!involves(pair, h) || explained(pair)) continue;
      ++involved;
      slow += cell.slow;
    }
    if (involved >= 2 && slow >= options.host_cell_fraction * involved) slow_hosts.insert(h);
  }
  for (int h : slow_hosts) {
    std::vector<double> mine, others;
    std::uint64_t n = 0;
    for (const auto& [pair, cell] : pairs) {
      if (pair.first == h || pair.second == h) {
        mine.push_back(cell.median);
        n += cell.messages;
      } else {
        others.push_back(cell.median);
      }
    }
    Finding f;
    f.kind = "slow_host_network";
    f.subject = "host " + job.hosts[static_cast<std::size_t>(h)];
    f.severity = Severity::error;
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": its links are slow in both directions: median message latency " +
                ms_text(median_of(mine)) + " over " + with_commas(n) + " messages vs " +
                ms_text(median_of(others)) + " between other hosts (network side: NIC or link)";
    f.evidence = {{"host", job.hosts[static_cast<std::size_t>(h)]},
                  {"median_latency_ns", median_of(mine)},
                  {"others_latency_ns", median_of(others)},
                  {"messages", n}};
    health.findings.push_back(f);
  }
  // A slow link is named only once its hosts' other links are known to be fine (at least
  // kMinKnown fast messages in the window, none suspect or slow): until then the slow link may
  // be the first sign of a slow host (behind a slow host the receivers are late, so evidence
  // about its outgoing links comes in slowly) or an echo of one next to it.
  constexpr std::uint64_t kMinKnown = 3;
  auto undecided_around = [&](const std::pair<int, int>& link) {
    for (const auto& [other, cell] : pairs) {
      if (other == link || other == std::make_pair(link.second, link.first)) continue;
      if (!involves(other, link.first) && !involves(other, link.second)) continue;
      if (cell.slow || cell.suspect || cell.recent_fast < kMinKnown) return true;
    }
    return false;
  };
  for (const auto& [pair, cell] : pairs) {
    if (!cell.slow || slow_hosts.count(pair.first) || slow_hosts.count(pair.second)) continue;
    if (undecided_around(pair)) continue;
    const std::string from = job.hosts[static_cast<std::size_t>(pair.first)];
    const std::string to = job.hosts[static_cast<std::size_t>(pair.second)];
    auto back = pairs.find({pair.second, pair.first});
    const bool both = back != pairs.end() && back->second.slow;
    if (both && pair.first > pair.second) continue;  // reported once, with the other direction
    Finding f;
    f.kind = "slow_link";
    f.subject = "link " + from + (both ? " <-> " : " -> ") + to;
    f.severity = Severity::error;
    f.first_seen_ns = job.now_wall;
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": " + std::to_string(cell.recent_slow) + " of " +
                std::to_string(cell.recent_slow + cell.recent_fast) + " messages of the last " +
                ms_text(options.window_s * 1e9) + " took " +
                std::to_string(static_cast<int>(std::lround(options.link_factor))) +
                "x the baseline " + ms_text(cell.base) + " or more (median " +
                ms_text(cell.median) + " over " + with_commas(cell.messages) + " messages)" +
                (both ? ", both directions" : ", this direction only");
    f.evidence = {{"from", from},
                  {"to", to},
                  {"both_directions", both},
                  {"median_latency_ns", cell.median},
                  {"baseline_ns", cell.base},
                  {"ratio", cell.ratio},
                  {"recent_slow", cell.recent_slow},
                  {"recent_fast", cell.recent_fast},
                  {"messages", cell.messages}};
    health.findings.push_back(f);
  }
  return true;
}

// ---- Degradation --------------------------------------------------------------------------------

bool detect_degradation(const Job& job, const HealthOptions& options, JobHealth& health,
                        std::string& error) {
  using Key = std::tuple<std::string, std::string, std::int64_t>;  // function, symbol, class
  std::map<Key, std::map<std::int64_t, std::pair<double, double>>> series;  // window -> calls, ns
  const auto window_ns = static_cast<std::int64_t>(std::max(0.001, options.window_s) * 1e9);
  const std::int64_t since_wall = since_wall_ns(job, options);
  if (!each_row(
          job,
          "SELECT a.wall_ns, a.function, coalesce(s.symbol, '?'), a.size_class, a.calls, "
          "a.total_ns FROM aggregates a LEFT JOIN call_sites s ON s.rank = a.rank AND "
          "s.site = a.site AND s.frame = 0",
          [&](sqlite3_stmt* s) {
            const std::int64_t wall = column_i64(s, 0);
            if (wall < since_wall || wall > job.until_wall) return;
            auto& cell =
                series[{column_text(s, 1), column_text(s, 2), column_i64(s, 3)}][wall / window_ns];
            cell.first += static_cast<double>(column_i64(s, 4));
            cell.second += static_cast<double>(column_i64(s, 5));
          },
          error))
    return false;
  const int recent = std::max(1, options.degradation_windows);
  for (const auto& [key, windows] : series) {
    if (static_cast<int>(windows.size()) < recent + 3) continue;
    std::vector<double> means;
    double calls = 0;
    for (const auto& [w, cell] : windows) {
      means.push_back(cell.first > 0 ? cell.second / cell.first : 0);
      calls += cell.first;
    }
    // Baseline: the first half of the job's windows (before the recent ones).
    const std::size_t base_count =
        std::min(means.size() - static_cast<std::size_t>(recent), (means.size() + 1) / 2);
    const double base = median_of(
        std::vector<double>(means.begin(), means.begin() + static_cast<long>(base_count)));
    bool degraded = true;
    double worst = 0;
    for (std::size_t i = means.size() - static_cast<std::size_t>(recent); i < means.size(); ++i) {
      degraded = degraded && means[i] >= options.degradation_factor * base &&
                 means[i] - base >= options.min_degradation_us * 1e3;
      worst = std::max(worst, means[i]);
    }
    if (!degraded) continue;
    const auto& [function, symbol, bytes] = key;
    const double now_mean = median_of(std::vector<double>(means.end() - recent, means.end()));
    Finding f;
    f.kind = "degradation";
    f.subject = function + " from " + symbol + " (" + std::to_string(bytes) + " B class)";
    f.severity = Severity::warning;
    f.first_seen_ns =
        static_cast<std::uint64_t>((windows.rbegin()->first - recent + 1) * window_ns);
    f.last_seen_ns = job.now_wall;
    f.summary = f.subject + ": " + ms_text(now_mean) + " per call in the last " +
                std::to_string(recent) + " windows vs " + ms_text(base) +
                " in the job's first windows (" +
                std::to_string(static_cast<int>(std::lround(now_mean / std::max(1.0, base)))) +
                "x, all ranks together)";
    f.evidence = {{"function", function}, {"symbol", symbol},      {"size_class", bytes},
                  {"baseline_ns", base},  {"recent_ns", now_mean}, {"windows", windows.size()},
                  {"calls", calls}};
    health.findings.push_back(f);
  }
  return true;
}

int kind_order(const std::string& kind) {
  static const std::vector<std::string> order = {"hang",      "communication_hang", "rank_lost",
                                                 "slow_host", "slow_host_network",  "slow_link",
                                                 "slow_rank", "degradation"};
  auto found = std::find(order.begin(), order.end(), kind);
  return static_cast<int>(found - order.begin());
}

}  // namespace

std::vector<std::string> find_jobs(const std::vector<std::string>& paths,
                                   std::vector<std::string>& errors) {
  std::vector<std::string> jobs;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) {
      jobs.push_back(path);
      continue;
    }
    if (!fs::is_directory(path, ec)) {
      errors.push_back(path + ": no such file or directory");
      continue;
    }
    std::vector<std::string> files;
    std::string ignored;
    if (job_files(path, files, ignored)) {
      jobs.push_back(path);
      continue;
    }
    // A directory of job directories (what cron scans).
    std::vector<std::string> children;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      std::vector<std::string> child_files;
      if (entry.is_directory() && job_files(entry.path().string(), child_files, ignored))
        children.push_back(entry.path().string());
    }
    std::sort(children.begin(), children.end());
    if (children.empty()) errors.push_back(path + ": no job directories or trace databases in it");
    jobs.insert(jobs.end(), children.begin(), children.end());
  }
  return jobs;
}

bool analyze_job(const std::string& path, const HealthOptions& options, JobHealth& health,
                 std::string& error) {
  Job job;
  job.path = path;
  health = JobHealth{};
  health.path = path;
  if (!job_files(path, job.files, error) || !load_facts(job, options, error)) return false;
  health.job_id = job.job_id;
  health.ranks = static_cast<int>(job.ranks.size());
  health.hosts = static_cast<int>(job.hosts.size());
  health.now_ns = job.now_wall;
  for (const auto& [number, r] : job.ranks) health.running |= r.ended_by == "running";
  detect_hangs(job, options, health.findings);
  if (!detect_slow_nodes(job, options, health, error) ||
      !detect_slow_links(job, options, health, error) ||
      !detect_degradation(job, options, health, error))
    return false;
  // A host that receives slow messages arrives late at the next collective because it waits for
  // them: the network finding explains it, so no compute-side finding is made for it.
  if (health.details.contains("delayed_hosts")) {
    const auto delayed = health.details["delayed_hosts"];
    std::erase_if(health.findings, [&](const Finding& f) {
      if (f.kind != "slow_host" && f.kind != "slow_rank") return false;
      const std::string host = f.evidence.value("host", "");
      return std::find(delayed.begin(), delayed.end(), host) != delayed.end();
    });
  }
  std::stable_sort(health.findings.begin(), health.findings.end(),
                   [](const Finding& a, const Finding& b) {
                     if (a.severity != b.severity) return a.severity > b.severity;
                     return kind_order(a.kind) < kind_order(b.kind);
                   });
  json hosts = json::array();
  for (const std::string& h : job.hosts) hosts.push_back(h);
  health.details["hosts"] = hosts;
  return true;
}

std::string health_text(const std::vector<JobHealth>& jobs) {
  std::string out;
  for (const JobHealth& job : jobs) {
    out += "job " + job.job_id + " (" + job.path + "): " + std::to_string(job.ranks) +
           " ranks on " + std::to_string(job.hosts) + " hosts, " +
           (job.running ? "running" : "ended") + "; " + with_commas(job.instances) +
           " collective instances and " + with_commas(job.messages) + " messages compared\n";
    if (job.findings.empty()) out += "  healthy: no findings\n";
    for (const Finding& f : job.findings) {
      std::string severity = severity_name(f.severity);
      for (char& c : severity) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out += "  " + severity + " " + f.kind + ": " + f.summary + "\n";
    }
  }
  return out;
}

json health_json(const std::vector<JobHealth>& jobs) {
  json out = {{"format", "commtap-health"}, {"version", 1}, {"jobs", json::array()}};
  for (const JobHealth& job : jobs) {
    json findings = json::array();
    for (const Finding& f : job.findings)
      findings.push_back({{"kind", f.kind},
                          {"subject", f.subject},
                          {"severity", severity_name(f.severity)},
                          {"summary", f.summary},
                          {"evidence", f.evidence},
                          {"first_seen_ns", f.first_seen_ns},
                          {"last_seen_ns", f.last_seen_ns}});
    out["jobs"].push_back({{"job_id", job.job_id},
                           {"path", job.path},
                           {"ranks", job.ranks},
                           {"hosts", job.hosts},
                           {"running", job.running},
                           {"now_ns", job.now_ns},
                           {"instances", job.instances},
                           {"messages", job.messages},
                           {"healthy", job.findings.empty()},
                           {"findings", findings},
                           {"links", job.details.value("links", json::array())}});
  }
  return out;
}

bool store_findings(const std::string& store, const std::vector<JobHealth>& jobs,
                    std::string& error) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(store.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    error = store + ": " + (db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_close(db);
    return false;
  }
  sqlite3_busy_timeout(db, 5000);
  auto exec = [&](const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      error = store + ": " + (message ? message : sqlite3_errmsg(db));
      sqlite3_free(message);
      return false;
    }
    return true;
  };
  bool ok = exec(
      "CREATE TABLE IF NOT EXISTS findings (job_id TEXT NOT NULL, path TEXT NOT NULL, "
      "kind TEXT NOT NULL, subject TEXT NOT NULL, severity TEXT NOT NULL, summary TEXT NOT NULL, "
      "evidence TEXT NOT NULL, first_seen_ns INTEGER NOT NULL, last_seen_ns INTEGER NOT NULL, "
      "active INTEGER NOT NULL, PRIMARY KEY (job_id, kind, subject));"
      "BEGIN IMMEDIATE;");
  sqlite3_stmt* upsert = nullptr;
  if (ok && sqlite3_prepare_v2(
                db,
                "INSERT INTO findings VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1) "
                "ON CONFLICT (job_id, kind, subject) DO UPDATE SET severity = excluded.severity, "
                "summary = excluded.summary, evidence = excluded.evidence, path = excluded.path, "
                "first_seen_ns = min(first_seen_ns, excluded.first_seen_ns), "
                "last_seen_ns = max(last_seen_ns, excluded.last_seen_ns), active = 1",
                -1, &upsert, nullptr) != SQLITE_OK) {
    error = store + ": " + sqlite3_errmsg(db);
    ok = false;
  }
  for (const JobHealth& job : jobs) {
    if (!ok) break;
    ok = exec("UPDATE findings SET active = 0 WHERE job_id = '" + [&] {
      std::string q;
      for (char c : job.job_id) q += c == '\'' ? std::string("''") : std::string(1, c);
      return q;
    }() + "'");
    for (const Finding& f : job.findings) {
      if (!ok) break;
      const std::string evidence = f.evidence.dump();
      const std::string severity = severity_name(f.severity);
      const std::string* texts[] = {&job.job_id, &job.path,  &f.kind,  &f.subject,
                                    &severity,   &f.summary, &evidence};
      for (int i = 0; i < 7; ++i)
        sqlite3_bind_text(upsert, i + 1, texts[i]->c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(upsert, 8, static_cast<sqlite3_int64>(f.first_seen_ns));
      sqlite3_bind_int64(upsert, 9, static_cast<sqlite3_int64>(f.last_seen_ns));
      if (sqlite3_step(upsert) != SQLITE_DONE) {
        error = store + ": " + sqlite3_errmsg(db);
        ok = false;
      }
      sqlite3_reset(upsert);
    }
  }
  sqlite3_finalize(upsert);
  ok = ok && exec("COMMIT");
  if (!ok) {
    const std::string first = error;
    exec("ROLLBACK");
    error = first;
  }
  sqlite3_close(db);
  return ok;
}

}  // namespace commtap::analyzer
