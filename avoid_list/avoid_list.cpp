// The avoid list's one-line form (rank 0's broadcast) and its table in a findings store:
// written per job by the analyzer, read by a later job's collectives::start.
#include "avoid_list/avoid_list.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace commtap::avoid_list {

namespace {

// The store's table: one row per host or link of a finding.
constexpr const char* kCreateTable =
    "CREATE TABLE IF NOT EXISTS avoid_list (format_version INTEGER NOT NULL, "
    "job_id TEXT NOT NULL, finding_kind TEXT NOT NULL, subject TEXT NOT NULL, "
    "from_host TEXT NOT NULL, to_host TEXT, extra_latency_s REAL NOT NULL DEFAULT 0, "
    "extra_s_per_byte REAL NOT NULL DEFAULT 0, last_seen_ns INTEGER NOT NULL)";

// A host name as DNS and /etc/hosts allow it (letters, digits, '-', '.', '_'), at most 255
// bytes: anything else in a store (a forged trace's host with ',' or '>', which would add entries
// to the one-line form, or a name of megabytes) is left out.
bool plausible_host(const std::string& name) {
  if (name.empty() || name.size() > kMaxHostName) return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '.' || c == '_'))
      return false;
  return true;
}

std::string text_of(sqlite3_stmt* statement, int column) {
  const unsigned char* text = sqlite3_column_text(statement, column);
  return text != nullptr ? reinterpret_cast<const char*>(text) : "";
}

}  // namespace

std::string encode(const AvoidList& list) {
  std::string text;
  auto separate = [&] {
    if (!text.empty()) text += ',';
  };
  for (const std::string& host : list.hosts) {
    if (!plausible_host(host)) continue;
    separate();
    text += host;
  }
  for (const Link& link : list.links) {
    if (!plausible_host(link.from) || !plausible_host(link.to)) continue;
    char figures[64];
    std::snprintf(figures, sizeof figures, ">%.9g>%.9g", link.extra_latency_s,
                  link.extra_s_per_byte);
    separate();
    text += link.from + ">" + link.to + figures;
  }
  return text;
}

AvoidList decode(const std::string& text) {
  AvoidList list;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string entry = text.substr(begin, comma - begin);
    begin = comma + 1;
    const std::size_t a = entry.find('>');
    if (a == std::string::npos) {
      if (!entry.empty()) list.hosts.push_back(entry);
      continue;
    }
    const std::size_t b = entry.find('>', a + 1);
    const std::size_t c = b == std::string::npos ? b : entry.find('>', b + 1);
    if (c == std::string::npos || a == 0 || b == a + 1) continue;
    list.links.push_back({entry.substr(0, a), entry.substr(a + 1, b - a - 1),
                          std::atof(entry.substr(b + 1, c - b - 1).c_str()),
                          std::atof(entry.substr(c + 1).c_str())});
  }
  return list;
}

bool replace_job_entries(sqlite3* db, const std::string& job_id,
                         const std::vector<StoredEntry>& entries, std::string& error) {
  sqlite3_stmt* remove = nullptr;
  sqlite3_stmt* insert = nullptr;
  bool ok =
      sqlite3_exec(db, kCreateTable, nullptr, nullptr, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "DELETE FROM avoid_list WHERE job_id = ?1", -1, &remove, nullptr) ==
          SQLITE_OK &&
      sqlite3_prepare_v2(db, "INSERT INTO avoid_list VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                         -1, &insert, nullptr) == SQLITE_OK;
  if (ok) {
    sqlite3_bind_text(remove, 1, job_id.c_str(), -1, SQLITE_TRANSIENT);
    ok = sqlite3_step(remove) == SQLITE_DONE;
  }
  auto row = [&](const StoredEntry& entry, const std::string& from, const std::string* to,
                 double latency, double per_byte) {
    sqlite3_reset(insert);
    sqlite3_bind_int(insert, 1, kFormatVersion);
    sqlite3_bind_text(insert, 2, job_id.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert, 3, entry.finding_kind.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert, 4, entry.subject.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(insert, 5, from.c_str(), -1, SQLITE_TRANSIENT);
    if (to != nullptr)
      sqlite3_bind_text(insert, 6, to->c_str(), -1, SQLITE_TRANSIENT);
    else
      sqlite3_bind_null(insert, 6);
    sqlite3_bind_double(insert, 7, latency);
    sqlite3_bind_double(insert, 8, per_byte);
    sqlite3_bind_int64(insert, 9, static_cast<sqlite3_int64>(entry.last_seen_ns));
    return sqlite3_step(insert) == SQLITE_DONE;
  };
  for (const StoredEntry& entry : entries) {
    for (const std::string& host : entry.avoid.hosts)
      if (ok) ok = row(entry, host, nullptr, 0, 0);
    for (const Link& link : entry.avoid.links)
      if (ok) ok = row(entry, link.from, &link.to, link.extra_latency_s, link.extra_s_per_byte);
  }
  if (!ok) error = sqlite3_errmsg(db);
  sqlite3_finalize(remove);
  sqlite3_finalize(insert);
  return ok;
}

bool read_recent(const std::string& path, std::uint64_t since_ns, AvoidList& list,
                 std::string& error) {
  list = {};
  // Checked before SQLite opens it: a FIFO would block rank 0 in MPI_Init, a device or a
  // directory is no store, and a store past kMaxStoreBytes is not one a cron run writes.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    error = std::string("cannot open it: ") + std::strerror(errno);
    return false;
  }
  struct stat info {};
  const bool stat_ok = ::fstat(fd, &info) == 0;
  ::close(fd);
  if (!stat_ok || !S_ISREG(info.st_mode)) {
    error = "not a regular file";
    return false;
  }
  if (static_cast<std::uint64_t>(info.st_size) > kMaxStoreBytes) {
    error = "larger than " + std::to_string(kMaxStoreBytes >> 20) + " MiB, not a findings store";
    return false;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOFOLLOW, nullptr) !=
      SQLITE_OK) {
    error = db != nullptr ? sqlite3_errmsg(db) : "cannot open";
    sqlite3_close(db);
    return false;
  }
  // The store may come from another user's cron job: no triggers, views or schema tricks run.
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 1 << 16);  // a longer value is an error, not 600 MB
  sqlite3_busy_timeout(db, 5000);
  sqlite3_stmt* exists = nullptr;
  bool ok = sqlite3_prepare_v2(db,
                               "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = "
                               "'avoid_list'",
                               -1, &exists, nullptr) == SQLITE_OK;
  const bool has_table = ok && sqlite3_step(exists) == SQLITE_ROW;
  sqlite3_finalize(exists);
  sqlite3_stmt* select = nullptr;
  if (ok && has_table)
    ok = sqlite3_prepare_v2(db,
                            "SELECT from_host, to_host, extra_latency_s, extra_s_per_byte FROM "
                            "avoid_list WHERE format_version = ?1 AND last_seen_ns > ?2 "
                            "AND length(from_host) <= 255 AND coalesce(length(to_host), 0) <= 255 "
                            "ORDER BY finding_kind, subject, rowid LIMIT ?3",
                            -1, &select, nullptr) == SQLITE_OK;
  if (ok && has_table) {
    sqlite3_bind_int(select, 1, kFormatVersion);
    sqlite3_bind_int64(select, 2, static_cast<sqlite3_int64>(since_ns));
    sqlite3_bind_int(select, 3, kMaxRows);
    int step;
    while ((step = sqlite3_step(select)) == SQLITE_ROW) {
      std::string from = text_of(select, 0);
      if (!plausible_host(from)) continue;
      if (sqlite3_column_type(select, 1) == SQLITE_NULL) {
        list.hosts.push_back(std::move(from));
        continue;
      }
      std::string to = text_of(select, 1);
      if (!plausible_host(to)) continue;
      list.links.push_back({std::move(from), std::move(to), sqlite3_column_double(select, 2),
                            sqlite3_column_double(select, 3)});
    }
    ok = step == SQLITE_DONE;
  }
  if (!ok) error = sqlite3_errmsg(db);
  sqlite3_finalize(select);
  sqlite3_close(db);
  return ok;
}

}  // namespace commtap::avoid_list
