// analyzer/query/job_database: reading trace databases whole (`commtap query`, `merge`). A job is
// a directory of rank-<N>.db files (read while the job runs or after) or one database file;
// either way it is loaded into one in-memory SQLite database with the monitor's schema, so every
// query sees all ranks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/trace/query_result.hpp"

struct sqlite3;

namespace commtap::analyzer {

class JobDatabase {
 public:
  // Loads `path` (a job directory or a .db file). A directory's merged job.db is used when
  // present and `prefer_merged`, else its rank-<N>.db files. On failure returns nullptr and
  // sets `error` to a message that names the offending file.
  static std::unique_ptr<JobDatabase> open(const std::string& path, std::string& error,
                                           bool prefer_merged = true);
  ~JobDatabase();
  JobDatabase(const JobDatabase&) = delete;
  JobDatabase& operator=(const JobDatabase&) = delete;

  // Runs one read-only statement. Statements that would modify the database are refused. With
  // `limits` (a statement a user typed), ATTACH, DETACH, pragmas other than the schema's listings
  // and functions that reach outside the database are refused too, and the statement stops at
  // the time and memory limits.
  struct Limits {
    double seconds = 60;
    std::int64_t memory_bytes = std::int64_t{1} << 30;
  };
  std::optional<QueryResult> query(const std::string& sql, std::string& error,
                                   const Limits* limits = nullptr) const;
  // Writes everything loaded to `path` as one database (replacing it only once complete).
  bool save(const std::string& path, std::string& error) const;
  // The rank files (or the one file) that were loaded.
  const std::vector<std::string>& sources() const { return sources_; }

 private:
  JobDatabase() = default;
  sqlite3* db_ = nullptr;
  std::vector<std::string> sources_;
};

// Canned queries by name ("calls", "ranks", "communicators", "settings", "tables"); nullptr if
// unknown.
const char* canned_query(const std::string& name);
// What a canned query shows, for `commtap query --list`.
const char* canned_query_description(const std::string& name);
std::vector<std::string> canned_query_names();

// Renders a result as aligned text columns, as a JSON array of objects, or raw for scripts
// (no header, '|' between values, empty for NULL, like the sqlite3 shell).
std::string format_table(const QueryResult& result);
std::string format_json(const QueryResult& result);
std::string format_raw(const QueryResult& result);

}  // namespace commtap::analyzer
