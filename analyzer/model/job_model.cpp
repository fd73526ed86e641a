#include "analyzer/model/job_model.hpp"

#include <cstdlib>
#include <set>

#include "analyzer/trace/recent_rows.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"

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

namespace {

// The statements of the facts pass, in the order their rows are handed on.
enum FactQuery { kJobId, kRanks, kClocks, kInterval, kHeartbeat, kProgress, kAborts, kComms };

// Runs the facts pass's statements on one file. The newest heartbeat of each rank and the newest
// progress of each (rank, communicator) are found through the tables' primary keys (a few rows
// each), not by a scan: a job's age does not make them dearer.
bool read_facts(TraceReader& reader, RowSink& sink, std::int64_t until_wall, bool recent_only,
                std::string& error) {
  // Once per file: later passes read tables and times this check has vouched for. In cron mode
  // the large tables' rows are checked as they are read instead (recent_rows.hpp): a whole scan
  // would cost the job's age.
  if (error = reader.content_problem(recent_only ? kTablesReadRecent : std::vector<std::string>{});
      !error.empty())
    return false;
  auto rows = [&](int query, const char* sql, std::initializer_list<std::int64_t> binds) {
    sink.begin_query(query);
    bool plausible = true;
    return reader.each(
               sql, binds,
               [&](sqlite3_stmt* s) {
                 // The newest heartbeats' times (wall_ns, since_ns) enter arithmetic.
                 if (recent_only && query == kHeartbeat &&
                     !(plausible_time(s, 1) && plausible_time(s, 6))) {
                   error = reader.path() + ": " + implausible_table_problem("heartbeats");
                   plausible = false;
                 }
                 if (plausible) sink.add(s);
               },
               error) &&
           plausible;
  };
  std::vector<std::int64_t> ranks;
  if (!reader.each(
          "SELECT rank FROM ranks ORDER BY rank", {},
          [&](sqlite3_stmt* s) { ranks.push_back(column_i64(s, 0)); }, error))
    return false;
  if (!rows(kJobId, "SELECT value FROM meta WHERE key = 'job_id'", {}) ||
      !rows(kRanks,
            "SELECT rank, host, CASE WHEN end_ns > ?1 THEN 'running' ELSE ended_by END, "
            "start_ns, coalesce(clock_offset_ns, 0), coalesce(command_line, ''), mpi_library, "
            "min(end_ns, ?1), coalesce(clock_error_ns, -1) FROM ranks WHERE start_ns <= ?1",
            {until_wall}) ||
      // An estimate with a negative error is no estimate (MPI's writer never keeps one).
      !rows(kClocks,
            "SELECT rank, at_ns, offset_ns, error_ns FROM clock_offsets WHERE error_ns >= 0 "
            "ORDER BY at_ns",
            {}) ||
      !rows(kInterval, "SELECT value FROM settings WHERE name = 'COMMTAP_INTERVAL' LIMIT 1", {}))
    return false;
  for (const std::int64_t rank : ranks)
    for (const bool running : {false, true}) {
      const char* sql =
          running ? "SELECT rank, wall_ns, state, coalesce(function, ''), coalesce(comm_id, 0), "
                    "coalesce(seq, 0), coalesce(since_ns, 0), 1 FROM heartbeats WHERE rank = ?1 "
                    "AND wall_ns <= ?2 AND state IN ('computing', 'in_call') ORDER BY wall_ns "
                    "DESC LIMIT 1"
                  : "SELECT rank, wall_ns, state, coalesce(function, ''), coalesce(comm_id, 0), "
                    "coalesce(seq, 0), coalesce(since_ns, 0), 0 FROM heartbeats WHERE rank = ?1 "
                    "AND wall_ns <= ?2 ORDER BY wall_ns DESC LIMIT 1";
      if (!rows(kHeartbeat, sql, {rank, until_wall})) return false;
    }
  for (const std::int64_t rank : ranks) {
    // Each communicator of the rank's progress rows, in turn (a skip over the primary key).
    std::int64_t comm = INT64_MIN;
    for (bool more = true; more;) {
      more = false;
      if (!reader.each(
              "SELECT comm_id FROM comm_progress WHERE rank = ?1 AND comm_id > ?2 ORDER BY "
              "comm_id LIMIT 1",
              {rank, comm},
              [&](sqlite3_stmt* s) {
                comm = column_i64(s, 0);
                more = true;
              },
              error))
        return false;
      if (more &&
          !rows(kProgress,
                "SELECT rank, comm_id, entered, completed, wall_ns FROM comm_progress WHERE rank "
                "= ?1 AND comm_id = ?2 AND wall_ns <= ?3 ORDER BY wall_ns DESC LIMIT 1",
                {rank, comm, until_wall}))
        return false;
    }
  }
  return rows(kAborts, "SELECT rank, calls FROM call_totals WHERE function = 'ncclCommAbort'",
              {}) &&
         rows(kComms,
              "SELECT comm_id, size, members, rank, comm_rank, created_by FROM communicators "
              "WHERE inter = 0",
              {});
}

}  // namespace

bool load_facts(Job& job, const HealthOptions& options, std::string& error) {
  if (options.at_s > 0) {
    std::int64_t start = INT64_MAX;
    if (!each_row(
            job, "SELECT min(start_ns) FROM ranks",
            [&](const ResultRow& s) {
              if (!column_is_null(s, 0)) start = std::min(start, column_i64(s, 0));
            },
            error))
      return false;
    if (start != INT64_MAX) job.until_wall = start + static_cast<std::int64_t>(options.at_s * 1e9);
  }
  std::set<std::string> host_names;
  std::map<int, std::string> host_of_rank;
  // Each rank's own row of a communicator without a members list: (comm_rank, world rank).
  struct RowsOfComm {
    int size = 0;
    std::string created_by;
    std::vector<std::pair<int, int>> members;
  };
  std::map<std::int64_t, RowsOfComm> rows_of_comm;
  const std::int64_t until_wall = job.until_wall;
  const bool ok = read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        return read_facts(reader, sink, until_wall, options.since_s > 0 && !options.read_all, e);
      },
      [&](const ResultRow& s) {
        switch (s.query()) {
          case kJobId:
            job.job_id = column_text(s, 0);
            break;
          case kRanks: {
            Rank& r = job.ranks[static_cast<int>(column_i64(s, 0))];
            r.rank = static_cast<int>(column_i64(s, 0));
            host_of_rank[r.rank] = column_text(s, 1);
            host_names.insert(column_text(s, 1));
            r.ended_by = column_text(s, 2);
            r.start_ns = static_cast<std::uint64_t>(column_i64(s, 3));
            r.init_offset_ns = column_i64(s, 4);
            if (r.rank == 0) job.program = program_of(column_text(s, 5));
            r.mpi_library = column_text(s, 6);
            r.end_ns = static_cast<std::uint64_t>(column_i64(s, 7));
            r.mpi_clock |= column_i64(s, 8) >= 0;
            r.seen = true;
            break;
          }
          case kClocks: {
            monitor::ClockEstimate e;
            e.at_ns = static_cast<std::uint64_t>(column_i64(s, 1));
            e.offset.offset_ns = column_i64(s, 2);
            e.offset.error_ns = column_i64(s, 3);
            Rank& r = job.ranks[static_cast<int>(column_i64(s, 0))];
            r.clocks.push_back(e);
            r.mpi_clock = true;
            break;
          }
          case kInterval: {
            const double ms = std::atof(column_text(s, 0).c_str());
            if (ms > 0) job.interval_s = ms / 1000.0;
            break;
          }
          case kHeartbeat: {
            Rank& r = job.ranks[static_cast<int>(column_i64(s, 0))];
            Heartbeat& h = column_i64(s, 7) ? r.last_running : r.last;
            h.wall_ns = static_cast<std::uint64_t>(column_i64(s, 1));
            h.state = column_text(s, 2);
            h.function = column_text(s, 3);
            h.comm_id = column_i64(s, 4);
            h.seq = static_cast<std::uint64_t>(column_i64(s, 5));
            h.since_ns = static_cast<std::uint64_t>(column_i64(s, 6));
            break;
          }
          case kProgress: {
            monitor::CommProgress p;
            p.comm_id = column_i64(s, 1);
            p.entered = static_cast<std::uint64_t>(column_i64(s, 2));
            p.completed = static_cast<std::uint64_t>(column_i64(s, 3));
            Rank& r = job.ranks[static_cast<int>(column_i64(s, 0))];
            r.progress[p.comm_id] = p;
            r.progress_since[p.comm_id] = static_cast<std::uint64_t>(column_i64(s, 4));
            break;
          }
          case kAborts:
            job.ranks[static_cast<int>(column_i64(s, 0))].nccl_aborts =
                static_cast<std::uint64_t>(column_i64(s, 1));
            break;
          case kComms: {
            const std::int64_t id = column_i64(s, 0);
            if (!column_is_null(s, 2)) {
              Communicator& c = job.comms[id];
              c.size = static_cast<int>(column_i64(s, 1));
              c.members = parse_members(column_text(s, 2));
              break;
            }
            RowsOfComm& rows = rows_of_comm[id];
            if (rows.size == 0) rows.size = static_cast<int>(column_i64(s, 1));
            rows.created_by = column_text(s, 5);
            rows.members.emplace_back(static_cast<int>(column_i64(s, 4)),
                                      static_cast<int>(column_i64(s, 3)));
            break;
          }
        }
      },
      error, &job.rows_read);
  if (!ok) return false;
  // A rank that appears only in other tables has no ranks row: not a usable rank.
  for (auto it = job.ranks.begin(); it != job.ranks.end();)
    it = it->second.seen ? std::next(it) : job.ranks.erase(it);
  if (job.ranks.empty()) {
    error = job.path + ": no rank has written its facts yet";
    return false;
  }
  // MPI writes a communicator's members in its rank 0's row. Another library's (NCCL) cannot
  // tell a rank who the others are: every rank wrote its own comm_rank, and the members are
  // gathered from those rows, so that the detectors, the report and the export see its
  // collectives' members as an MPI communicator's. A rank whose file is missing is left out of
  // the list (not padded: the size is untrusted, and a list as long as it says could be any
  // length), the size stays the communicator's. An MPI communicator whose rank 0's row is
  // missing stays out, as it always did.
  for (auto& [id, rows] : rows_of_comm) {
    if (job.comms.count(id) || rows.created_by.rfind("MPI_", 0) == 0 ||
        rows.created_by == "unseen" || rows.size <= 0)
      continue;
    Communicator& c = job.comms[id];
    c.size = rows.size;
    c.nccl = true;
    std::sort(rows.members.begin(), rows.members.end());
    for (const auto& [comm_rank, rank] : rows.members)
      if (comm_rank >= 0 && comm_rank < rows.size) c.members.push_back(rank);
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
  // Ranks without MPI's estimates: aligned by their collectives (a job without MPI_Init).
  if (!align_clocks_by_collectives(job, error)) return false;
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

bool each_row(const Job& job, const char* sql, const std::function<void(const ResultRow&)>& row,
              std::string& error) {
  const std::string statement = sql;
  return read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        return reader.each(
            statement, {}, [&](sqlite3_stmt* s) { sink.add(s); }, e);
      },
      row, error, &job.rows_read);
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
