#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>

#include "monitor/monitor.hpp"

namespace commtap::monitor {

const char* const kCommtapVersion = "0.1.0";

namespace {

// A tiny RAII layer over the SQLite C API: the writer needs only exec and one prepared insert
// at a time, and every failure becomes a message instead of an exception or an exit.
class Db {
 public:
  explicit Db(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
      error_ = db_ ? sqlite3_errmsg(db_) : "out of memory";
    }
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  void exec(const char* sql) {
    if (!ok()) return;
    char* message = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
      error_ = message ? message : sqlite3_errmsg(db_);
      sqlite3_free(message);
    }
  }

  // Runs `sql` once per call of `bind_row(stmt)`, which binds and returns false when done.
  template <typename BindRow>
  void insert_rows(const char* sql, BindRow bind_row) {
    if (!ok()) return;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) {
      error_ = sqlite3_errmsg(db_);
      return;
    }
    while (ok() && bind_row(stmt)) {
      if (sqlite3_step(stmt) != SQLITE_DONE) error_ = sqlite3_errmsg(db_);
      sqlite3_reset(stmt);
      sqlite3_clear_bindings(stmt);
    }
    sqlite3_finalize(stmt);
  }

 private:
  sqlite3* db_ = nullptr;
  std::string error_;
};

void bind_text(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}
void bind_u64(sqlite3_stmt* stmt, int index, std::uint64_t value) {
  sqlite3_bind_int64(stmt, index, static_cast<sqlite3_int64>(value));
}

}  // namespace

std::string write_rank_database(const std::string& path, const RankFacts& facts,
                                const std::vector<std::pair<std::string, std::string>>& settings,
                                const std::vector<FunctionRow>& functions,
                                const std::vector<CommunicatorRow>& communicators) {
  const std::string temporary = path + ".tmp";
  ::unlink(temporary.c_str());
  std::string error;
  {
    Db db(temporary);
    db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;");
    db.exec(schema_sql());
    db.exec(("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str());
    db.exec("BEGIN");

    const std::vector<std::pair<std::string, std::string>> meta = {
        {"schema_version", std::to_string(kSchemaVersion)},
        {"commtap_version", kCommtapVersion},
        {"job_id", facts.job_id}};
    std::size_t next = 0;
    db.insert_rows("INSERT INTO meta(key, value) VALUES (?1, ?2)", [&](sqlite3_stmt* stmt) {
      if (next == meta.size()) return false;
      bind_text(stmt, 1, meta[next].first);
      bind_text(stmt, 2, meta[next].second);
      ++next;
      return true;
    });

    bool rank_done = false;
    db.insert_rows(
        "INSERT INTO ranks(rank, world_size, host, pid, mpi_library, command_line, start_ns, "
        "end_ns, ended_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        [&](sqlite3_stmt* stmt) {
          if (rank_done) return false;
          sqlite3_bind_int(stmt, 1, facts.rank);
          sqlite3_bind_int(stmt, 2, facts.world_size);
          bind_text(stmt, 3, facts.host);
          sqlite3_bind_int64(stmt, 4, facts.pid);
          bind_text(stmt, 5, facts.mpi_library);
          bind_text(stmt, 6, facts.command_line);
          bind_u64(stmt, 7, facts.start_ns);
          bind_u64(stmt, 8, facts.end_ns);
          bind_text(stmt, 9, facts.ended_by);
          rank_done = true;
          return true;
        });

    next = 0;
    db.insert_rows("INSERT INTO settings(rank, name, value) VALUES (?1, ?2, ?3)",
                   [&](sqlite3_stmt* stmt) {
                     if (next == settings.size()) return false;
                     sqlite3_bind_int(stmt, 1, facts.rank);
                     bind_text(stmt, 2, settings[next].first);
                     bind_text(stmt, 3, settings[next].second);
                     ++next;
                     return true;
                   });

    next = 0;
    db.insert_rows(
        "INSERT INTO call_totals(rank, function, family, calls, time_ns, bytes, completions, "
        "completion_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        [&](sqlite3_stmt* stmt) {
          if (next == functions.size()) return false;
          const FunctionRow& row = functions[next++];
          sqlite3_bind_int(stmt, 1, facts.rank);
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
    db.insert_rows(
        "INSERT OR REPLACE INTO communicators(rank, comm_id, parent_id, created_by, size, "
        "comm_rank, inter, members) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        [&](sqlite3_stmt* stmt) {
          if (next == communicators.size()) return false;
          const CommunicatorRow& row = communicators[next++];
          sqlite3_bind_int(stmt, 1, facts.rank);
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
    db.exec("COMMIT");
    error = db.error();
  }
  if (error.empty() && std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = "cannot rename " + temporary + " to " + path;
  }
  if (!error.empty()) ::unlink(temporary.c_str());
  return error;
}

}  // namespace commtap::monitor
