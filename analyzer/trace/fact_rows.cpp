// analyzer/trace/fact_rows: the facts pass's reads (fact_rows.hpp).
#include "analyzer/trace/fact_rows.hpp"

#include <cstdint>
#include <vector>

#include "analyzer/trace/file_rows.hpp"
#include "analyzer/trace/recent_rows.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"

namespace commtap::analyzer {

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
  // would cost the job's age. The collectives' are, in every mode (kTablesCheckedAsRead).
  if (error = reader.content_problem(recent_only ? kTablesReadRecent : kTablesCheckedAsRead);
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
            "min(end_ns, ?1), coalesce(clock_error_ns, -1), coalesce(error_function, ''), "
            "coalesce(error_comm_id, 0), coalesce(error_peer, -1), coalesce(substr(error_text, 1, "
            "4096), ''), "
            "coalesce(substr(error_class, 1, 64), '') "
            "FROM ranks WHERE start_ns <= ?1",
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
  // call_totals are the trace's totals, with no time: a rank's count is what it was at until_wall
  // only where the rank's trace had ended by then (its last window, where an abort usually is).
  return rows(kAborts,
              "SELECT c.rank, c.calls FROM call_totals c JOIN ranks r ON r.rank = c.rank WHERE "
              "c.function = 'ncclCommAbort' AND r.end_ns <= ?1",
              {until_wall}) &&
         rows(kComms,
              "SELECT comm_id, size, members, rank, comm_rank, created_by FROM communicators "
              "WHERE inter = 0",
              {});
}

// Hands one row of the facts pass to its callback, typed.
void hand_on(const ResultRow& s, const FactRows& rows) {
  switch (s.query()) {
    case kJobId:
      rows.job_id(column_text(s, 0));
      break;
    case kRanks: {
      RankRow r;
      r.rank = static_cast<int>(column_i64(s, 0));
      r.host = column_text(s, 1);
      r.ended_by = column_text(s, 2);
      r.start_ns = static_cast<std::uint64_t>(column_i64(s, 3));
      r.clock_offset_ns = column_i64(s, 4);
      r.command_line = column_text(s, 5);
      r.mpi_library = column_text(s, 6);
      r.end_ns = static_cast<std::uint64_t>(column_i64(s, 7));
      r.has_clock_error = column_i64(s, 8) >= 0;
      if (r.ended_by == "mpi_error") {
        r.error.function = column_text(s, 9);
        r.error.comm_id = column_i64(s, 10);
        const std::int64_t peer = column_i64(s, 11);
        r.error.peer = peer >= 0 && peer <= INT32_MAX ? static_cast<int>(peer) : -1;
        r.error.text = column_text(s, 12);
        r.error.error_class = column_text(s, 13);
      }
      rows.rank(r);
      break;
    }
    case kClocks: {
      ClockOffsetRow c;
      c.rank = static_cast<int>(column_i64(s, 0));
      c.estimate.at_ns = static_cast<std::uint64_t>(column_i64(s, 1));
      c.estimate.offset.offset_ns = column_i64(s, 2);
      c.estimate.offset.error_ns = column_i64(s, 3);
      rows.clock(c);
      break;
    }
    case kInterval:
      rows.interval_ms(column_text(s, 0));
      break;
    case kHeartbeat: {
      HeartbeatRow h;
      h.rank = static_cast<int>(column_i64(s, 0));
      h.running = column_i64(s, 7) != 0;
      h.wall_ns = static_cast<std::uint64_t>(column_i64(s, 1));
      h.state = column_text(s, 2);
      h.function = column_text(s, 3);
      h.comm_id = column_i64(s, 4);
      h.seq = static_cast<std::uint64_t>(column_i64(s, 5));
      h.since_ns = static_cast<std::uint64_t>(column_i64(s, 6));
      rows.heartbeat(h);
      break;
    }
    case kProgress: {
      ProgressRow p;
      p.rank = static_cast<int>(column_i64(s, 0));
      p.progress.comm_id = column_i64(s, 1);
      p.progress.entered = static_cast<std::uint64_t>(column_i64(s, 2));
      p.progress.completed = static_cast<std::uint64_t>(column_i64(s, 3));
      p.wall_ns = static_cast<std::uint64_t>(column_i64(s, 4));
      rows.progress(p);
      break;
    }
    case kAborts:
      rows.nccl_aborts(
          {static_cast<int>(column_i64(s, 0)), static_cast<std::uint64_t>(column_i64(s, 1))});
      break;
    case kComms: {
      CommunicatorRow c;
      c.comm_id = column_i64(s, 0);
      c.size = static_cast<int>(column_i64(s, 1));
      if (!column_is_null(s, 2)) c.members = column_text(s, 2);
      c.rank = static_cast<int>(column_i64(s, 3));
      c.comm_rank = static_cast<int>(column_i64(s, 4));
      c.created_by = column_text(s, 5);
      rows.communicator(c);
      break;
    }
  }
}

}  // namespace

bool read_job_facts(const JobFiles& job, bool recent_only, const FactRows& rows,
                    std::string& error) {
  const std::int64_t until_wall = job.until_wall;
  return read_files_in_order(
      job.files, job.threads,
      [&](TraceReader& reader, RowSink& sink, std::string& e) {
        return read_facts(reader, sink, until_wall, recent_only, e);
      },
      [&](const ResultRow& s) { hand_on(s, rows); }, error, &job.rows_read, job.readers.get());
}

bool earliest_rank_start(const JobFiles& job, std::int64_t& start, std::string& error) {
  start = INT64_MAX;
  return each_row(
      job, "SELECT min(start_ns) FROM ranks",
      [&](const ResultRow& s) {
        if (!column_is_null(s, 0)) start = std::min(start, column_i64(s, 0));
      },
      error);
}

}  // namespace commtap::analyzer
