#include "analyzer/job_model.hpp"

#include <cstdlib>
#include <set>

#include "analyzer/trace_files.hpp"

namespace commtap::analyzer {

std::string program_of(const std::string& command_line) {
  const std::string first = command_line.substr(0, command_line.find(' '));
  const std::size_t slash = first.rfind('/');
  return slash == std::string::npos ? first : first.substr(slash + 1);
}

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

bool load_facts(Job& job, const HealthOptions& options, std::string& error) {
  if (options.at_s > 0) {
    std::int64_t start = INT64_MAX;
    for (const std::string& file : job.files) {
      auto reader = TraceReader::open(file, error);
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
    auto reader = TraceReader::open(file, error);
    if (!reader) return false;
    // Once per file: later passes read tables and times this check has vouched for.
    if (error = reader->content_problem(); !error.empty()) return false;
    bool ok =
        reader->each(
            "SELECT value FROM meta WHERE key = 'job_id'", {},
            [&](sqlite3_stmt* s) { job.job_id = column_text(s, 0); }, error) &&
        reader->each(
            "SELECT rank, host, CASE WHEN end_ns > ?1 THEN 'running' ELSE ended_by END, "
            "start_ns, coalesce(clock_offset_ns, 0), coalesce(command_line, '') FROM ranks "
            "WHERE start_ns <= ?1",
            {job.until_wall},
            [&](sqlite3_stmt* s) {
              Rank& r = job.ranks[static_cast<int>(column_i64(s, 0))];
              r.rank = static_cast<int>(column_i64(s, 0));
              host_of_rank[r.rank] = column_text(s, 1);
              host_names.insert(column_text(s, 1));
              r.ended_by = column_text(s, 2);
              r.start_ns = static_cast<std::uint64_t>(column_i64(s, 3));
              r.init_offset_ns = column_i64(s, 4);
              if (r.rank == 0) job.program = program_of(column_text(s, 5));
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
            "coalesce(seq, 0), coalesce(since_ns, 0), 0 FROM heartbeats h WHERE wall_ns = "
            "(SELECT max(wall_ns) FROM heartbeats g WHERE g.rank = h.rank AND g.wall_ns <= ?1) "
            "UNION ALL "
            "SELECT rank, wall_ns, state, coalesce(function, ''), coalesce(comm_id, 0), "
            "coalesce(seq, 0), coalesce(since_ns, 0), 1 FROM heartbeats h WHERE wall_ns = "
            "(SELECT max(wall_ns) FROM heartbeats g WHERE g.rank = h.rank AND g.wall_ns <= ?1 "
            "AND g.state IN ('computing', 'in_call'))",
            {job.until_wall},
            [&](sqlite3_stmt* s) {
              Rank& r = job.ranks[static_cast<int>(column_i64(s, 0))];
              Heartbeat& h = column_i64(s, 7) ? r.last_running : r.last;
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

bool each_row(const Job& job, const char* sql, const std::function<void(sqlite3_stmt*)>& row,
              std::string& error) {
  for (const std::string& file : job.files) {
    auto reader = TraceReader::open(file, error);
    if (!reader || !reader->each(sql, {}, row, error)) return false;
  }
  return true;
}

std::int64_t since_wall_ns(const Job& job, const HealthOptions& options) {
  return options.since_s > 0 ? static_cast<std::int64_t>(job.now_wall) -
                                   static_cast<std::int64_t>(options.since_s * 1e9)
                             : INT64_MIN;
}
std::int64_t since_aligned_ns(const Job& job, const HealthOptions& options) {
  const std::int64_t wall = since_wall_ns(job, options);
  return wall == INT64_MIN ? wall : wall - job.wall_minus_aligned;
}

}  // namespace commtap::analyzer
