// One rank's trace database: its schema, the start and window transactions, the rank and
// heartbeat rows, the snapshot copy for shared filesystems, and the one-shot writers.
#include "monitor/rank_database.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "monitor/trace_schema.hpp"

namespace commtap::monitor {

// `tighten`: the directory is this job's own (see PrivateDirectory).
RankDatabase::RankDatabase(const std::string& path, const RankFacts& facts, bool tighten)
    : directory_(split_path(path).first, tighten, facts.group_readable),
      db_(prepare(split_path(path).second, facts.group_readable ? 0640 : 0600), problem_),
      facts_(facts) {
  db_.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
  db_.exec(schema_sql());
  db_.exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
}

void RankDatabase::close() {
  leave_wal();
  db_.close();
}

bool RankDatabase::write_start(const std::vector<std::pair<std::string, std::string>>& settings) {
  budget_ = TraceBudgetSettings::from(settings);
  thinning_ = InstanceThinning(budget_);
  db_.exec("BEGIN");
  std::vector<std::pair<std::string, std::string>> meta = {
      {"schema_version", std::to_string(kSchemaVersion)},
      {"commtap_version", kCommtapVersion},
      {"job_id", facts_.job_id}};
  meta.insert(meta.end(), meta_.begin(), meta_.end());
  std::size_t next = 0;
  db_.insert_rows("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
                  [&](sqlite3_stmt* stmt) {
                    if (next == meta.size()) return false;
                    bind_text(stmt, 1, meta[next].first);
                    bind_text(stmt, 2, meta[next].second);
                    ++next;
                    return true;
                  });
  write_rank_row(facts_.start_ns, "running");
  next = 0;
  db_.insert_rows("INSERT OR REPLACE INTO settings(rank, name, value) VALUES (?1, ?2, ?3)",
                  [&](sqlite3_stmt* stmt) {
                    if (next == settings.size()) return false;
                    sqlite3_bind_int(stmt, 1, facts_.rank);
                    bind_text(stmt, 2, settings[next].first);
                    bind_text(stmt, 3, settings[next].second);
                    ++next;
                    return true;
                  });
  db_.exec("COMMIT");
  return db_.ok();
}

bool RankDatabase::write_window(const Snapshot& snapshot, const std::string& ended_by) {
  const std::uint64_t wall = snapshot.wall_ns != 0 ? snapshot.wall_ns : wall_ns();
  db_.exec("BEGIN");
  if (!snapshot.gpus.empty()) gpus_ = snapshot.gpus;
  write_rank_row(wall, ended_by);
  db_.exec(("DELETE FROM call_totals WHERE rank = " + std::to_string(facts_.rank)).c_str());
  std::size_t next = 0;
  db_.insert_rows(
      "INSERT INTO call_totals(rank, function, family, calls, time_ns, bytes, completions, "
      "completion_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
      [&](sqlite3_stmt* stmt) {
        if (next == snapshot.functions.size()) return false;
        const FunctionRow& row = snapshot.functions[next++];
        sqlite3_bind_int(stmt, 1, facts_.rank);
        bind_text(stmt, 2, row.function);
        bind_text(stmt, 3, row.family);
        bind_u64(stmt, 4, row.totals.calls);
        bind_u64(stmt, 5, row.totals.time_ns);
        bind_u64(stmt, 6, row.totals.bytes);
        bind_u64(stmt, 7, row.totals.completions);
        bind_u64(stmt, 8, row.totals.completion_ns);
        return true;
      });
  next = 0;
  db_.insert_rows(
      "INSERT OR REPLACE INTO communicators(rank, comm_id, parent_id, created_by, size, "
      "comm_rank, inter, members) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
      [&](sqlite3_stmt* stmt) {
        if (next == snapshot.communicators.size()) return false;
        const CommunicatorRow& row = snapshot.communicators[next++];
        sqlite3_bind_int(stmt, 1, facts_.rank);
        sqlite3_bind_int64(stmt, 2, row.id);
        sqlite3_bind_int64(stmt, 3, row.parent_id);
        bind_text(stmt, 4, row.created_by);
        sqlite3_bind_int(stmt, 5, row.size);
        sqlite3_bind_int(stmt, 6, row.comm_rank);
        sqlite3_bind_int(stmt, 7, row.inter ? 1 : 0);
        if (row.members.empty())
          sqlite3_bind_null(stmt, 8);
        else
          bind_text(stmt, 8, row.members);
        return true;
      });
  auto function_name = [&](std::uint32_t index) -> const std::string& {
    // Never destroyed: the writer's last window may run inside the process's exit handlers.
    static const std::string* const unknown = new std::string("?");
    return index < snapshot.function_names.size() ? snapshot.function_names[index] : *unknown;
  };
  auto algorithm_name = [&](std::uint8_t index) -> const std::string& {
    static const std::string* const native = new std::string("native");
    static const std::string* const unknown = new std::string("?");
    if (index < snapshot.algorithm_names.size()) return snapshot.algorithm_names[index];
    return index == 0 ? *native : *unknown;
  };
  // Records of one kind at a time, in the order they were drained, thinned to the budget.
  const double seconds = previous_wall_ != 0 && wall > previous_wall_
                             ? static_cast<double>(wall - previous_wall_) / 1e9
                         : facts_.start_ns != 0 && wall > facts_.start_ns
                             ? static_cast<double>(wall - facts_.start_ns) / 1e9
                             : budget_.interval_s;
  previous_wall_ = wall;
  if (first_wall_ == 0) first_wall_ = wall;
  const ThinnedWindow kept = thinning_.thin(snapshot.instances, facts_.rank, seconds);
  sample_level_ = kept.level;
  const std::vector<const InstanceRecord*>& collectives = kept.collectives;
  const std::vector<const InstanceRecord*>& transfers = kept.transfers;
  db_.insert_many(
      "INSERT OR REPLACE INTO collectives(rank, comm_id, seq, function, bytes, root, site, "
      "enter_ns, exit_ns, algorithm) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
      10, collectives.size(), [&](sqlite3_stmt* stmt, std::size_t row, int at) {
        const InstanceRecord& r = *collectives[row];
        sqlite3_bind_int(stmt, at + 1, facts_.rank);
        sqlite3_bind_int64(stmt, at + 2, r.comm_id);
        bind_u64(stmt, at + 3, r.seq);
        bind_stable_text(stmt, at + 4, function_name(r.function));
        bind_u64(stmt, at + 5, r.bytes);
        if (r.root >= 0) sqlite3_bind_int(stmt, at + 6, r.root);
        if (r.site != 0) sqlite3_bind_int64(stmt, at + 7, r.site);
        bind_u64(stmt, at + 8, r.enter_ns);
        if (r.exit_ns != 0) bind_u64(stmt, at + 9, r.exit_ns);
        bind_stable_text(stmt, at + 10, algorithm_name(r.algorithm));
      });
  db_.insert_many(
      "INSERT OR IGNORE INTO transfers(rank, direction, peer, comm_id, tag, msg, function, "
      "bytes, site, start_ns, end_ns, seen_pending_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
      "?10, ?11, ?12)",
      12, transfers.size(), [&](sqlite3_stmt* stmt, std::size_t row, int at) {
        const InstanceRecord& r = *transfers[row];
        sqlite3_bind_int(stmt, at + 1, facts_.rank);
        bind_stable_text(stmt, at + 2, r.kind == RecordKind::send ? "send" : "recv");
        sqlite3_bind_int(stmt, at + 3, r.root);
        sqlite3_bind_int64(stmt, at + 4, r.comm_id);
        sqlite3_bind_int(stmt, at + 5, r.tag);
        bind_u64(stmt, at + 6, r.seq);
        bind_stable_text(stmt, at + 7, function_name(r.function));
        bind_u64(stmt, at + 8, r.bytes);
        if (r.site != 0) sqlite3_bind_int64(stmt, at + 9, r.site);
        bind_u64(stmt, at + 10, r.enter_ns);
        bind_u64(stmt, at + 11, r.exit_ns);
        if (r.kind == RecordKind::recv && r.seen_pending_ns != 0)
          bind_u64(stmt, at + 12, r.seen_pending_ns);
      });
  next = 0;
  db_.insert_rows(
      "INSERT OR REPLACE INTO aggregates(rank, wall_ns, comm_id, function, site, size_class, "
      "calls, total_ns, min_ns, max_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
      [&](sqlite3_stmt* stmt) {
        if (next == snapshot.aggregates.size()) return false;
        const AggregateRow& row = snapshot.aggregates[next++];
        sqlite3_bind_int(stmt, 1, facts_.rank);
        bind_u64(stmt, 2, wall);
        sqlite3_bind_int64(stmt, 3, row.key.comm_id);
        bind_stable_text(stmt, 4, function_name(row.key.function));
        sqlite3_bind_int64(stmt, 5, row.key.site);
        bind_u64(stmt, 6, row.key.bucket);
        bind_u64(stmt, 7, row.calls);
        bind_u64(stmt, 8, row.total_ns);
        bind_u64(stmt, 9, row.min_ns);
        bind_u64(stmt, 10, row.max_ns);
        return true;
      });
  next = 0;
  db_.insert_rows(
      "INSERT OR REPLACE INTO comm_progress(rank, wall_ns, comm_id, entered, completed) "
      "VALUES (?1, ?2, ?3, ?4, ?5)",
      [&](sqlite3_stmt* stmt) {
        while (next < snapshot.progress.size()) {
          const CommProgress& p = snapshot.progress[next++];
          auto [seen, fresh] = progress_written_.try_emplace(p.comm_id, p);
          if (!fresh && seen->second == p) continue;
          seen->second = p;
          sqlite3_bind_int(stmt, 1, facts_.rank);
          bind_u64(stmt, 2, wall);
          sqlite3_bind_int64(stmt, 3, p.comm_id);
          bind_u64(stmt, 4, p.entered);
          bind_u64(stmt, 5, p.completed);
          return true;
        }
        return false;
      });
  next = 0;
  db_.insert_rows(
      "INSERT OR REPLACE INTO clock_offsets(rank, at_ns, offset_ns, error_ns) VALUES (?1, ?2, "
      "?3, ?4)",
      [&](sqlite3_stmt* stmt) {
        if (next == snapshot.clock_estimates.size()) return false;
        const ClockEstimate& e = snapshot.clock_estimates[next++];
        sqlite3_bind_int(stmt, 1, facts_.rank);
        bind_u64(stmt, 2, e.at_ns);
        sqlite3_bind_int64(stmt, 3, e.offset.offset_ns);
        sqlite3_bind_int64(stmt, 4, e.offset.error_ns);
        return true;
      });
  next = 0;
  db_.insert_rows(
      "INSERT OR REPLACE INTO probes(rank, at_ns, from_node, to_node, from_host, to_host, "
      "bytes, ns, sent_ns, peer_received_ns, peer_replied_ns, received_ns, slowest_ns, "
      "slowest_oneway_ns, from_held_ns, to_held_ns, method) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
      "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
      [&](sqlite3_stmt* stmt) {
        if (next == snapshot.probes.size()) return false;
        const ProbeRow& p = snapshot.probes[next++];
        sqlite3_bind_int(stmt, 1, facts_.rank);
        bind_u64(stmt, 2, p.at_ns);
        sqlite3_bind_int(stmt, 3, p.from_node);
        sqlite3_bind_int(stmt, 4, p.to_node);
        bind_text(stmt, 5, p.from_host);
        bind_text(stmt, 6, p.to_host);
        bind_u64(stmt, 7, p.bytes);
        bind_u64(stmt, 8, p.ns);
        const std::uint64_t times[] = {p.sent_ns,     p.peer_received_ns, p.peer_replied_ns,
                                       p.received_ns, p.slowest_ns,       p.slowest_oneway_ns};
        for (int i = 0; i < 6; ++i) {
          if (times[i] == 0)
            sqlite3_bind_null(stmt, 9 + i);
          else
            bind_u64(stmt, 9 + i, times[i]);
        }
        bind_u64(stmt, 15, p.from_held_ns);  // 0 is a measurement: no wait
        bind_u64(stmt, 16, p.to_held_ns);
        sqlite3_bind_text(stmt, 17, p.asynchronous ? "async" : "round", -1, SQLITE_STATIC);
        return true;
      });
  next = 0;
  db_.insert_rows(
      "INSERT OR REPLACE INTO tcp_links(rank, wall_ns, local_address, peer_address, "
      "connections, bytes_acked, bytes_received, data_segs_out, data_segs_in, retrans_segs, "
      "dsack_dups, rtt_us, min_rtt_us, busy_us, rwnd_limited_us, notsent_bytes) VALUES (?1, "
      "?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
      [&](sqlite3_stmt* stmt) {
        if (next == snapshot.tcp_links.size()) return false;
        const TcpLinkRow& t = snapshot.tcp_links[next++];
        sqlite3_bind_int(stmt, 1, facts_.rank);
        bind_u64(stmt, 2, wall);
        bind_text(stmt, 3, t.local);
        bind_text(stmt, 4, t.peer);
        bind_u64(stmt, 5, t.connections);
        bind_u64(stmt, 6, t.bytes_acked);
        bind_u64(stmt, 7, t.bytes_received);
        bind_u64(stmt, 8, t.data_segs_out);
        bind_u64(stmt, 9, t.data_segs_in);
        bind_u64(stmt, 10, t.retrans_segs);
        if (t.dsack_dups >= 0) sqlite3_bind_int64(stmt, 11, t.dsack_dups);
        bind_u64(stmt, 12, t.rtt_us);
        bind_u64(stmt, 13, t.min_rtt_us);
        if (t.busy_us >= 0) sqlite3_bind_int64(stmt, 14, t.busy_us);
        if (t.rwnd_limited_us >= 0) {
          sqlite3_bind_int64(stmt, 15, t.rwnd_limited_us);
          bind_u64(stmt, 16, t.notsent_bytes);
        }
        return true;
      });
  std::size_t site = 0, frame = 0;
  db_.insert_rows(
      "INSERT OR REPLACE INTO call_sites(rank, site, frame, address, module, symbol, "
      "symbol_offset, file, line) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
      [&](sqlite3_stmt* stmt) {
        while (site < snapshot.new_sites.size() &&
               frame >= snapshot.new_sites[site].frames.size()) {
          ++site;
          frame = 0;
        }
        if (site == snapshot.new_sites.size()) return false;
        const CallSite& s = snapshot.new_sites[site];
        const CallSite::Frame& f = s.frames[frame];
        sqlite3_bind_int(stmt, 1, facts_.rank);
        sqlite3_bind_int64(stmt, 2, s.id);
        sqlite3_bind_int64(stmt, 3, static_cast<sqlite3_int64>(frame));
        bind_u64(stmt, 4, f.address);
        bind_text(stmt, 5, f.module);
        if (!f.symbol.empty()) {
          bind_text(stmt, 6, f.symbol);
          bind_u64(stmt, 7, f.symbol_offset);
        }
        if (!f.file.empty()) {
          bind_text(stmt, 8, f.file);
          sqlite3_bind_int(stmt, 9, f.line);
        }
        ++frame;
        return true;
      });
  write_heartbeat(snapshot, wall, ended_by);
  if (thinning_.bounded()) downsample_old_windows(wall);
  auto meta = meta_.begin();
  db_.insert_rows("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)",
                  [&](sqlite3_stmt* stmt) {
                    if (meta == meta_.end()) return false;
                    bind_text(stmt, 1, meta->first);
                    bind_text(stmt, 2, meta->second);
                    ++meta;
                    return true;
                  });
  db_.exec("COMMIT");
  return db_.ok();
}

std::string RankDatabase::prepare(const std::string& name, mode_t mode) {
  const int fd = directory_.create(name, mode, problem_);
  if (fd < 0) return "";
  ::close(fd);
  return directory_.sqlite_name(name);
}

void RankDatabase::write_rank_row(std::uint64_t end_ns, const std::string& ended_by) {
  bool done = false;
  db_.insert_rows(
      "INSERT OR REPLACE INTO ranks(rank, world_size, host, pid, mpi_library, command_line, "
      "start_ns, end_ns, ended_by, clock_offset_ns, clock_error_ns, node, local_rank, gpus, "
      "error_function, error_comm_id, error_peer, error_class, error_text) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
      "?19)",
      [&](sqlite3_stmt* stmt) {
        if (done) return false;
        sqlite3_bind_int(stmt, 1, facts_.rank);
        sqlite3_bind_int(stmt, 2, facts_.world_size);
        bind_text(stmt, 3, facts_.host);
        sqlite3_bind_int64(stmt, 4, facts_.pid);
        bind_text(stmt, 5, facts_.mpi_library);
        bind_text(stmt, 6, facts_.command_line);
        bind_u64(stmt, 7, facts_.start_ns);
        bind_u64(stmt, 8, end_ns);
        bind_text(stmt, 9, ended_by);
        if (facts_.clock.error_ns >= 0) {
          sqlite3_bind_int64(stmt, 10, facts_.clock.offset_ns);
          sqlite3_bind_int64(stmt, 11, facts_.clock.error_ns);
        }
        sqlite3_bind_int(stmt, 12, facts_.node);
        sqlite3_bind_int(stmt, 13, facts_.local_rank);
        if (!gpus_.empty()) {
          std::string joined;
          for (const std::string& gpu : gpus_) joined += (joined.empty() ? "" : "; ") + gpu;
          bind_text(stmt, 14, joined);
        }
        if (ended_by == "mpi_error") {
          bind_text(stmt, 15, facts_.error.function);
          if (facts_.error.comm_id != 0) sqlite3_bind_int64(stmt, 16, facts_.error.comm_id);
          if (facts_.error.peer >= 0) sqlite3_bind_int(stmt, 17, facts_.error.peer);
          bind_text(stmt, 18, facts_.error.error_class);
          bind_text(stmt, 19, facts_.error.text);
        }
        done = true;
        return true;
      });
}

void RankDatabase::write_heartbeat(const Snapshot& snapshot, std::uint64_t wall,
                                   const std::string& ended_by) {
  // The longest-running call stands for the rank: that is where a hang shows.
  const ActivitySnapshot* oldest = nullptr;
  for (const ActivitySnapshot& a : snapshot.busy)
    if (oldest == nullptr || a.since_ns < oldest->since_ns) oldest = &a;
  bool done = false;
  db_.insert_rows(
      "INSERT OR REPLACE INTO heartbeats(rank, wall_ns, state, function, comm_id, seq, "
      "since_ns, threads_in_calls, instances_dropped, aggregates_dropped, writer_cpu_ns, "
      "stalled_ns, sample_level, instances_thinned, throttled_ns, measuring_ns) VALUES (?1, ?2, "
      "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
      [&](sqlite3_stmt* stmt) {
        if (done) return false;
        sqlite3_bind_int(stmt, 1, facts_.rank);
        bind_u64(stmt, 2, wall);
        const bool ended = ended_by != "running";
        bind_text(stmt, 3, ended ? ended_by : oldest ? "in_call" : "computing");
        if (oldest != nullptr && !ended) {
          const std::size_t index = oldest->function - 1;
          if (index < snapshot.function_names.size())
            bind_text(stmt, 4, snapshot.function_names[index]);
          if (oldest->comm_id != 0) sqlite3_bind_int64(stmt, 5, oldest->comm_id);
          if (oldest->seq != 0) bind_u64(stmt, 6, oldest->seq);
          const std::int64_t shift = snapshot.wall_minus_monotonic_ns != 0
                                         ? snapshot.wall_minus_monotonic_ns
                                         : static_cast<std::int64_t>(wall_minus_monotonic_);
          sqlite3_bind_int64(stmt, 7, static_cast<std::int64_t>(oldest->since_ns) + shift);
        }
        sqlite3_bind_int(stmt, 8, static_cast<int>(snapshot.busy.size()));
        bind_u64(stmt, 9, snapshot.instances_dropped);
        bind_u64(stmt, 10, snapshot.aggregates_dropped);
        bind_u64(stmt, 11, snapshot.writer_ns);
        if (snapshot.stalls_measured) bind_u64(stmt, 12, snapshot.stalled_ns);
        if (thinning_.bounded()) {
          sqlite3_bind_int(stmt, 13, static_cast<int>(sample_level_));
          bind_u64(stmt, 14, thinning_.thinned());
        }
        if (snapshot.throttled_ns) bind_u64(stmt, 15, *snapshot.throttled_ns);
        bind_u64(stmt, 16, snapshot.measuring_ns);
        done = true;
        return true;
      });
}

// Writes a consistent copy of `source` over `target`: page by page with the backup API (a
// fraction of VACUUM INTO's time, which rebuilds every b-tree) into `target`.tmp, synced, then
// renamed over `target`. A reader that has the old file open goes on reading the old file; one
// that opens the name afterwards gets the new one whole: never a mix of two windows, and no -wal
// or -shm beside it on the shared filesystem. Returns an empty string or what went wrong.
std::string publish_snapshot(sqlite3* source, const PrivateDirectory& directory,
                             const std::string& name, mode_t mode) {
  const std::string temporary = name + ".tmp";
  const std::string shown = directory.path() + "/" + temporary;
  int fd = -1;
  auto failed = [&](const std::string& what) {
    if (fd >= 0) ::close(fd);
    ::unlinkat(directory.fd(), temporary.c_str(), 0);
    return what;
  };
  // Created anew (a file left by a rank that died while publishing is removed first).
  std::string error;
  fd = directory.create(temporary, mode, error);
  if (fd < 0) return failed(error);
  // No locks on the copy: nobody else knows the temporary name, and the lock managers of network
  // filesystems are where things go wrong (ENOLCK on NFS mounted without lockd). No journal and
  // no syncs either: the file becomes visible only by the rename, after the fsync below.
  sqlite3* copy = nullptr;
  if (sqlite3_open_v2(directory.sqlite_name(temporary).c_str(), &copy,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                      literal_vfs("unix-none")) != SQLITE_OK) {
    error = copy ? sqlite3_errmsg(copy) : "out of memory";
  } else if (sqlite3_exec(copy, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF", nullptr, nullptr,
                          nullptr) != SQLITE_OK) {
    error = sqlite3_errmsg(copy);
  } else if (sqlite3_backup* backup = sqlite3_backup_init(copy, "main", source, "main");
             backup == nullptr) {
    error = sqlite3_errmsg(copy);
  } else {
    const int rc = sqlite3_backup_step(backup, -1);
    sqlite3_backup_finish(backup);
    if (rc != SQLITE_DONE) error = sqlite3_errmsg(copy);
  }
  sqlite3_close(copy);
  if (!error.empty()) return failed("cannot copy to " + shown + ": " + error);
  // The backup copies page 1 as it is, with the source's WAL marks (file format bytes 18 and 19
  // = 2). 1 marks a rollback-journal file: readers then neither look for a -wal nor need a -shm.
  const unsigned char rollback[2] = {1, 1};
  const bool written = ::pwrite(fd, rollback, 2, 18) == 2 && ::fsync(fd) == 0;
  if (!written) return failed("cannot write " + shown + ": " + std::strerror(errno));
  ::close(fd);
  fd = -1;
  if (::renameat(directory.fd(), temporary.c_str(), directory.fd(), name.c_str()) != 0)
    return failed("cannot rename " + shown + " to " + name + ": " + std::strerror(errno));
  return "";
}

namespace {

// `window(i)` returns the window or a reference to it (no copy of a stored one).
template <typename Window>
std::string write_windows(const std::string& path, const RankFacts& facts,
                          const std::vector<std::pair<std::string, std::string>>& settings,
                          std::size_t windows, const Window& window) {
  RankDatabase database(path, facts);
  if (!database.write_start(settings)) return database.error();
  for (std::size_t i = 0; i < windows; ++i)
    if (!database.write_window(window(i), i + 1 == windows ? facts.ended_by : "running")) break;
  database.close();
  return database.error();
}

}  // namespace

std::string write_rank_database(const std::string& path, const RankFacts& facts,
                                const std::vector<std::pair<std::string, std::string>>& settings,
                                const std::vector<Snapshot>& windows) {
  return write_windows(path, facts, settings, windows.size(),
                       [&](std::size_t i) -> const Snapshot& { return windows[i]; });
}

std::string write_rank_database(const std::string& path, const RankFacts& facts,
                                const std::vector<std::pair<std::string, std::string>>& settings,
                                std::size_t windows,
                                const std::function<Snapshot(std::size_t)>& window) {
  return write_windows(path, facts, settings, windows, window);
}

std::string publish_copy(const std::string& source, const std::string& target,
                         bool group_readable) {
  sqlite3* db = nullptr;
  std::string error;
  if (sqlite3_open_v2(source.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK)
    error = source + ": " + (db ? sqlite3_errmsg(db) : "out of memory");
  else {
    const PrivateDirectory directory(split_path(target).first, false, group_readable);
    error = directory.ok() ? publish_snapshot(db, directory, split_path(target).second,
                                              group_readable ? 0640 : 0600)
                           : directory.problem();
  }
  sqlite3_close(db);
  return error;
}

}  // namespace commtap::monitor
