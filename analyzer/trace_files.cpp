#include "analyzer/trace_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "monitor/trace_schema.hpp"

namespace commtap::analyzer {

namespace fs = std::filesystem;

bool job_files(const std::string& path, bool prefer_merged, std::vector<std::string>& files,
               std::string& error) {
  files.clear();
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    files = {path};
    return true;
  }
  if (!fs::is_directory(path, ec)) {
    error = path + ": no such file or directory";
    return false;
  }
  const fs::path merged = fs::path(path) / "job.db";
  if (prefer_merged && fs::exists(merged, ec)) {
    files = {merged.string()};
    return true;
  }
  std::vector<std::pair<long, std::string>> found;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".db") continue;
    const std::string number = name.substr(5, name.size() - 8);
    if (number.empty() || number.size() > 9 ||
        !std::all_of(number.begin(), number.end(), ::isdigit))
      continue;
    found.emplace_back(std::stol(number), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  for (auto& [rank, file] : found) files.push_back(file);
  if (files.empty()) {
    error = path + (prefer_merged ? ": no rank-<N>.db or job.db files in this directory"
                                  : ": no rank-<N>.db files in this directory");
    return false;
  }
  return true;
}

std::string schema_version_problem(int version) {
  if (version == monitor::kSchemaVersion) return "";
  return "not a commtap trace database of this version (schema version " + std::to_string(version) +
         "; this commtap reads version " + std::to_string(monitor::kSchemaVersion) + ")";
}

std::string reader_uri(const std::string& path) {
  // A URI's path must not contain '?' or '#' unescaped, and '%' starts an escape.
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '?' || c == '#' || c == '%') {
      static constexpr char kHex[] = "0123456789ABCDEF";
      const auto byte = static_cast<unsigned char>(c);
      uri += {'%', kHex[byte >> 4], kHex[byte & 15]};
    } else {
      uri += c;
    }
  }
  // The file format's header: 16 bytes of magic, then at 18 and 19 the write and read versions,
  // 1 for a rollback journal and 2 for WAL.
  unsigned char header[20] = {};
  bool rollback = false;
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    rollback = ::pread(fd, header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) &&
               std::memcmp(header, "SQLite format 3", 16) == 0 && header[18] == 1 &&
               header[19] == 1;
    ::close(fd);
  }
  return uri + (rollback ? "?immutable=1" : "?mode=ro");
}

std::unique_ptr<TraceReader> TraceReader::open(const std::string& path, std::string& error) {
  auto reader = std::unique_ptr<TraceReader>(new TraceReader());
  reader->path_ = path;
  const std::string uri = reader_uri(path);
  if (sqlite3_open_v2(uri.c_str(), &reader->db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) !=
      SQLITE_OK) {
    error = path + ": " + (reader->db_ ? sqlite3_errmsg(reader->db_) : "cannot open");
    return nullptr;
  }
  sqlite3_busy_timeout(reader->db_, 2000);
  int version = -1;
  if (!reader->each(
          "PRAGMA user_version", {}, [&](sqlite3_stmt* s) { version = sqlite3_column_int(s, 0); },
          error))
    return nullptr;
  if (const std::string problem = schema_version_problem(version); !problem.empty()) {
    error = path + ": " + problem;
    return nullptr;
  }
  return reader;
}

TraceReader::~TraceReader() {
  sqlite3_close(db_);
}

bool TraceReader::each(const std::string& sql, std::initializer_list<std::int64_t> binds,
                       const std::function<void(sqlite3_stmt*)>& row, std::string& error) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    error = path_ + ": " + sqlite3_errmsg(db_);
    return false;
  }
  int index = 1;
  for (std::int64_t value : binds) sqlite3_bind_int64(stmt, index++, value);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) row(stmt);
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) {
    error = path_ + ": " + sqlite3_errmsg(db_);
    return false;
  }
  return true;
}

}  // namespace commtap::analyzer
