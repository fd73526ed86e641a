#include "analyzer/trace/untrusted_input.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "analyzer/trace/trace_files.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::analyzer {

// ---- Text -------------------------------------------------------------------------------------

namespace {

void append_escape(std::string& out, unsigned value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  out += {'\\', 'x', kHex[(value >> 4) & 15], kHex[value & 15]};
}

// The length of the valid UTF-8 sequence at the start of `s` and its code point, or 0.
std::size_t utf8_sequence(std::string_view s, unsigned& code) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned lead = byte(0);
  std::size_t length;
  unsigned least;
  if (lead < 0x80) {
    code = lead;
    return 1;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, code = lead & 0x1F, least = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, code = lead & 0x0F, least = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, code = lead & 0x07, least = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < length) return 0;
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i) & 0x3F);
  }
  // Overlong forms, UTF-16 surrogates and code points past Unicode are not UTF-8.
  if (code < least || (code >= 0xD800 && code <= 0xDFFF) || code > 0x10FFFF) return 0;
  return length;
}

}  // namespace

std::string clean_text(std::string_view text, bool keep_newlines) {
  // The common case, printable ASCII, as it is (this runs for every text value the analyzer reads).
  if (std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7F; }))
    return std::string(text);
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    unsigned code = 0;
    const std::size_t length = utf8_sequence(text, code);
    if (length == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD for one byte of an invalid sequence
      text.remove_prefix(1);
      continue;
    }
    if ((code < 0x20 && !(keep_newlines && code == '\n')) || code == 0x7F ||
        (code >= 0x80 && code <= 0x9F))
      append_escape(out, code);
    else
      out.append(text.substr(0, length));
    text.remove_prefix(length);
  }
  return out;
}

// ---- Which directory entries are read -----------------------------------------------------------

namespace {
std::atomic<bool> g_follow_symlinks{false};

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISREG(mode)) return "a file";
  return "of an unknown type";
}
}  // namespace

void set_follow_symlinks(bool follow) {
  g_follow_symlinks = follow;
}
bool follow_symlinks() {
  return g_follow_symlinks;
}

InputFile check_input_file(const std::string& path, bool directory) {
  InputFile in;
  struct stat entry {};
  if (::lstat(path.c_str(), &entry) != 0) {
    in.why_not = std::strerror(errno);
    return in;
  }
  struct stat file = entry;
  in.read_as = path;
  if (S_ISLNK(entry.st_mode)) {
    if (!follow_symlinks()) {
      in.why_not = "a symbolic link (followed only with --follow-symlinks)";
      return in;
    }
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr || ::stat(real, &file) != 0) {
      in.why_not = std::string("a symbolic link to nothing readable: ") + std::strerror(errno);
      std::free(real);
      return in;
    }
    in.read_as = real;
    std::free(real);
    if (::geteuid() == 0 && file.st_uid != entry.st_uid) {
      in.why_not = "a symbolic link to another owner's file or directory (never followed as root)";
      return in;
    }
  }
  if (directory ? !S_ISDIR(file.st_mode) : !S_ISREG(file.st_mode)) {
    in.why_not = std::string(kind_of(file.st_mode)) +
                 (directory ? ", not a directory" : ", not a regular file");
    return in;
  }
  in.device = file.st_dev;
  in.inode = file.st_ino;
  return in;
}

std::uint64_t allocated_bytes(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) return 0;
  return static_cast<std::uint64_t>(info.st_blocks) * 512;
}

// ---- How SQLite reads them ----------------------------------------------------------------------

namespace {

// Every file SQLite opens in this process (the database, its journals, -wal and -shm) is opened
// with O_NOFOLLOW and O_NONBLOCK, and refused unless it is a regular file or a directory (SQLite
// opens a database's directory to sync it): a symlink planted at a journal's name cannot redirect
// a read or a write, and a FIFO swapped in after a directory listing cannot block the analysis.
// SQLite's unix VFS lets a program replace its system calls for exactly such purposes.
// A reader's own descriptor (ReaderFile), named /proc/self/fd/N: that magic link leads to the
// open file itself, not through any name, so it is followed.
bool own_descriptor(const char* path) {
  static constexpr char kPrefix[] = "/proc/self/fd/";
  if (std::strncmp(path, kPrefix, sizeof kPrefix - 1) != 0) return false;
  const char* digits = path + sizeof kPrefix - 1;
  return *digits != '\0' && std::strspn(digits, "0123456789") == std::strlen(digits);
}

int guarded_open(const char* path, int flags, int mode) {
  // SQLite itself asks for O_NOFOLLOW on every open.
  const int fd = ::open(
      path, (own_descriptor(path) ? flags & ~O_NOFOLLOW : flags | O_NOFOLLOW) | O_NONBLOCK, mode);
  if (fd < 0) return fd;
  struct stat info {};
  const bool usable =
      ::fstat(fd, &info) == 0 &&
      (S_ISREG(info.st_mode) || S_ISDIR(info.st_mode) ||
       (S_ISCHR(info.st_mode) && std::strcmp(path, "/dev/urandom") == 0));  // SQLite's seed
  if (!usable) {
    ::close(fd);
    errno = ENXIO;
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

}  // namespace

void guard_sqlite_opens() {
  static std::once_flag once;
  std::call_once(once, [] {
    sqlite3_vfs* vfs = sqlite3_vfs_find("unix");
    if (vfs != nullptr && vfs->iVersion >= 3 && vfs->xSetSystemCall != nullptr)
      vfs->xSetSystemCall(vfs, "open", reinterpret_cast<sqlite3_syscall_ptr>(guarded_open));
  });
}

namespace {

constexpr std::int64_t kNoDeadline = INT64_MAX;
thread_local std::int64_t t_deadline_ns = kNoDeadline;

std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int past_deadline(void*) {
  return t_deadline_ns != kNoDeadline && steady_now_ns() > t_deadline_ns ? 1 : 0;
}

}  // namespace

Deadline::Deadline(double seconds) : saved_ns_(t_deadline_ns) {
  if (seconds <= 0) return;
  const std::int64_t at = steady_now_ns() + static_cast<std::int64_t>(std::min(seconds, 1e9) * 1e9);
  t_deadline_ns = std::min(t_deadline_ns, at);
}
Deadline::At Deadline::current() {
  return {t_deadline_ns};
}
Deadline::Deadline(At at) : saved_ns_(t_deadline_ns) {
  t_deadline_ns = std::min(t_deadline_ns, at.steady_ns);
}
Deadline::~Deadline() {
  t_deadline_ns = saved_ns_;
}
bool Deadline::passed() {
  return past_deadline(nullptr) != 0;
}

double default_job_seconds(std::uint64_t bytes) {
  return 30.0 + 2.0 * static_cast<double>(bytes) / (1024.0 * 1024.0);
}

double job_time_limit(const std::vector<std::string>& files, double configured) {
  if (configured > 0) return configured;
  std::uint64_t bytes = 0;
  for (const std::string& file : files) bytes += allocated_bytes(file);
  return default_job_seconds(bytes);
}

double job_time_limit(const std::string& path, double configured) {
  if (configured > 0) return configured;
  std::vector<std::string> files;
  std::string ignored;
  job_files(path, true, files, ignored);
  return job_time_limit(files, configured);
}

void harden_connection(sqlite3* db, bool allow_views) {
  guard_sqlite_opens();
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  if (!allow_views) sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  // Far above anything commtap writes (its longest values are command lines and symbols).
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 64 << 20);
  sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 1 << 20);
  sqlite3_limit(db, SQLITE_LIMIT_EXPR_DEPTH, 200);
  sqlite3_limit(db, SQLITE_LIMIT_COMPOUND_SELECT, 50);
  sqlite3_limit(db, SQLITE_LIMIT_FUNCTION_ARG, 16);
  sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 2);
  sqlite3_limit(db, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000);
  sqlite3_limit(db, SQLITE_LIMIT_VARIABLE_NUMBER, 100);
  sqlite3_limit(db, SQLITE_LIMIT_TRIGGER_DEPTH, 1);
  sqlite3_progress_handler(db, 1000, past_deadline, nullptr);
}

namespace {

bool each_text_row(sqlite3* db, const std::string& sql,
                   const std::function<void(sqlite3_stmt*)>& row, std::string& error) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    error = sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
    return false;
  }
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) row(stmt);
  if (rc != SQLITE_DONE) error = sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE;
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// The time columns (INTEGER, `*_ns`) of each table of the current schema, and whether a value
// may be negative (offsets and one-way times between two clocks). A plausible time lies within
// +-4e18, so that a sum or difference of two stays inside 64 bits.
struct TimeColumn {
  std::string name;
  bool may_be_negative;
};

const std::vector<std::pair<std::string, std::vector<TimeColumn>>>& time_columns() {
  static const auto columns = [] {
    std::vector<std::pair<std::string, std::vector<TimeColumn>>> out;
    sqlite3* db = nullptr;
    sqlite3_open(":memory:", &db);
    sqlite3_exec(db, monitor::schema_sql(), nullptr, nullptr, nullptr);
    for (const auto& [table, names] : current_tables()) {
      auto& entry = out.emplace_back(table, std::vector<TimeColumn>{});
      std::string ignored;
      each_text_row(
          db, "PRAGMA table_info(\"" + table + "\")",
          [&](sqlite3_stmt* s) {
            const std::string column = column_text(s, 1);
            if (lower(column_text(s, 2)) != "integer" || !column.ends_with("_ns")) return;
            entry.second.push_back({column, column.find("offset") != std::string::npos ||
                                                column.find("oneway") != std::string::npos});
          },
          ignored);
    }
    sqlite3_close(db);
    return out;
  }();
  return columns;
}

}  // namespace

std::string hostile_schema_problem(sqlite3* db, const std::string& schema) {
  std::string problem, error;
  const bool read = each_text_row(
      db, "SELECT type, name, coalesce(sql, '') FROM \"" + schema + "\".sqlite_master",
      [&](sqlite3_stmt* s) {
        if (!problem.empty()) return;
        const std::string type = column_text(s, 0), name = column_text(s, 1);
        const std::string sql = lower(column_text(s, 2));
        const bool ours = std::any_of(current_tables().begin(), current_tables().end(),
                                      [&](const auto& t) { return lower(t.first) == lower(name); });
        if (type == "trigger")
          problem = "holds a trigger (" + name + "), which commtap never writes";
        else if (type == "view" && ours)
          problem = "its table " + name + " is a view, which commtap never writes";
        else if (type == "table" && sql.find("virtual") != std::string::npos &&
                 sql.find("virtual") < sql.find('('))
          problem = "holds a virtual table (" + name + "), which commtap never writes";
      },
      error);
  if (!read) return "cannot read its schema: " + error;
  return problem;
}

namespace {

// A table's primary key columns in key order, and whether an index carries the key (not where the
// key is the rowid itself).
struct TableKey {
  std::vector<std::string> columns;
  bool indexed = false;
};

TableKey table_key(sqlite3* db, const std::string& schema, const std::string& table) {
  TableKey key;
  std::vector<std::pair<int, std::string>> ordered;
  std::string ignored;
  const std::string prefix = "PRAGMA \"" + schema + "\".";
  each_text_row(
      db, prefix + "table_info(\"" + table + "\")",
      [&](sqlite3_stmt* s) {
        if (const int pk = sqlite3_column_int(s, 5); pk > 0)
          ordered.emplace_back(pk, column_text(s, 1));
      },
      ignored);
  std::sort(ordered.begin(), ordered.end());
  for (auto& [position, name] : ordered) key.columns.push_back(lower(name));
  each_text_row(
      db, prefix + "index_list(\"" + table + "\")",
      [&](sqlite3_stmt* s) { key.indexed |= column_text(s, 3) == "pk"; }, ignored);
  return key;
}

const std::vector<std::pair<std::string, TableKey>>& current_keys() {
  static const auto keys = [] {
    std::vector<std::pair<std::string, TableKey>> out;
    sqlite3* db = nullptr;
    sqlite3_open(":memory:", &db);
    sqlite3_exec(db, monitor::schema_sql(), nullptr, nullptr, nullptr);
    for (const auto& [table, names] : current_tables())
      out.emplace_back(table, table_key(db, "main", table));
    sqlite3_close(db);
    return out;
  }();
  return keys;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::string missing_keys_problem(sqlite3* db, const std::string& schema) {
  std::string problem, error;
  const bool read = each_text_row(
      db,
      "SELECT name FROM \"" + schema +
          "\".sqlite_master WHERE type = 'table' AND name LIKE 'sqlite\\_stat%' ESCAPE '\\'",
      [&](sqlite3_stmt* s) {
        if (problem.empty())
          problem = "holds planner statistics (" + column_text(s, 0) +
                    "), which commtap never writes (they can steer every lookup to a scan)";
      },
      error);
  if (!read) return "cannot read its schema: " + error;
  if (!problem.empty()) return problem;
  for (const auto& [table, expected] : current_keys()) {
    if (table_columns(db, schema, table).empty()) continue;  // an older version's file
    const TableKey found = table_key(db, schema, table);
    if (found.columns != expected.columns || (expected.indexed && !found.indexed))
      return "its table " + table + " lacks commtap's primary key (" + joined(expected.columns) +
             ") or its index, which every commtap writer creates (without it every lookup scans "
             "the table)";
  }
  return "";
}

bool plausible_time(sqlite3_stmt* stmt, int i, bool may_be_negative) {
  const int type = sqlite3_column_type(stmt, i);
  if (type == SQLITE_NULL) return true;
  if (type != SQLITE_INTEGER && type != SQLITE_FLOAT) return false;
  const double value = sqlite3_column_double(stmt, i);
  return value <= 4e18 && value >= (may_be_negative ? -4e18 : 0.0);
}

std::string implausible_table_problem(const std::string& table) {
  return "table " + table +
         " holds a time no commtap writer writes (outside 0..4e18 ns, or not a number)";
}

std::string implausible_values_problem(sqlite3* db, const std::string& schema,
                                       const std::vector<std::string>& read_checked) {
  // 4e18 ns is the year 2096 as a wall-clock time: any real time fits, and two add up in 64 bits.
  static constexpr char kMost[] = "4000000000000000000";
  for (const auto& [table, columns] : time_columns()) {
    if (std::find(read_checked.begin(), read_checked.end(), table) != read_checked.end()) continue;
    const std::vector<std::string> in_file = table_columns(db, schema, table);
    std::string condition;
    // Only times enter arithmetic; ids and counts are compared or summed by SQLite. Text and
    // blobs sort after every number, so the range test refuses them too.
    for (const TimeColumn& column : columns) {
      if (std::find(in_file.begin(), in_file.end(), column.name) == in_file.end()) continue;
      condition += std::string(condition.empty() ? "" : " OR ") + "\"" + column.name +
                   "\" NOT BETWEEN " + (column.may_be_negative ? std::string("-") + kMost : "0") +
                   " AND " + kMost;
    }
    if (condition.empty()) continue;
    bool found = false;
    std::string error;
    if (!each_text_row(
            db,
            "SELECT 1 FROM \"" + schema + "\".\"" + table + "\" WHERE " + condition + " LIMIT 1",
            [&](sqlite3_stmt*) { found = true; }, error))
      return "cannot check table " + table + ": " + error;
    if (found) return implausible_table_problem(table);
  }
  return "";
}

}  // namespace commtap::analyzer
