// analyzer/trace/trace_rows: the readers of trace_rows.hpp.
#include "analyzer/trace/trace_rows.hpp"

#include "analyzer/trace/reader_pool.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"

namespace commtap::analyzer {

namespace {

// The transfers of one direction; in cron mode the recent ones (recent_rows.hpp): a send by its
// start, a receive by its completion, which follows its send's start.
// A receive also reads seen_pending_ns (NULL in files before version 12, which the reader
// shadows with a NULL column: trace_files.cpp).
bool each_transfer_of(const JobFiles& job, const std::string& direction,
                      const std::string& time_column,
                      const std::function<void(const TransferRow&)>& row, std::string& error) {
  TransferRow t;
  const bool receives = direction == "recv";
  return each_recent_transfer_row(
      job, direction,
      std::string("rank, peer, comm_id, tag, msg, bytes, start_ns, end_ns") +
          (receives ? ", coalesce(seen_pending_ns, 0)" : ""),
      time_column, {6, 7},
      [&](const ResultRow& s) {
        t.rank = static_cast<int>(column_i64(s, 0));
        t.peer = static_cast<int>(column_i64(s, 1));
        t.comm_id = column_i64(s, 2);
        t.tag = column_i64(s, 3);
        t.msg = column_i64(s, 4);
        t.bytes = column_i64(s, 5);
        t.start_ns = static_cast<std::uint64_t>(column_i64(s, 6));
        t.end_ns = static_cast<std::uint64_t>(column_i64(s, 7));
        t.seen_pending_ns = receives ? static_cast<std::uint64_t>(column_i64(s, 8)) : 0;
        row(t);
      },
      error);
}

}  // namespace

bool each_probe(const JobFiles& job, const std::function<void(const ProbeRow&)>& row,
                std::string& error) {
  static const std::string kColumns =
      "SELECT rank, at_ns, from_node, to_node, from_host, to_host, bytes, ns, slowest_ns, "
      "slowest_oneway_ns, sent_ns, peer_received_ns, peer_replied_ns, received_ns, "
      "from_held_ns, to_held_ns, method FROM probes ";
  ProbeRow p;
  return each_recent_local_row(
      job, "probes", kColumns + "ORDER BY at_ns",
      kColumns + "WHERE rank = ?1 AND at_ns >= ?2 ORDER BY at_ns",
      {1, 8, 9 | kMayBeNegative, 10, 11, 12, 13, 14, 15},
      [&](const ResultRow& s) {
        // Every column as its writer's value (bind_u64: the same 64 bits), NULL as 0.
        auto u64 = [&](int i) { return static_cast<std::uint64_t>(column_i64(s, i)); };
        p.rank = static_cast<int>(column_i64(s, 0));
        p.at_ns = u64(1);
        p.from_node = static_cast<int>(column_i64(s, 2));
        p.to_node = static_cast<int>(column_i64(s, 3));
        p.from_host = column_text(s, 4);
        p.to_host = column_text(s, 5);
        p.bytes = u64(6);
        p.ns = u64(7);
        p.slowest_ns = u64(8);
        p.slowest_oneway_ns = u64(9);
        p.sent_ns = u64(10);
        p.peer_received_ns = u64(11);
        p.peer_replied_ns = u64(12);
        p.received_ns = u64(13);
        p.from_held_ns = u64(14);
        p.to_held_ns = u64(15);
        p.asynchronous = column_text(s, 16) == "async";  // NULL before version 14: a round
        row(p);
      },
      error);
}

bool each_send(const JobFiles& job, const std::function<void(const TransferRow&)>& row,
               std::string& error) {
  return each_transfer_of(job, "send", "start_ns", row, error);
}

bool each_receive(const JobFiles& job, const std::function<void(const TransferRow&)>& row,
                  std::string& error) {
  return each_transfer_of(job, "recv", "end_ns", row, error);
}

bool each_transfer(const JobFiles& job, const std::function<void(const TransferRow&)>& row,
                   std::string& error) {
  TransferRow t;
  return each_row(
      job,
      "SELECT rank, direction, peer, comm_id, tag, msg, function, bytes, coalesce(site, -1), "
      "start_ns, end_ns FROM transfers",
      [&](const ResultRow& s) {
        t.rank = static_cast<int>(column_i64(s, 0));
        t.send = column_text(s, 1) == "send";
        t.peer = static_cast<int>(column_i64(s, 2));
        t.comm_id = column_i64(s, 3);
        t.tag = column_i64(s, 4);
        t.msg = column_i64(s, 5);
        t.function = column_text(s, 6);
        t.bytes = column_i64(s, 7);
        t.site = column_i64(s, 8);
        t.start_ns = static_cast<std::uint64_t>(column_i64(s, 9));
        t.end_ns = static_cast<std::uint64_t>(column_i64(s, 10));
        row(t);
      },
      error);
}

bool each_collective_instance(const JobFiles& job,
                              const std::function<void(const CollectiveRow&)>& row,
                              std::string& error) {
  CollectiveRow c;
  return each_collective_row(
      job,
      "rank, comm_id, seq, function, bytes, coalesce(root, -1), coalesce(site, -1), enter_ns, "
      "exit_ns, algorithm",
      "1", {7, 8},
      [&](const ResultRow& s) {
        c.rank = static_cast<int>(column_i64(s, 0));
        c.comm_id = column_i64(s, 1);
        c.seq = static_cast<std::uint64_t>(column_i64(s, 2));
        c.function = column_text(s, 3);
        c.bytes = column_i64(s, 4);
        c.root = column_i64(s, 5);
        c.site = column_i64(s, 6);
        c.enter_ns = column_i64(s, 7);
        c.finished = !column_is_null(s, 8);
        c.exit_ns = column_i64(s, 8);
        c.algorithm = column_text(s, 9);
        row(c);
      },
      error);
}

namespace {

const char* const kInCallColumns =
    "SELECT rank, wall_ns, coalesce(function, ''), coalesce(comm_id, 0), coalesce(seq, 0), "
    "coalesce(since_ns, 0), threads_in_calls FROM heartbeats WHERE state = 'in_call'";

bool each_in_call_row(const JobFiles& job, const std::string& sql,
                      const std::function<void(const InCallHeartbeatRow&)>& row,
                      std::string& error) {
  InCallHeartbeatRow h;
  return each_row(
      job, sql.c_str(),
      [&](const ResultRow& s) {
        h.rank = static_cast<int>(column_i64(s, 0));
        h.wall_ns = column_i64(s, 1);
        h.function = column_text(s, 2);
        h.comm_id = column_i64(s, 3);
        h.seq = column_i64(s, 4);
        h.since_ns = column_i64(s, 5);
        h.threads_in_calls = column_i64(s, 6);
        row(h);
      },
      error);
}

}  // namespace

bool each_in_call_heartbeat(const JobFiles& job,
                            const std::function<void(const InCallHeartbeatRow&)>& row,
                            std::string& error) {
  return each_in_call_row(job, kInCallColumns, row, error);
}

bool each_long_in_call_heartbeat(const JobFiles& job, std::int64_t at_least_ns,
                                 const std::function<void(const InCallHeartbeatRow&)>& row,
                                 std::string& error) {
  return each_in_call_row(job,
                          std::string(kInCallColumns) +
                              " AND comm_id IS NOT NULL AND seq > 0 AND since_ns > 0 AND "
                              "wall_ns - since_ns >= " +
                              std::to_string(at_least_ns),
                          row, error);
}

bool each_call_site(const JobFiles& job, const std::function<void(const CallSiteRow&)>& row,
                    std::string& error) {
  CallSiteRow c;
  return each_row(
      job,
      "SELECT rank, site, symbol, file, line FROM call_sites WHERE frame = 0 AND symbol IS NOT "
      "NULL",
      [&](const ResultRow& s) {
        c.rank = static_cast<int>(column_i64(s, 0));
        c.site = static_cast<int>(column_i64(s, 1));
        c.symbol = column_text(s, 2);
        c.file.reset();
        if (!column_is_null(s, 3)) c.file = column_text(s, 3);
        c.line = column_i64(s, 4);
        row(c);
      },
      error);
}

const std::string kCollectiveColumns = "rank, comm_id, seq, enter_ns, exit_ns, site";
const std::string kCompletedCollectives = "exit_ns IS NOT NULL";
const std::vector<int> kCollectiveTimeColumns = {3, 4};
// SQLite decodes every selected column at each step: those not used are not selected.
const std::string kArrivalColumns = "rank, comm_id, seq, enter_ns";
const std::vector<int> kArrivalTimeColumns = {3};

CollectiveRow collective_arrival(const ResultRow& s) {
  CollectiveRow r;
  r.rank = static_cast<int>(column_i64(s, 0));
  r.comm_id = column_i64(s, 1);
  r.seq = static_cast<std::uint64_t>(column_i64(s, 2));
  r.enter_ns = column_i64(s, 3);
  return r;
}

CollectiveRow collective_row(const ResultRow& s) {
  CollectiveRow r;
  r.rank = static_cast<int>(column_i64(s, 0));
  r.comm_id = column_i64(s, 1);
  r.seq = static_cast<std::uint64_t>(column_i64(s, 2));
  r.enter_ns = column_i64(s, 3);
  r.exit_ns = column_i64(s, 4);
  r.site = column_is_null(s, 5) ? -1 : column_i64(s, 5);
  return r;
}

bool each_stall_row(const JobFiles& job, const std::function<void(const StallRow&)>& row,
                    std::string& error) {
  // Each rank's rows in time order (a whole read sorts the file's; cron mode reads rank by rank
  // in the key's order): the same rows per rank either way.
  return each_recent_row(
      job, "heartbeats",
      "SELECT rank, wall_ns, stalled_ns, coalesce(throttled_ns, -1), coalesce(measuring_ns, 0) "
      "FROM heartbeats WHERE stalled_ns IS NOT NULL ORDER BY wall_ns",
      "SELECT rank, wall_ns, stalled_ns, coalesce(throttled_ns, -1), coalesce(measuring_ns, 0) "
      "FROM heartbeats WHERE rank = ?1 AND wall_ns >= ?2 AND stalled_ns IS NOT NULL "
      "ORDER BY wall_ns",
      {1, 2},
      [&](const ResultRow& s) {
        row({static_cast<int>(column_i64(s, 0)), column_i64(s, 1), column_i64(s, 2),
             column_i64(s, 3), column_i64(s, 4)});
      },
      error);
}

bool each_aggregate_total(const JobFiles& job,
                          const std::function<void(const WindowWriteRow&)>& row,
                          std::string& error) {
  return each_recent_row(
      job, "aggregates", "SELECT rank, wall_ns, total_ns, calls FROM aggregates",
      "SELECT rank, wall_ns, total_ns, calls FROM aggregates WHERE rank = ?1 AND wall_ns >= ?2",
      {1, 2},
      [&](const ResultRow& s) {
        row({static_cast<int>(column_i64(s, 0)), column_i64(s, 1), column_i64(s, 2),
             column_i64(s, 3)});
      },
      error);
}

bool each_heartbeat_write(const JobFiles& job,
                          const std::function<void(const WindowWriteRow&)>& row,
                          std::string& error) {
  return each_recent_row(
      job, "heartbeats", "SELECT rank, wall_ns FROM heartbeats",
      "SELECT rank, wall_ns FROM heartbeats WHERE rank = ?1 AND wall_ns >= ?2", {1},
      [&](const ResultRow& s) {
        row({static_cast<int>(column_i64(s, 0)), column_i64(s, 1), 0});
      },
      error);
}

bool each_aggregate(const JobFiles& job, const std::function<void(const AggregateRow&)>& row,
                    std::string& error) {
  AggregateRow a;
  return each_recent_row(
      job, "aggregates",
      "SELECT a.wall_ns, a.function, coalesce(s.symbol, '?'), a.size_class, a.calls, "
      "a.total_ns FROM aggregates a LEFT JOIN call_sites s ON s.rank = a.rank AND "
      "s.site = a.site AND s.frame = 0",
      "SELECT a.wall_ns, a.function, coalesce(s.symbol, '?'), a.size_class, a.calls, "
      "a.total_ns FROM aggregates a LEFT JOIN call_sites s ON s.rank = a.rank AND "
      "s.site = a.site AND s.frame = 0 WHERE a.rank = ?1 AND a.wall_ns >= ?2",
      {0, 5},
      [&](const ResultRow& s) {
        a.wall_ns = column_i64(s, 0);
        a.function = column_text(s, 1);
        a.symbol = column_text(s, 2);
        a.size_class = column_i64(s, 3);
        a.calls = column_i64(s, 4);
        a.total_ns = column_i64(s, 5);
        row(a);
      },
      error);
}

bool each_tcp_address(const JobFiles& job, const std::function<void(const TcpAddressRow&)>& row,
                      std::string& error) {
  // A seek per address (the key starts with them), not a scan of the counters.
  return each_key_prefix(
      job, "tcp_links", {"rank", "local_address"},
      [&](const ResultRow& s) {
        row({static_cast<int>(column_i64(s, 0)), column_text(s, 1)});
      },
      error);
}

bool each_tcp_link(const JobFiles& job, const std::function<void(const TcpLinkRow&)>& row,
                   std::string& error) {
  TcpLinkRow t;
  return each_recent_series_row(
      job, "tcp_links", {"rank", "local_address", "peer_address"},
      "rank, wall_ns, local_address, peer_address, data_segs_out, retrans_segs, "
      "coalesce(dsack_dups, 0), bytes_acked, coalesce(busy_us, -1), coalesce(rwnd_limited_us, -1), "
      "coalesce(notsent_bytes, 0)",
      {1},
      [&](const ResultRow& s) {
        t.rank = static_cast<int>(column_i64(s, 0));
        t.wall_ns = column_i64(s, 1);
        t.local_address = column_text(s, 2);
        t.peer_address = column_text(s, 3);
        t.data_segs_out = static_cast<std::uint64_t>(column_i64(s, 4));
        t.retrans_segs = static_cast<std::uint64_t>(column_i64(s, 5));
        t.dsack_dups = static_cast<std::uint64_t>(column_i64(s, 6));
        t.bytes_acked = static_cast<std::uint64_t>(column_i64(s, 7));
        t.busy_us = column_i64(s, 8);
        t.rwnd_limited_us = column_i64(s, 9);
        t.notsent_bytes = column_i64(s, 10);
        row(t);
      },
      error);
}

namespace {

bool plausible_times(sqlite3_stmt* s, std::initializer_list<int> columns) {
  for (int c : columns)
    if (!plausible_time(s, c)) return false;
  return true;
}

// Runs `sql` on one file; a row `use` refuses ends it with the collectives' implausible error.
template <class Use>
bool each_checked(TraceReader& reader, const char* sql, std::initializer_list<std::int64_t> binds,
                  const Use& use, std::string& error) {
  bool refused = false;
  const bool ok = reader.each(
      sql, binds,
      [&](sqlite3_stmt* s) {
        if (!refused) refused = !use(s);
      },
      error);
  if (refused) error = reader.path() + ": " + implausible_table_problem("collectives");
  return ok && !refused;
}

}  // namespace

bool each_clock_bound(const JobFiles& job,
                      const std::function<bool(const CollectiveEntrySpanRow&)>& span,
                      const std::function<bool(const ProgressEntriesRow&)>& progress,
                      std::string& error) {
  for (std::size_t file = 0; file < job.files.size(); ++file) {
    ReaderLease reader = lease_reader(job.readers.get(), file, job.files[file], error);
    if (!reader) return false;
    const bool ok =
        each_checked(
            *reader,
            // The whole file's, not cut at until_wall: its last enter is bounded by its last
            // write, and in monotonic time no row can be cut before the clock is known.
            "SELECT c.rank, min(c.enter_ns), max(c.enter_ns), max(coalesce((SELECT max(end_ns) "
            "FROM ranks r WHERE r.rank = c.rank), 0), coalesce((SELECT max(wall_ns) FROM "
            "heartbeats h WHERE h.rank = c.rank), 0)) FROM collectives c GROUP BY c.rank",
            {},
            [&](sqlite3_stmt* s) {
              return span({static_cast<int>(column_i64(s, 0)), column_i64(s, 1), column_i64(s, 2),
                           column_i64(s, 3), plausible_times(s, {1, 2, 3})});
            },
            error) &&
        each_checked(
            *reader,
            "SELECT p.rank, p.wall_ns, (SELECT c.enter_ns FROM collectives c WHERE c.rank = "
            "p.rank AND c.comm_id = p.comm_id AND c.seq <= p.entered ORDER BY c.seq DESC LIMIT "
            "1), (SELECT c.enter_ns FROM collectives c WHERE c.rank = p.rank AND c.comm_id = "
            "p.comm_id AND c.seq > p.entered ORDER BY c.seq LIMIT 1) FROM comm_progress p WHERE "
            "p.wall_ns <= ?1",
            {job.until_wall},
            [&](sqlite3_stmt* s) {
              ProgressEntriesRow p;
              p.rank = static_cast<int>(column_i64(s, 0));
              p.wall_ns = column_i64(s, 1);
              if (sqlite3_column_type(s, 2) != SQLITE_NULL) p.entered_at_ns = column_i64(s, 2);
              if (sqlite3_column_type(s, 3) != SQLITE_NULL) p.next_entered_ns = column_i64(s, 3);
              p.plausible = plausible_times(s, {1, 2, 3});
              return progress(p);
            },
            error);
    if (!ok) return false;
  }
  return true;
}

bool count_completed_collectives(const JobFiles& job, std::uint64_t& count, std::string& error) {
  count = 0;
  for (std::size_t file = 0; file < job.files.size(); ++file) {
    ReaderLease reader = lease_reader(job.readers.get(), file, job.files[file], error);
    if (!reader ||
        !reader->each(
            "SELECT count(*) FROM collectives WHERE exit_ns IS NOT NULL", {},
            [&](sqlite3_stmt* s) { count += static_cast<std::uint64_t>(column_i64(s, 0)); }, error))
      return false;
  }
  return true;
}

bool each_completion(const JobFiles& job, const std::function<bool(const CompletionRow&)>& row,
                     std::string& error) {
  CompletionRow c;
  for (std::size_t file = 0; file < job.files.size(); ++file) {
    ReaderLease reader = lease_reader(job.readers.get(), file, job.files[file], error);
    if (!reader ||
        !each_checked(
            *reader,
            "SELECT rank, comm_id, seq, function, exit_ns FROM collectives WHERE exit_ns IS NOT "
            "NULL",
            {},
            [&](sqlite3_stmt* s) {
              c.rank = static_cast<int>(column_i64(s, 0));
              c.comm_id = column_i64(s, 1);
              c.seq = static_cast<std::uint64_t>(column_i64(s, 2));
              c.function = column_text(s, 3);
              c.exit_ns = column_i64(s, 4);
              c.plausible = plausible_times(s, {4});
              return row(c);
            },
            error))
      return false;
  }
  return true;
}

bool each_setting_value(const JobFiles& job, const std::string& name,
                        const std::function<void(const std::string&)>& value, std::string& error) {
  // The name is one of the library's settings (a constant of the caller), never input.
  const std::string sql = "SELECT value FROM settings WHERE name = '" + name + "' LIMIT 1";
  return each_row(
      job, sql.c_str(), [&](const ResultRow& s) { value(column_text(s, 0)); }, error);
}

}  // namespace commtap::analyzer
