#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analyzer/query/job_database.hpp"
#include "analyzer/store/output_files.hpp"
#include "analyzer/trace/symbols.hpp"
#include "analyzer/trace/trace_files.hpp"
#include "analyzer/trace/untrusted_input.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::analyzer {

namespace fs = std::filesystem;

namespace {

bool exec(sqlite3* db, const std::string& sql, std::string& error) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK) return true;
  error = message ? message : sqlite3_errmsg(db);
  sqlite3_free(message);
  return false;
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The columns `table` has both in main and in the attached src, comma-separated (empty if src
// has no such table).
std::string shared_columns(sqlite3* db, const std::string& table) {
  const std::vector<std::string> in_file = table_columns(db, "src", table);
  std::string shared;
  for (const std::string& name : table_columns(db, "main", table)) {
    if (std::find(in_file.begin(), in_file.end(), name) == in_file.end()) continue;
    shared += (shared.empty() ? "\"" : ", \"") + name + "\"";
  }
  return shared;
}

// A file in UTF-16 cannot be attached to the UTF-8 in-memory database (SQLite requires one text
// encoding): it is checked and copied through a connection of its own instead, value by value
// (SQLite converts the text on the way), with the same checks an attached file has.
bool copy_other_encoding(sqlite3* db, const ReaderFile& file,
                         const std::vector<std::string>& tables, std::string& reason) {
  sqlite3* src = nullptr;
  if (sqlite3_open_v2(file.uri().c_str(), &src, file.open_flags(), nullptr) != SQLITE_OK) {
    reason = src ? sqlite3_errmsg(src) : "cannot open";
    sqlite3_close(src);
    return false;
  }
  harden_connection(src, /*allow_views=*/false);
  auto finish = [&](bool ok) {
    sqlite3_close(src);
    return ok;
  };
  int version = -1;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(src, "PRAGMA user_version", -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW)
    version = sqlite3_column_int(stmt, 0);
  sqlite3_finalize(stmt);
  if (reason = schema_version_problem(version); !reason.empty()) return finish(false);
  if (reason = hostile_schema_problem(src, "main"); !reason.empty()) return finish(false);
  if (reason = implausible_values_problem(src, "main"); !reason.empty()) return finish(false);
  if (!exec(db, "BEGIN", reason)) return finish(false);
  for (const std::string& table : tables) {
    const std::vector<std::string> in_file = table_columns(src, "main", table);
    std::string columns, slots;
    for (const std::string& name : table_columns(db, "main", table)) {
      if (std::find(in_file.begin(), in_file.end(), name) == in_file.end()) continue;
      columns += (columns.empty() ? "\"" : ", \"") + name + "\"";
      slots += slots.empty() ? "?" : ", ?";
    }
    if (columns.empty()) continue;
    sqlite3_stmt* select = nullptr;
    sqlite3_stmt* insert = nullptr;
    bool ok =
        sqlite3_prepare_v2(src, ("SELECT " + columns + " FROM main.\"" + table + "\"").c_str(), -1,
                           &select, nullptr) == SQLITE_OK &&
        sqlite3_prepare_v2(db,
                           ("INSERT OR REPLACE INTO main.\"" + table + "\" (" + columns +
                            ") VALUES (" + slots + ")")
                               .c_str(),
                           -1, &insert, nullptr) == SQLITE_OK;
    int rc = SQLITE_DONE;
    while (ok && (rc = sqlite3_step(select)) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(select); ++i)
        sqlite3_bind_value(insert, i + 1, sqlite3_column_value(select, i));
      ok = sqlite3_step(insert) == SQLITE_DONE;
      sqlite3_reset(insert);
    }
    if (!ok || rc != SQLITE_DONE)
      reason = sqlite3_errcode(src) != SQLITE_OK && rc != SQLITE_DONE ? sqlite3_errmsg(src)
                                                                      : sqlite3_errmsg(db);
    sqlite3_finalize(select);
    sqlite3_finalize(insert);
    if (!ok || rc != SQLITE_DONE) return finish(false);
  }
  return finish(exec(db, "COMMIT", reason));
}

}  // namespace

std::unique_ptr<JobDatabase> JobDatabase::open(const std::string& path, std::string& error,
                                               bool prefer_merged) {
  std::vector<std::string> files;
  if (!job_files(path, prefer_merged, files, error)) return nullptr;

  std::unique_ptr<JobDatabase> job(new JobDatabase());
  if (sqlite3_open_v2(":memory:", &job->db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI,
                      nullptr) != SQLITE_OK ||
      !exec(job->db_, monitor::schema_sql(), error) ||
      !exec(job->db_, "PRAGMA user_version=" + std::to_string(monitor::kSchemaVersion), error) ||
      !register_sql_functions(job->db_)) {
    error = "cannot create an in-memory database: " + error;
    return nullptr;
  }
  // The job's own views (collectives_aligned, ...) live in this in-memory database and stay
  // usable; an attached file's schema is checked before anything is read from it.
  harden_connection(job->db_, /*allow_views=*/true);
  std::vector<std::string> tables;
  {
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(job->db_, "SELECT name FROM sqlite_master WHERE type = 'table'", -1, &stmt,
                       nullptr);
    while (sqlite3_step(stmt) == SQLITE_ROW)
      tables.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
    sqlite3_finalize(stmt);
  }
  // Copy every table of the schema from each file, one file attached at a time so that jobs of
  // any size load within SQLite's attachment limit. Files are opened read-only (reader_uri): a
  // live job's writers are never blocked.
  auto copy_file = [&](const std::string& where, std::string& reason) {
    const ReaderFile file(where);  // a killed rank's hot journal: a rolled-back copy
    if (!file.problem().empty()) {
      reason = file.problem();
      return false;
    }
    bool ok = exec(job->db_, "ATTACH " + quoted(file.uri()) + " AS src", reason);
    if (ok) {
      ok = exec(job->db_, "SELECT count(*) FROM src.sqlite_master", reason);
    }
    if (!ok && reason.find("same text encoding") != std::string::npos) {
      std::string ignored;
      exec(job->db_, "DETACH src", ignored);
      reason.clear();
      ok = copy_other_encoding(job->db_, file, tables, reason);
      if (!ok) exec(job->db_, "ROLLBACK", ignored);  // none of a half-read file's rows
      return ok;
    }
    if (ok) {
      reason = hostile_schema_problem(job->db_, "src");
      ok = reason.empty();
    }
    if (ok) {
      sqlite3_stmt* stmt = nullptr;
      int version = -1;
      if (sqlite3_prepare_v2(job->db_, "PRAGMA src.user_version", -1, &stmt, nullptr) ==
              SQLITE_OK &&
          sqlite3_step(stmt) == SQLITE_ROW)
        version = sqlite3_column_int(stmt, 0);
      sqlite3_finalize(stmt);
      if (const std::string problem = schema_version_problem(version); !problem.empty()) {
        ok = false;
        reason = problem;
      }
    }
    if (ok) {
      reason = implausible_values_problem(job->db_, "src");
      ok = reason.empty();
    }
    if (ok) {
      // Every table of the schema, copied row for row (each row carries its rank), by the columns
      // the file has: an older version's file lacks newer tables and columns, left empty.
      std::string copy = "BEGIN;";
      for (const std::string& table : tables) {
        const std::string columns = shared_columns(job->db_, table);
        if (columns.empty()) continue;
        copy += "INSERT OR REPLACE INTO main." + table + " (" + columns + ") SELECT " + columns +
                " FROM src." + table + ";";
      }
      ok = exec(job->db_, copy + "COMMIT;", reason);
    }
    std::string ignored;
    if (!ok) exec(job->db_, "ROLLBACK", ignored);  // none of a half-read file's rows
    exec(job->db_, "DETACH src", ignored);
    return ok;
  };
  for (const std::string& where : files) {
    std::string reason;
    // A snapshot published on a shared filesystem may be replaced by its writer's rename while it
    // is read. Locally and on FUSE the old file stays readable while open, but an NFS client on
    // another host may get ESTALE for it: a failed file is read again (up to 3 times) when its
    // name has come to point to another file meanwhile.
    bool ok = false;
    for (int attempt = 0; attempt < 3 && !ok; ++attempt) {
      struct stat before {};
      const bool known = ::stat(where.c_str(), &before) == 0;
      reason.clear();
      ok = copy_file(where, reason);
      struct stat after {};
      if (ok || !known || ::stat(where.c_str(), &after) != 0 ||
          (after.st_ino == before.st_ino && after.st_dev == before.st_dev))
        break;
    }
    if (!ok) {
      error = where + ": " + reason;
      return nullptr;
    }
    job->sources_.push_back(where);
  }
  // Built once here rather than by every rank's writer (where it cost 0.6 us per instance).
  std::string ignored;
  exec(job->db_,
       "CREATE INDEX IF NOT EXISTS collectives_by_instance ON collectives (comm_id, seq);"
       "CREATE INDEX IF NOT EXISTS transfers_by_message ON transfers (comm_id, tag, msg, rank)",
       ignored);
  return job;
}

JobDatabase::~JobDatabase() {
  sqlite3_close(db_);
}

bool JobDatabase::save(const std::string& path, std::string& error) const {
  // The whole database as one image, written through an OutputFile: SQLite never opens the
  // output by name (VACUUM INTO would, after a race with whoever owns the directory), and the
  // file is as private as the most private of its inputs.
  sqlite3_int64 size = 0;
  unsigned char* image = sqlite3_serialize(db_, "main", &size, 0);
  if (image == nullptr) {
    error = "cannot serialize the merged database (out of memory?)";
    return false;
  }
  auto out = OutputFile::create(path, mode_for_outputs_of(sources_), error);
  bool ok = out != nullptr;
  if (ok && !out->write(image, static_cast<std::size_t>(size))) {
    const int cause = errno;
    error = "cannot write " + path + ": " + write_failure(path, std::strerror(cause), 0, cause);
    ok = false;
  }
  ok = ok && out->commit(error);
  sqlite3_free(image);
  if (!ok && error.empty()) error = "cannot write " + path;
  return ok;
}

namespace {

// What a user's statement may do beyond reading the job's tables: list the schema, no more.
int authorize_user_statement(void*, int action, const char* first, const char* second, const char*,
                             const char*) {
  switch (action) {
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
      return SQLITE_DENY;
    case SQLITE_PRAGMA: {
      // The listings take a table's or index's name (`PRAGMA table_info(ranks)`); user_version
      // only as a query (with a value it would set it).
      static constexpr const char* kListings[] = {"table_info", "table_xinfo", "table_list",
                                                  "index_list", "index_info",  "index_xinfo"};
      if (first == nullptr) return SQLITE_DENY;
      for (const char* allowed : kListings)
        if (sqlite3_stricmp(first, allowed) == 0) return SQLITE_OK;
      return sqlite3_stricmp(first, "user_version") == 0 && second == nullptr ? SQLITE_OK
                                                                              : SQLITE_DENY;
    }
    case SQLITE_FUNCTION: {
      // fts3_tokenizer returns and takes raw pointers; the others load code or read pages.
      static constexpr const char* kDenied[] = {"fts3_tokenizer", "load_extension",
                                                "sqlite_dbpage"};
      for (const char* denied : kDenied)
        if (second != nullptr && sqlite3_stricmp(second, denied) == 0) return SQLITE_DENY;
      return SQLITE_OK;
    }
    default:
      return SQLITE_OK;
  }
}

// What ends the process when a statement is still running a second past its --timeout: one
// function call (LIKE over a long text, a demangled symbol) runs without reaching SQLite's
// progress handler or its interrupt check. The command is that process (`commtap query`), so
// ending it is how the limit holds; the message is written before, ready for the signal handler.
char g_stuck_message[160];
std::size_t g_stuck_length = 0;

void end_stuck_statement(int) {
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, g_stuck_message, g_stuck_length);
  ::_exit(2);
}

// Limits for one user statement, undone when it is done: the deadline (the progress handler
// stops the statement between steps, a timer ends the process if one step outlasts it by a
// second) and SQLite's hard heap limit over the memory it uses beyond the loaded job, shared with
// the result as it grows (lower_heap_limit).
class UserStatementLimits {
 public:
  UserStatementLimits(sqlite3* db, const JobDatabase::Limits& limits)
      : db_(db), deadline_(limits.seconds), limits_(limits) {
    sqlite3_set_authorizer(db_, authorize_user_statement, nullptr);
    // The job's own rows are already in memory: the limit is on what the statement adds.
    base_ = sqlite3_memory_used();
    previous_heap_limit_ = sqlite3_hard_heap_limit64(base_ + limits.memory_bytes);
    if (limits.seconds > 0) {
      const int length = std::snprintf(
          g_stuck_message, sizeof g_stuck_message,
          "commtap: query failed: stopped after %.0f s (--timeout), inside one function call\n",
          limits.seconds);
      g_stuck_length = static_cast<std::size_t>(std::max(0, length));
      struct sigaction action {};
      action.sa_handler = end_stuck_statement;
      ::sigaction(SIGALRM, &action, &previous_action_);
      const double at = std::min(limits.seconds + 1, 1e8);
      itimerval timer{};
      timer.it_value.tv_sec = static_cast<time_t>(at);
      timer.it_value.tv_usec = static_cast<suseconds_t>((at - std::floor(at)) * 1e6);
      timer_set_ = ::setitimer(ITIMER_REAL, &timer, nullptr) == 0;
    }
  }
  ~UserStatementLimits() {
    if (timer_set_) {
      itimerval off{};
      ::setitimer(ITIMER_REAL, &off, nullptr);
      ::sigaction(SIGALRM, &previous_action_, nullptr);
    }
    sqlite3_set_authorizer(db_, nullptr, nullptr);
    sqlite3_hard_heap_limit64(previous_heap_limit_);
  }
  UserStatementLimits(const UserStatementLimits&) = delete;
  UserStatementLimits& operator=(const UserStatementLimits&) = delete;
  // The result holds `result_bytes` (counted twice: it is printed as a copy of itself): SQLite
  // may use what is left of the limit (at least a byte: 0 would mean no limit).
  void lower_heap_limit(std::int64_t result_bytes) {
    sqlite3_hard_heap_limit64(base_ +
                              std::max<std::int64_t>(1, limits_.memory_bytes - 2 * result_bytes));
  }

 private:
  sqlite3* db_;
  Deadline deadline_;
  JobDatabase::Limits limits_;
  sqlite3_int64 base_ = 0, previous_heap_limit_ = 0;
  struct sigaction previous_action_ {};
  bool timer_set_ = false;
};

}  // namespace

std::optional<QueryResult> JobDatabase::query(const std::string& sql, std::string& error,
                                              const Limits* limits) const {
  std::optional<UserStatementLimits> user;
  if (limits != nullptr) user.emplace(db_, *limits);
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, &tail) != SQLITE_OK) {
    error = sqlite3_errmsg(db_);
    return std::nullopt;
  }
  if (stmt == nullptr) {
    error = "empty statement";
    return std::nullopt;
  }
  if (!sqlite3_stmt_readonly(stmt)) {
    sqlite3_finalize(stmt);
    error = "only read-only statements are allowed";
    return std::nullopt;
  }
  if (tail && std::string(tail).find_first_not_of(" \t\r\n;") != std::string::npos) {
    sqlite3_finalize(stmt);
    error = "only one statement is allowed";
    return std::nullopt;
  }
  QueryResult result;
  for (int i = 0; i < sqlite3_column_count(stmt); ++i)
    result.columns.emplace_back(sqlite3_column_name(stmt, i));
  int rc;
  std::int64_t result_bytes = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    auto& row = result.rows.emplace_back();
    for (int i = 0; i < sqlite3_column_count(stmt); ++i) {
      // Each value is counted before it is copied: one row may hold many long values, and a
      // blob's invalid bytes triple in size as U+FFFD.
      const std::int64_t bytes = sqlite3_column_bytes(stmt, i);
      if (limits != nullptr && 2 * (result_bytes + 3 * bytes) > limits->memory_bytes) {
        sqlite3_finalize(stmt);
        error = "the result is larger than the memory limit (--memory-limit)";
        return std::nullopt;
      }
      if (sqlite3_column_type(stmt, i) == SQLITE_NULL) {
        row.emplace_back(std::nullopt);
      } else if (sqlite3_column_text(stmt, i) == nullptr && sqlite3_errcode(db_) == SQLITE_NOMEM) {
        sqlite3_finalize(stmt);
        error = "the statement needs more memory than the limit (--memory-limit)";
        return std::nullopt;
      } else {
        row.emplace_back(column_text(stmt, i));  // for every output: see untrusted_input.hpp
      }
      result_bytes += static_cast<std::int64_t>(row.back() ? row.back()->size() : 0) + 32;
      if (limits != nullptr) user->lower_heap_limit(result_bytes);
    }
  }
  if (rc != SQLITE_DONE) error = sqlite3_errmsg(db_);
  if ((rc & 0xff) == SQLITE_FULL || sqlite3_system_errno(db_) == ENOSPC) {
    // A sort or a large DISTINCT spills to SQLite's temporary files.
    const char* tmp = std::getenv("SQLITE_TMPDIR");
    if (tmp == nullptr) tmp = std::getenv("TMPDIR");
    error =
        write_failure(std::string("SQLite's temporary files (") + (tmp ? tmp : "/var/tmp") + ")",
                      error, SQLITE_FULL, ENOSPC);
  }
  if (rc == SQLITE_NOMEM && limits != nullptr)
    error = "the statement needs more memory than the limit (--memory-limit)";
  if (rc == SQLITE_INTERRUPT && limits != nullptr)
    error =
        "stopped after " + std::to_string(static_cast<long>(limits->seconds)) + " s (--timeout)";
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return std::nullopt;
  return result;
}

namespace {
struct Canned {
  const char* name;
  const char* description;
  const char* sql;
};
constexpr Canned kCanned[] = {
    {"calls", "time, calls, bytes and completions per MPI/NCCL function, summed over ranks",
     "SELECT function, family, count(*) AS ranks, sum(calls) AS calls,"
     " printf('%.3f', sum(time_ns) / 1e6) AS total_ms,"
     " printf('%.2f', sum(time_ns) / 1e3 / max(sum(calls), 1)) AS mean_us,"
     " sum(bytes) AS bytes, sum(completions) AS completions"
     " FROM call_totals GROUP BY function, family ORDER BY sum(time_ns) DESC, function"},
    {"ranks", "one line per rank: host, pid, how it ended, duration, clock offset to rank 0",
     "SELECT rank, host, pid, ended_by, printf('%.3f', (end_ns - start_ns) / 1e9) AS seconds,"
     " clock_offset_ns, clock_error_ns, mpi_library FROM ranks ORDER BY rank"},
    {"collectives",
     "per communicator and function: instances, mean and max time, mean arrival spread",
     "SELECT comm_id, function, count(*) AS instances,"
     " printf('%.2f', avg(span) / 1e3) AS mean_us, printf('%.2f', max(span) / 1e3) AS max_us,"
     " printf('%.2f', avg(spread) / 1e3) AS mean_arrival_spread_us FROM ("
     "SELECT comm_id, seq, function, max(exit_ns) - min(enter_ns) AS span,"
     " max(enter_ns) - min(enter_ns) AS spread FROM collectives_aligned GROUP BY comm_id, seq)"
     " GROUP BY comm_id, function ORDER BY sum(span) DESC"},
    {"sites",
     "the 20 call sites that spent the most time in MPI, all calls counted (from the aggregates):"
     " function, calling symbol, source file and line",
     "SELECT a.function, coalesce(demangle(s.symbol), '?') AS caller,"
     " coalesce(s.file || ':' || s.line, '') AS source, count(DISTINCT a.rank) AS ranks,"
     " sum(a.calls) AS calls, printf('%.3f', sum(a.total_ns) / 1e6) AS total_ms,"
     " printf('%.2f', sum(a.total_ns) / 1e3 / sum(a.calls)) AS mean_us FROM aggregates a"
     " LEFT JOIN call_sites s ON s.rank = a.rank AND s.site = a.site AND s.frame = 0"
     " GROUP BY 1, 2, 3 ORDER BY sum(a.total_ns) DESC LIMIT 20"},
    {"heartbeats", "the latest heartbeat of each rank",
     "SELECT rank, state, function, comm_id, seq, printf('%.3f', (wall_ns - since_ns) / 1e9)"
     " AS in_call_s, instances_dropped FROM heartbeats h WHERE wall_ns = (SELECT max(wall_ns)"
     " FROM heartbeats WHERE rank = h.rank) ORDER BY rank"},
    {"communicators", "every communicator: id (equal on all members), how it was made, size",
     "SELECT comm_id, created_by, parent_id, size, count(*) AS ranks_recorded,"
     " max(members) AS members FROM communicators GROUP BY comm_id, created_by, parent_id, size"
     " ORDER BY min(rowid)"},
    {"settings", "the COMMTAP_* settings in force, and on how many ranks",
     "SELECT name, value, count(*) AS ranks FROM settings GROUP BY name, value ORDER BY name"},
    {"tables", "the tables of the trace database",
     "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"},
};
}  // namespace

const char* canned_query(const std::string& name) {
  for (const Canned& c : kCanned)
    if (name == c.name) return c.sql;
  return nullptr;
}

const char* canned_query_description(const std::string& name) {
  for (const Canned& c : kCanned)
    if (name == c.name) return c.description;
  return nullptr;
}

std::vector<std::string> canned_query_names() {
  std::vector<std::string> names;
  for (const Canned& c : kCanned) names.emplace_back(c.name);
  return names;
}

std::string format_table(const QueryResult& result) {
  std::vector<std::size_t> width(result.columns.size());
  for (std::size_t i = 0; i < result.columns.size(); ++i) width[i] = result.columns[i].size();
  for (const auto& row : result.rows)
    for (std::size_t i = 0; i < row.size(); ++i)
      width[i] = std::max(width[i], row[i] ? row[i]->size() : 4);
  std::ostringstream out;
  auto line = [&](auto cell) {
    for (std::size_t i = 0; i < width.size(); ++i) {
      const std::string text = cell(i);
      out << text;
      if (i + 1 < width.size()) out << std::string(width[i] - text.size() + 2, ' ');
    }
    out << '\n';
  };
  line([&](std::size_t i) { return result.columns[i]; });
  line([&](std::size_t i) { return std::string(width[i], '-'); });
  for (const auto& row : result.rows)
    line([&](std::size_t i) { return row[i] ? *row[i] : std::string("NULL"); });
  return out.str();
}

std::string format_json(const QueryResult& result) {
  // Written value by value (no JSON tree of the whole result beside it).
  auto quote = [](const std::string& text) {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  std::string out = "[";
  for (std::size_t r = 0; r < result.rows.size(); ++r) {
    out += r == 0 ? "\n  {" : ",\n  {";
    const auto& row = result.rows[r];
    for (std::size_t i = 0; i < row.size(); ++i) {
      out += (i == 0 ? "\n    " : ",\n    ") + quote(result.columns[i]) + ": ";
      out += row[i] ? quote(*row[i]) : std::string("null");
    }
    out += row.empty() ? "}" : "\n  }";
  }
  return out + (result.rows.empty() ? "]\n" : "\n]\n");
}

std::string format_raw(const QueryResult& result) {
  std::string out;
  for (const auto& row : result.rows) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (i > 0) out += '|';
      if (row[i]) out += *row[i];
    }
    out += '\n';
  }
  return out;
}

}  // namespace commtap::analyzer
