#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "monitor/monitor.hpp"
#include "monitor/shared_fs.hpp"
#include "monitor/trace_budget.hpp"

namespace commtap::monitor {

namespace {

// A tiny RAII layer over the SQLite C API: the writer needs only exec and one prepared insert
// at a time, and every failure becomes a message instead of an exception or an exit.
class Db {
 public:
  // `name` as PrivateDirectory::sqlite_name gives it, or empty with `problem` saying why the
  // file could not be created.
  Db(const std::string& name, const std::string& problem) {
    if (name.empty()) {
      error_ = problem;
      return;
    }
    // Only the writer thread uses the connection: no per-call mutex (a sixth of the writer's
    // time in perf with it).
    if (sqlite3_open_v2(name.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        literal_vfs()) != SQLITE_OK) {
      error_ = db_ ? sqlite3_errmsg(db_) : "out of memory";
    }
  }
  ~Db() { close(); }
  void close() {
    for (auto* kept : {&statements_, &batched_}) {
      for (auto& [sql, stmt] : *kept) sqlite3_finalize(stmt);
      kept->clear();
    }
    sqlite3_close(db_);
    db_ = nullptr;
  }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  bool ok() const { return error_.empty(); }
  void fail(const char* message) { error_ = with_cause(message); }
  const std::string& error() const { return error_; }
  sqlite3* handle() const { return db_; }

  void exec(const char* sql) {
    if (!ok() || db_ == nullptr) return;
    char* message = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
      error_ = with_cause(message ? message : sqlite3_errmsg(db_));
      sqlite3_free(message);
    }
  }

  // Inserts `rows` rows with `sql`, a one-row INSERT whose VALUES list has `columns`
  // parameters: `bind_row(stmt, row, offset)` binds row number `row` to parameters offset + 1 ..
  // offset + columns. Rows go kRowsPerStatement at a time through one statement made from
  // `sql`'s head (a third less time per row than one row per step), the rest one by one.
  template <typename BindRow>
  void insert_many(const char* sql, int columns, std::size_t rows, BindRow bind_row) {
    if (!ok() || db_ == nullptr) return;
    constexpr std::size_t kRowsPerStatement = 32;
    std::size_t row = 0;
    if (rows >= kRowsPerStatement) {
      sqlite3_stmt*& many = batched_[sql];
      if (many == nullptr) {
        const std::string one = sql;
        std::string text = one.substr(0, one.find("VALUES")) + "VALUES ";
        std::string tuple = "(";
        for (int c = 0; c < columns; ++c) tuple += c == 0 ? "?" : ", ?";
        tuple += ")";
        for (std::size_t r = 0; r < kRowsPerStatement; ++r) text += (r == 0 ? "" : ", ") + tuple;
        if (sqlite3_prepare_v3(db_, text.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &many, nullptr) !=
            SQLITE_OK) {
          error_ = with_cause(sqlite3_errmsg(db_));
          return;
        }
      }
      for (; ok() && row + kRowsPerStatement <= rows; row += kRowsPerStatement) {
        for (std::size_t r = 0; r < kRowsPerStatement; ++r)
          bind_row(many, row + r, static_cast<int>(r) * columns);
        if (sqlite3_step(many) != SQLITE_DONE) error_ = with_cause(sqlite3_errmsg(db_));
        sqlite3_reset(many);
        sqlite3_clear_bindings(many);
      }
    }
    insert_rows(sql, [&](sqlite3_stmt* stmt) {
      if (row == rows) return false;
      bind_row(stmt, row++, 0);
      return true;
    });
  }

  // Runs `sql` once per call of `bind_row(stmt)`, which binds and returns false when done.
  // `sql` is a string literal: its statement is prepared once and kept for the next window.
  template <typename BindRow>
  void insert_rows(const char* sql, BindRow bind_row) {
    if (!ok() || db_ == nullptr) return;
    sqlite3_stmt*& stmt = statements_[sql];
    if (stmt == nullptr &&
        sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
      error_ = with_cause(sqlite3_errmsg(db_));
      return;
    }
    while (ok() && bind_row(stmt)) {
      if (sqlite3_step(stmt) != SQLITE_DONE) error_ = with_cause(sqlite3_errmsg(db_));
      sqlite3_reset(stmt);
      sqlite3_clear_bindings(stmt);
    }
  }

 private:
  // SQLite's message plus the system's reason when there is one ("disk I/O error (File too
  // large)" says more than the first half).
  std::string with_cause(const char* message) const {
    std::string text = message;
    const int code = db_ != nullptr ? sqlite3_system_errno(db_) : 0;
    if (code != 0) text += std::string(" (") + std::strerror(code) + ")";
    return text;
  }

  sqlite3* db_ = nullptr;
  std::string error_;
  std::unordered_map<const char*, sqlite3_stmt*> statements_;  // by their SQL's address
  std::unordered_map<const char*, sqlite3_stmt*> batched_;     // insert_many's, by one row's SQL
};

void bind_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}
// For the per-record rows: the text is not copied, so it must outlive the row's step (string
// literals, the snapshot's name tables).
void bind_stable_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
}
void bind_stable_text(sqlite3_stmt* stmt, int index, const char* text) {
  sqlite3_bind_text(stmt, index, text, -1, SQLITE_STATIC);
}
void bind_u64(sqlite3_stmt* stmt, int index, std::uint64_t value) {
  sqlite3_bind_int64(stmt, index, static_cast<sqlite3_int64>(value));
}

// The statements of one rank's database. Every method returns false once an error happened
// (kept in error()), so a failing disk stops the writing without further noise.
class RankDatabase {
 public:
  // `tighten`: the directory is this job's own (see PrivateDirectory).
  RankDatabase(const std::string& path, const RankFacts& facts, bool tighten = false)
      : directory_(split_path(path).first, tighten, facts.group_readable),
        db_(prepare(split_path(path).second, facts.group_readable ? 0640 : 0600), problem_),
        facts_(facts) {
    db_.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
    db_.exec(schema_sql());
    db_.exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
  }
  const std::string& error() const { return db_.error(); }
  sqlite3* handle() const { return db_.handle(); }
  // Checkpoints the WAL into the file, leaves WAL mode and closes it: a finished rank leaves one
  // plain file, which later readers open without creating -wal/-shm files beside it.
  void close() {
    leave_wal();
    db_.close();
  }
  void leave_wal() { db_.exec("PRAGMA journal_mode=DELETE"); }
  // A meta row written with every window from now on (the next window's transaction).
  void set_meta(const std::string& key, const std::string& value) { meta_[key] = value; }

  bool write_start(const std::vector<std::pair<std::string, std::string>>& settings) {
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

  // One window: totals, communicators, a heartbeat, the end time so far. `ended_by` is
  // "running" until the last window.
  bool write_window(const Snapshot& snapshot, const std::string& ended_by) {
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
        "bytes, site, start_ns, end_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        11, transfers.size(), [&](sqlite3_stmt* stmt, std::size_t row, int at) {
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
        "slowest_oneway_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
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
          return true;
        });
    next = 0;
    db_.insert_rows(
        "INSERT OR REPLACE INTO tcp_links(rank, wall_ns, local_address, peer_address, "
        "connections, bytes_acked, bytes_received, data_segs_out, data_segs_in, retrans_segs, "
        "dsack_dups, rtt_us, min_rtt_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
        "?12, ?13)",
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

 private:
  // A stale file (same job id and rank, an earlier attempt) is replaced, with its WAL, in a
  // directory only this user can write (PrivateDirectory); the new file is created, never
  // adopted, and made readable by the user only (traces name hosts, command lines and call
  // patterns); SQLite gives the -wal and -shm files the database file's permissions. Returns the
  // name SQLite opens, or empty with problem_ set.
  std::string prepare(const std::string& name, mode_t mode) {
    const int fd = directory_.create(name, mode, problem_);
    if (fd < 0) return "";
    ::close(fd);
    return directory_.sqlite_name(name);
  }

  void write_rank_row(std::uint64_t end_ns, const std::string& ended_by) {
    bool done = false;
    db_.insert_rows(
        "INSERT OR REPLACE INTO ranks(rank, world_size, host, pid, mpi_library, command_line, "
        "start_ns, end_ns, ended_by, clock_offset_ns, clock_error_ns, node, local_rank, gpus) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
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
          done = true;
          return true;
        });
  }

  void write_heartbeat(const Snapshot& snapshot, std::uint64_t wall, const std::string& ended_by) {
    // The longest-running call stands for the rank: that is where a hang shows.
    const ActivitySnapshot* oldest = nullptr;
    for (const ActivitySnapshot& a : snapshot.busy)
      if (oldest == nullptr || a.since_ns < oldest->since_ns) oldest = &a;
    bool done = false;
    db_.insert_rows(
        "INSERT OR REPLACE INTO heartbeats(rank, wall_ns, state, function, comm_id, seq, "
        "since_ns, threads_in_calls, instances_dropped, aggregates_dropped, writer_cpu_ns, "
        "stalled_ns, sample_level, instances_thinned) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
        "?10, ?11, ?12, ?13, ?14)",
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
          done = true;
          return true;
        });
  }

  // The trace budget's second means (trace_budget.hpp): windows older than kFullResolutionNs
  // are merged into kMergedWindowNs windows aligned to the wall clock, once each such window is
  // wholly that old. A merged window's aggregates sum the calls and times of its windows (and
  // keep their extremes) in one row per key at the wall time of its last heartbeat, the only
  // heartbeat it keeps: every analyzer rule that divides an aggregates row's time by the time
  // since the rank's previous heartbeat gets the merged window's span. The rows that carry
  // counters since start or a latest state (comm_progress and tcp_links per key, clock_offsets
  // by their monotonic time) keep their last (clock_offsets: most precise) row per merged
  // window, unchanged. Freed pages are reused by later windows, so the file stops growing with
  // the per-window rows.
  void downsample_old_windows(std::uint64_t wall) {
    if (wall < kFullResolutionNs) return;
    const std::uint64_t cutoff = wall - kFullResolutionNs;
    // The merged windows begin at the first whole minute that holds a window of this rank.
    if (merged_until_ == 0) merged_until_ = (first_wall_ - 1) / kMergedWindowNs * kMergedWindowNs;
    if (merged_until_ + kMergedWindowNs > cutoff) return;  // once a minute, not every window
    while (merged_until_ + kMergedWindowNs <= cutoff) {
      const std::uint64_t from = merged_until_;
      merged_until_ += kMergedWindowNs;
      merge_window(from, merged_until_);
    }
    // clock_offsets are on the monotonic clock: the same age, from the newest estimate.
    std::uint64_t newest = 0;
    run("SELECT max(at_ns) FROM clock_offsets WHERE rank = ?1", {}, [&](sqlite3_stmt* stmt) {
      newest = static_cast<std::uint64_t>(sqlite3_column_int64(stmt, 0));
    });
    if (newest < kFullResolutionNs) return;
    const std::uint64_t clock_cutoff =
        (newest - kFullResolutionNs) / kMergedWindowNs * kMergedWindowNs;
    if (clock_cutoff <= clocks_merged_until_) return;
    run("DELETE FROM clock_offsets WHERE rank = ?1 AND at_ns >= ?2 AND at_ns < ?3 AND EXISTS "
        "(SELECT 1 FROM clock_offsets q WHERE q.rank = ?1 AND q.at_ns >= clock_offsets.at_ns / ?4 "
        "* ?4 AND q.at_ns < clock_offsets.at_ns / ?4 * ?4 + ?4 AND (q.error_ns < "
        "clock_offsets.error_ns OR (q.error_ns = clock_offsets.error_ns AND q.at_ns > "
        "clock_offsets.at_ns)))",
        {clocks_merged_until_, clock_cutoff, kMergedWindowNs}, nullptr);
    clocks_merged_until_ = clock_cutoff;
  }

  // Runs `sql` with ?1 the rank and ?2... `values`, calling `row` for each result row.
  template <typename Row = std::nullptr_t>
  void run(const char* sql, std::initializer_list<std::uint64_t> values, Row row) {
    if (!db_.ok()) return;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_.handle(), sql, -1, &stmt, nullptr) != SQLITE_OK) {
      db_.fail(sqlite3_errmsg(db_.handle()));
      return;
    }
    sqlite3_bind_int(stmt, 1, facts_.rank);
    int index = 2;
    for (std::uint64_t value : values) bind_u64(stmt, index++, value);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
      if constexpr (!std::is_same_v<Row, std::nullptr_t>) row(stmt);
    if (rc != SQLITE_DONE) db_.fail(sqlite3_errmsg(db_.handle()));
    sqlite3_finalize(stmt);
  }

  // Merges the windows whose heartbeats fall in (from, until].
  void merge_window(std::uint64_t from, std::uint64_t until) {
    std::uint64_t last = 0;
    run("SELECT max(wall_ns) FROM heartbeats WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns <= ?3",
        {from, until}, [&](sqlite3_stmt* stmt) {
          last = static_cast<std::uint64_t>(sqlite3_column_int64(stmt, 0));
        });
    if (last == 0) return;
    // The SELECT is read whole before rows are replaced (SQLite materializes a SELECT from the
    // table it inserts into); the sums include the last window's own rows, which they replace.
    static constexpr const char* kStatements[] = {
        "INSERT OR REPLACE INTO aggregates(rank, wall_ns, comm_id, function, site, size_class, "
        "calls, total_ns, min_ns, max_ns) SELECT rank, ?3, comm_id, function, site, size_class, "
        "sum(calls), sum(total_ns), min(min_ns), max(max_ns) FROM aggregates WHERE rank = ?1 AND "
        "wall_ns > ?2 AND wall_ns <= ?3 GROUP BY comm_id, function, site, size_class",
        "DELETE FROM aggregates WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns < ?3",
        "UPDATE heartbeats SET sample_level = (SELECT max(sample_level) FROM heartbeats WHERE "
        "rank = ?1 AND wall_ns > ?2 AND wall_ns <= ?3) WHERE rank = ?1 AND wall_ns = ?3",
        "DELETE FROM heartbeats WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns < ?3",
        "DELETE FROM comm_progress WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns < (SELECT "
        "max(q.wall_ns) FROM comm_progress q WHERE q.rank = ?1 AND q.comm_id = "
        "comm_progress.comm_id AND q.wall_ns > ?2 AND q.wall_ns <= ?3)",
        "DELETE FROM tcp_links WHERE rank = ?1 AND wall_ns > ?2 AND wall_ns < (SELECT "
        "max(q.wall_ns) FROM tcp_links q WHERE q.rank = ?1 AND q.local_address = "
        "tcp_links.local_address AND q.peer_address = tcp_links.peer_address AND q.wall_ns > ?2 "
        "AND q.wall_ns <= ?3)",
    };
    for (const char* sql : kStatements) run(sql, {from, last}, nullptr);
  }

  PrivateDirectory directory_;  // open as long as the database: SQLite names files through it
  std::string problem_;
  Db db_;
  RankFacts facts_;
  TraceBudgetSettings budget_;
  InstanceThinning thinning_{TraceBudgetSettings{}};
  unsigned sample_level_ = 0;
  std::uint64_t previous_wall_ = 0;          // the last window's wall time (0: none yet)
  std::uint64_t first_wall_ = 0;             // the first window's
  std::uint64_t merged_until_ = 0;           // windows up to this wall time are merged
  std::uint64_t clocks_merged_until_ = 0;    // clock_offsets before this monotonic time too
  std::vector<std::string> gpus_;            // the GPUs seen so far (they only grow)
  std::map<std::string, std::string> meta_;  // set_meta's rows
  std::unordered_map<std::int64_t, CommProgress> progress_written_;
  // Fixed at start, so that one call's entry time reads the same in every window.
  std::uint64_t wall_minus_monotonic_ = wall_ns() - now_ns();
};

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

}  // namespace

struct TraceWriter::State {
  RankDatabase database;
  Collect collect;
  std::uint64_t interval_ns;
  // The writer thread sleeps in poll() on `wake`, so that a signal handler can wake it with an
  // async-signal-safe write(): 'S' from stop(), 'K' from flush_for_signal(), which then waits
  // for the byte the writer puts on `done` once the file is closed.
  int wake[2] = {-1, -1};
  int done[2] = {-1, -1};
  std::atomic<int> signal{0};
  std::atomic<bool> stopped{false};
  bool failed = false;  // the error was reported: stop() returns no error for it again
  std::atomic<std::uint64_t> writer_cpu_ns{0};
  std::uint64_t stalled_ns = 0;  // the writer thread's own: see Snapshot::stalled_ns
  std::uint64_t tick_ns;         // RankFacts::stall_tick_ns (0: no ticks)
  static constexpr std::uint64_t kStallGraceNs = 2'000'000;
  std::string path;  // the file readers open
  int rank = 0;
  std::string final_ended_by;  // set by stop() before it wakes the thread
  std::thread thread;

  // The snapshot layout (shared filesystems): the writer works on `local_path` and publishes
  // copies to `path`. Empty: `path` itself is written.
  std::string local_path;
  PrivateDirectory trace_directory;  // where snapshots are published (only with a local_path)
  mode_t mode;
  // A copy of a large file costs real time on the writer thread and on the network: a snapshot
  // is published only when at least kPublishCostFactor times the last one's duration has passed
  // since it began, so publishing takes at most a tenth of the writer's time.
  static constexpr std::uint64_t kPublishCostFactor = 10;
  std::uint64_t last_publish_began_ns = 0;
  std::uint64_t last_publish_cost_ns = 0;
  bool publish_error_said = false;

  State(const std::string& p, const std::string& local, const RankFacts& facts, Collect c,
        std::uint64_t interval)
      : database(local.empty() ? p : local, facts, local.empty() ? own_directory(p, facts) : true),
        collect(std::move(c)),
        interval_ns(interval),
        tick_ns(facts.stall_tick_ns),
        path(p),
        rank(facts.rank),
        local_path(local),
        mode(facts.group_readable ? 0640 : 0600) {
    if (local_path.empty()) return;
    database.set_meta("layout", "snapshot");
    trace_directory =
        PrivateDirectory(split_path(path).first, own_directory(path, facts), facts.group_readable);
  }

  // Whether the directory of `file` is the job's default one, commtap-<job id>, which this job
  // made: then it is made private (0700, or 0750 with group read) if it is not. A directory the
  // user named (COMMTAP_DIR) keeps its mode; it must only not be writable by others.
  static bool own_directory(const std::string& file, const RankFacts& facts) {
    return split_path(split_path(file).first).second == "commtap-" + facts.job_id;
  }

  // The working copy and its private directory (local_copy_path's), after a last publish or a
  // failed start.
  static void remove_working_copy(const std::string& local) {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((local + suffix).c_str());
    const auto [directory, name] = split_path(local);
    if (split_path(directory).second.rfind("commtap-", 0) == 0) ::rmdir(directory.c_str());
  }

  static std::uint64_t steady_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }

  // Publishes a snapshot if the layout asks for one and its time has come (always when `now`).
  // A failure is said once; the next window tries again (a network filesystem may come back).
  void publish(bool now) {
    if (local_path.empty()) return;
    const std::uint64_t began = steady_ns();
    if (!now && last_publish_began_ns != 0 &&
        began - last_publish_began_ns < kPublishCostFactor * last_publish_cost_ns)
      return;
    const std::string error =
        publish_snapshot(database.handle(), trace_directory, split_path(path).second, mode);
    last_publish_began_ns = began;
    last_publish_cost_ns = steady_ns() - began;
    database.set_meta("publish_ns", std::to_string(last_publish_cost_ns));
    if (error.empty() || publish_error_said) return;
    publish_error_said = true;
    std::fprintf(stderr,
                 "commtap: rank %d cannot publish its trace (%s); it tries again every window, "
                 "the working copy is %s\n",
                 rank, error.c_str(), local_path.c_str());
  }

  // The last window, then the file closed; in the snapshot layout a last snapshot published and
  // the working copy removed, unless that snapshot failed: then the working copy is the trace.
  void finish(const std::string& ended_by) {
    window(ended_by, false);
    if (local_path.empty()) {
      database.close();
      return;
    }
    database.leave_wal();
    const std::string error =
        publish_snapshot(database.handle(), trace_directory, split_path(path).second, mode);
    database.close();
    if (error.empty()) {
      remove_working_copy(local_path);
      return;
    }
    std::fprintf(stderr,
                 "commtap: rank %d could not publish its last window (%s); its trace stays in "
                 "%s\n",
                 rank, error.c_str(), local_path.c_str());
  }

  void measure_writer_cpu() {
    timespec cpu{};
    if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0)
      writer_cpu_ns.store(static_cast<std::uint64_t>(cpu.tv_sec) * 1'000'000'000u +
                              static_cast<std::uint64_t>(cpu.tv_nsec),
                          std::memory_order_relaxed);
  }
  ~State() {
    for (int fd : {wake[0], wake[1], done[0], done[1]})
      if (fd >= 0) ::close(fd);
  }

  void window(const std::string& ended_by, bool may_publish = true) {
    if (failed) return;
    Snapshot snapshot = collect();
    snapshot.writer_ns = writer_cpu_ns.load(std::memory_order_relaxed);
    if (snapshot.stalled_ns == 0) snapshot.stalled_ns = stalled_ns;
    if (tick_ns == 0) snapshot.stalls_measured = false;
    if (database.write_window(snapshot, ended_by)) {
      if (may_publish) publish(false);
    } else {
      // A full disk or a vanished directory: say so once, now, and stop writing. The job goes
      // on; the file keeps the windows committed before (in the snapshot layout the file that
      // failed is the working copy, whose committed windows are still published at the end).
      failed = true;
      std::fprintf(stderr,
                   "commtap: rank %d stopped writing %s: %s; monitoring is off for this rank, "
                   "the job goes on\n",
                   rank, local_path.empty() ? path.c_str() : local_path.c_str(),
                   database.error().c_str());
    }
  }

  // Between windows the thread wakes every tick_ns; a wakeup at least kStallGraceNs late adds
  // the larger of its lateness and its wait to `stalled_ns`. A process stopped, throttled by its
  // cgroup or queued behind other work on its cores wakes late; the analyzer compares ranks'
  // shares, so a host whose CPU is taken away is told from one whose network is slow (its
  // messages arrive late either way). Counting a late tick's whole wait makes the share an
  // estimate of the time held off whatever the tick: stalls shorter than a tick catch a share of
  // the deadlines equal to the share of time they cover, and a long one counts its lateness.
  // Wakeups cost CPU (about 50 us each on this project's VMs, docs/benchmarks.md), hence the
  // default of 50 ms.
  void run() {
    std::uint64_t next_window = steady_ns() + interval_ns;
    for (;;) {
      pollfd readable{wake[0], POLLIN, 0};
      const std::uint64_t before = steady_ns();
      const std::uint64_t until_window = next_window > before ? next_window - before : 0;
      const std::uint64_t wait_ns = tick_ns > 0 ? std::min(tick_ns, until_window) : until_window;
      const timespec timeout{static_cast<time_t>(wait_ns / 1'000'000'000u),
                             static_cast<long>(wait_ns % 1'000'000'000u)};
      const int ready = ::ppoll(&readable, 1, &timeout, nullptr);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        const std::uint64_t late = steady_ns() - before - wait_ns;
        if (static_cast<std::int64_t>(late) >= static_cast<std::int64_t>(kStallGraceNs))
          stalled_ns += std::max(late, wait_ns);
        if (steady_ns() < next_window) continue;
        refine_fast_clock(interval_ns);
        window("running");
        measure_writer_cpu();
        next_window = steady_ns() + interval_ns;
        continue;
      }
      char command = 0;
      if (::read(wake[0], &command, 1) != 1) continue;
      if (command == 'S') {
        // stop(): the last window and the close happen here too, so that every write of the
        // database is made by this thread, which blocks all signals: a file size limit then
        // fails the write (EFBIG) instead of killing the process with SIGXFSZ.
        finish(final_ended_by);
        return;
      }
      if (command == 'K') {
        // A fatal signal: last window, close, tell the handler; the process is about to die.
        const int number = signal.load();
        finish(number == SIGINT ? "SIGINT" : number == SIGTERM ? "SIGTERM" : "signal");
        stopped.store(true);
        const char byte = 'D';
        [[maybe_unused]] auto ignored = ::write(done[1], &byte, 1);
        return;
      }
    }
  }
};

TraceWriter::TraceWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}

std::unique_ptr<TraceWriter> TraceWriter::start(
    const std::string& path, const RankFacts& facts,
    const std::vector<std::pair<std::string, std::string>>& settings, std::uint64_t interval_ns,
    Collect collect, std::string& error, const std::string& local_path) {
  auto state = std::make_unique<State>(path, local_path, facts, std::move(collect), interval_ns);
  // A failed start leaves no working copy behind (the caller then writes in place).
  auto discard_working_copy = [&] {
    state.reset();
    if (!local_path.empty()) State::remove_working_copy(local_path);
  };
  if (!local_path.empty() && !state->trace_directory.ok()) {
    error = state->trace_directory.problem();
    discard_working_copy();
    return nullptr;
  }
  if (!state->database.write_start(settings)) {
    error = state->database.error();
    discard_working_copy();
    return nullptr;
  }
  if (!local_path.empty()) {
    // An earlier attempt of the same rank that wrote in place may have left its WAL and index
    // beside the name the snapshots now take: they belong to no published file.
    const std::string name = split_path(path).second;
    for (const char* suffix : {"-wal", "-shm"})
      ::unlinkat(state->trace_directory.fd(), (name + suffix).c_str(), 0);
    // Readers listing the job directory see the rank from its start, not one window later.
    state->publish(true);
  }
  if (::pipe2(state->wake, O_CLOEXEC) != 0 || ::pipe2(state->done, O_CLOEXEC) != 0) {
    error = std::string("cannot create the writer's pipes: ") + std::strerror(errno);
    discard_working_copy();
    return nullptr;
  }
  // The writer thread takes no signals: they go to the application's threads, whose handlers
  // (commtap's flush included) may then wait for the writer.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  State* raw = state.get();
  raw->thread = std::thread([raw] { raw->run(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(state)));
}

std::string TraceWriter::stop(const RankFacts& facts) {
  State& s = *state_;
  if (s.stopped.exchange(true)) return "";
  s.final_ended_by = facts.ended_by;
  const char byte = 'S';
  if (::write(s.wake[1], &byte, 1) != 1 || !s.thread.joinable()) return "the writer is gone";
  s.thread.join();
  // Errors are reported by the writer thread when they happen.
  return "";
}

bool TraceWriter::flush_for_signal(int signal_number, int timeout_ms) noexcept {
  State& s = *state_;
  if (s.stopped.load()) return false;
  s.signal.store(signal_number);
  const char byte = 'K';
  if (::write(s.wake[1], &byte, 1) != 1) return false;
  pollfd readable{s.done[0], POLLIN, 0};
  return ::poll(&readable, 1, timeout_ms) == 1;
}

TraceWriter::~TraceWriter() {
  if (!state_) return;
  if (state_->thread.joinable()) {
    if (!state_->stopped.exchange(true)) state_->final_ended_by = "exit";
    const char byte = 'S';
    [[maybe_unused]] auto ignored = ::write(state_->wake[1], &byte, 1);
    state_->thread.join();
  }
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
