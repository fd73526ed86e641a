#include "analyzer/trace/trace_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include "analyzer/trace/untrusted_input.hpp"
#include "monitor/shared_fs.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::analyzer {

namespace fs = std::filesystem;

std::string column_text(sqlite3_stmt* s, int i) {
  const unsigned char* text = sqlite3_column_text(s, i);
  if (text == nullptr) return "";
  return clean_text(
      {reinterpret_cast<const char*>(text), static_cast<std::size_t>(sqlite3_column_bytes(s, i))});
}

bool job_files(const std::string& path, bool prefer_merged, std::vector<std::string>& files,
               std::string& error, std::vector<std::string>* skipped) {
  files.clear();
  std::error_code ec;
  // A path the user named is read as named (links followed, as `find -H` does); what a
  // directory holds is checked entry by entry.
  if (fs::is_regular_file(path, ec)) {
    files = {path};
    return true;
  }
  if (!fs::is_directory(path, ec)) {
    error = path + (fs::exists(path, ec) ? ": not a regular file or a directory"
                                         : ": no such file or directory");
    return false;
  }
  std::set<std::pair<dev_t, ino_t>> seen;
  auto accept = [&](const std::string& entry) {
    const InputFile in = check_input_file(entry);
    if (!in.why_not.empty()) {
      if (skipped) skipped->push_back(entry + ": skipped: " + in.why_not);
      return false;
    }
    if (!seen.insert({in.device, in.inode}).second) {
      if (skipped) skipped->push_back(entry + ": skipped: the same file as another rank file");
      return false;
    }
    files.push_back(in.read_as);
    return true;
  };
  const fs::path merged = fs::path(path) / "job.db";
  if (prefer_merged && fs::exists(fs::symlink_status(merged, ec)) && accept(merged.string()))
    return true;
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
  for (auto& [rank, file] : found) accept(file);
  if (files.empty()) {
    error = path + (prefer_merged ? ": no rank-<N>.db or job.db files in this directory"
                                  : ": no rank-<N>.db files in this directory");
    if (skipped && !skipped->empty()) error += " that can be read (" + skipped->front() + ")";
    return false;
  }
  return true;
}

std::string schema_version_problem(int version) {
  if (version >= monitor::kOldestReadableSchemaVersion && version <= monitor::kSchemaVersion)
    return "";
  return "not a commtap trace database of this version (schema version " + std::to_string(version) +
         "; this commtap reads versions " + std::to_string(monitor::kOldestReadableSchemaVersion) +
         " to " + std::to_string(monitor::kSchemaVersion) + ")";
}

std::vector<std::string> table_columns(sqlite3* db, const std::string& schema,
                                       const std::string& table) {
  std::vector<std::string> names;
  sqlite3_stmt* stmt = nullptr;
  const std::string sql = "PRAGMA \"" + schema + "\".table_info(\"" + table + "\")";
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK) {
    while (sqlite3_step(stmt) == SQLITE_ROW)
      names.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1)));
  }
  sqlite3_finalize(stmt);
  return names;
}

const std::vector<std::pair<std::string, std::vector<std::string>>>& current_tables() {
  static const auto tables = [] {
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    sqlite3* db = nullptr;
    if (sqlite3_open(":memory:", &db) == SQLITE_OK &&
        sqlite3_exec(db, monitor::schema_sql(), nullptr, nullptr, nullptr) == SQLITE_OK) {
      sqlite3_stmt* stmt = nullptr;
      sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
                         -1, &stmt, nullptr);
      while (sqlite3_step(stmt) == SQLITE_ROW)
        out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)),
                         std::vector<std::string>{});
      sqlite3_finalize(stmt);
      for (auto& [table, columns] : out) columns = table_columns(db, "main", table);
    }
    sqlite3_close(db);
    return out;
  }();
  return tables;
}

namespace {

// An older version's file, read as the current schema: each table it lacks, or lacks columns of,
// is shadowed by a temporary view (the temp schema comes first in name lookup) with the current
// columns, NULL where the file has none. Nothing is written to the file.
bool shadow_older_schema(sqlite3* db, std::string& error) {
  std::string sql;
  for (const auto& [table, columns] : current_tables()) {
    const std::vector<std::string> in_file = table_columns(db, "main", table);
    std::string select;
    bool complete = true;
    for (const std::string& column : columns) {
      const bool has = std::find(in_file.begin(), in_file.end(), column) != in_file.end();
      complete = complete && has;
      select +=
          std::string(select.empty() ? "" : ", ") + (has ? "" : "NULL AS ") + "\"" + column + "\"";
    }
    if (complete) continue;
    sql += "CREATE TEMP VIEW \"" + table + "\" AS SELECT " + select +
           (in_file.empty() ? " WHERE 0;" : " FROM main.\"" + table + "\";");
  }
  char* message = nullptr;
  if (sql.empty() || sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &message) == SQLITE_OK)
    return true;
  error = message ? message : sqlite3_errmsg(db);
  sqlite3_free(message);
  return false;
}

// A VFS for immutable readers that waits for a file's size to catch up with its header. A client
// that caches attributes (FUSE for a second by default) can report a snapshot that replaced a
// smaller one with the old, smaller size; SQLite then finds more pages in the header than in the
// file and calls it malformed (seen on sshfs in tests/mpi/shared_fs.sh). The open file does not
// change (it was complete before its rename), so the size the same descriptor reports is polled
// until it covers the header's page count, for up to 2 s. Only xOpen and xFileSize differ from
// the default VFS; every other call is passed through.
//
// It is also how a reader sees a rank file it opened itself (ReaderFile): the name is
// /proc/self/fd/N (the literal VFS keeps it as it is, so SQLite opens the very file the reader
// checked), and page 1 is read with its file format bytes (18, 19) as a rollback-journal file's,
// so that a WAL file whose -wal holds nothing is read immutable without SQLite looking for a -wal
// or a -shm by name. Patience only with the URI parameter patient=1.
//
// Its files are immutable, which SQLite never locks: they are opened through "unix-none", whose
// files keep no entry in SQLite's process-wide list of open inodes. Through "unix", every open
// walked that list twice (to share an inode's locks and to reuse a closed descriptor), a walk
// over every file the pool keeps open: with 2,484 kept and the rest of 4,000 files opened at each
// pass, a quarter of the analysis's CPU (docs/benchmarks.md).
struct PatientFile {
  sqlite3_file base;
  sqlite3_file* real;  // the default VFS's file, allocated right after this struct
  bool patient;
};

sqlite3_vfs* g_default_vfs = nullptr;
sqlite3_io_methods g_patient_methods{};

sqlite3_file* real_file(sqlite3_file* file) {
  return reinterpret_cast<PatientFile*>(file)->real;
}

int patient_file_size(sqlite3_file* file, sqlite3_int64* size) {
  sqlite3_file* real = real_file(file);
  int rc = real->pMethods->xFileSize(real, size);
  if (!reinterpret_cast<PatientFile*>(file)->patient) return rc;
  unsigned char header[100];
  if (rc != SQLITE_OK || *size < static_cast<sqlite3_int64>(sizeof header) ||
      real->pMethods->xRead(real, header, sizeof header, 0) != SQLITE_OK)
    return rc;
  // At 16 the page size (1 means 65536); at 28 the size in pages, valid when the change counter
  // at 24 equals the version-valid-for number at 92.
  if (std::memcmp(header + 24, header + 92, 4) != 0) return rc;
  const sqlite3_int64 page_size =
      header[16] == 0 && header[17] == 1 ? 65536 : (header[16] << 8) | header[17];
  const sqlite3_int64 pages =
      (sqlite3_int64{header[28]} << 24) | (header[29] << 16) | (header[30] << 8) | header[31];
  for (int poll = 0; poll < 40 && rc == SQLITE_OK && *size < page_size * pages; ++poll) {
    ::usleep(50'000);
    rc = real->pMethods->xFileSize(real, size);
  }
  return rc;
}

void set_patient_methods(const sqlite3_io_methods& real) {
  const int version = std::min(3, real.iVersion);
  sqlite3_io_methods& m = g_patient_methods;
  m.iVersion = version;
  m.xClose = [](sqlite3_file* f) { return real_file(f)->pMethods->xClose(real_file(f)); };
  m.xRead = [](sqlite3_file* f, void* out, int amount, sqlite3_int64 offset) {
    const int rc = real_file(f)->pMethods->xRead(real_file(f), out, amount, offset);
    if (rc == SQLITE_OK && offset <= 18 && offset + amount >= 20) {
      auto* bytes = static_cast<unsigned char*>(out) + (18 - offset);
      if (bytes[0] == 2 && bytes[1] == 2) bytes[0] = bytes[1] = 1;
    }
    return rc;
  };
  m.xWrite = [](sqlite3_file* f, const void* in, int amount, sqlite3_int64 offset) {
    return real_file(f)->pMethods->xWrite(real_file(f), in, amount, offset);
  };
  m.xTruncate = [](sqlite3_file* f, sqlite3_int64 size) {
    return real_file(f)->pMethods->xTruncate(real_file(f), size);
  };
  m.xSync = [](sqlite3_file* f, int flags) {
    return real_file(f)->pMethods->xSync(real_file(f), flags);
  };
  m.xFileSize = patient_file_size;
  m.xLock = [](sqlite3_file* f, int lock) {
    return real_file(f)->pMethods->xLock(real_file(f), lock);
  };
  m.xUnlock = [](sqlite3_file* f, int lock) {
    return real_file(f)->pMethods->xUnlock(real_file(f), lock);
  };
  m.xCheckReservedLock = [](sqlite3_file* f, int* out) {
    return real_file(f)->pMethods->xCheckReservedLock(real_file(f), out);
  };
  m.xFileControl = [](sqlite3_file* f, int op, void* arg) {
    return real_file(f)->pMethods->xFileControl(real_file(f), op, arg);
  };
  m.xSectorSize = [](sqlite3_file* f) { return real_file(f)->pMethods->xSectorSize(real_file(f)); };
  m.xDeviceCharacteristics = [](sqlite3_file* f) {
    return real_file(f)->pMethods->xDeviceCharacteristics(real_file(f));
  };
  if (version < 2) return;
  // Shared memory and memory-mapped pages where the real file has them ("unix-none" has no
  // shared memory: SQLite then reads no WAL, which an immutable file never needs).
  if (real.xShmMap != nullptr) {
    m.xShmMap = [](sqlite3_file* f, int region, int size, int extend, void volatile** out) {
      return real_file(f)->pMethods->xShmMap(real_file(f), region, size, extend, out);
    };
    m.xShmLock = [](sqlite3_file* f, int offset, int n, int flags) {
      return real_file(f)->pMethods->xShmLock(real_file(f), offset, n, flags);
    };
    m.xShmBarrier = [](sqlite3_file* f) { real_file(f)->pMethods->xShmBarrier(real_file(f)); };
    m.xShmUnmap = [](sqlite3_file* f, int remove) {
      return real_file(f)->pMethods->xShmUnmap(real_file(f), remove);
    };
  }
  if (version < 3) return;
  if (real.xFetch == nullptr) {
    m.iVersion = 2;  // SQLite maps pages through any version-3 file: none where it has no map
    return;
  }
  m.xFetch = [](sqlite3_file* f, sqlite3_int64 offset, int amount, void** out) {
    return real_file(f)->pMethods->xFetch(real_file(f), offset, amount, out);
  };
  m.xUnfetch = [](sqlite3_file* f, sqlite3_int64 offset, void* page) {
    return real_file(f)->pMethods->xUnfetch(real_file(f), offset, page);
  };
}

int patient_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags,
                 int* out_flags) {
  auto* patient = reinterpret_cast<PatientFile*>(file);
  patient->real = reinterpret_cast<sqlite3_file*>(patient + 1);
  patient->patient = sqlite3_uri_boolean(name, "patient", 0) != 0;
  const int rc = g_default_vfs->xOpen(g_default_vfs, name, patient->real, flags, out_flags);
  if (patient->real->pMethods == nullptr) {
    patient->base.pMethods = nullptr;
    return rc;
  }
  // Every file of the default VFS has the same methods; their version is known from the first.
  static std::once_flag once;
  std::call_once(once, [&] { set_patient_methods(*patient->real->pMethods); });
  patient->base.pMethods = &g_patient_methods;
  return rc;
}

// Registers the VFS once; returns its name.
const char* patient_vfs() {
  static std::once_flag once;
  static sqlite3_vfs vfs{};
  std::call_once(once, [] {
    g_default_vfs = sqlite3_vfs_find(monitor::literal_vfs("unix-none"));
    vfs = *g_default_vfs;
    vfs.pNext = nullptr;
    vfs.zName = "commtap-patient";
    vfs.szOsFile = static_cast<int>(sizeof(PatientFile)) + g_default_vfs->szOsFile;
    vfs.xOpen = patient_open;
    sqlite3_vfs_register(&vfs, 0);
  });
  return "commtap-patient";
}

}  // namespace

namespace {

// A URI's path must not contain '?' or '#' unescaped, and '%' starts an escape.
std::string file_uri(const std::string& path) {
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
  return uri;
}

}  // namespace

std::string reader_uri(const std::string& path) {
  const std::string uri = file_uri(path);
  // The file format's header: at 18 and 19 the write and read versions, 1 for a rollback
  // journal and 2 for WAL.
  unsigned char header[20] = {};
  bool rollback = false;
  if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
      fd >= 0) {
    rollback = ::pread(fd, header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) &&
               std::memcmp(header, "SQLite format 3", 16) == 0 && header[18] == 1 &&
               header[19] == 1;
    ::close(fd);
  }
  if (!rollback) return uri + "?mode=ro";
  // Only a shared filesystem's client can report a stale size (see PatientFile): a local file's
  // header and size disagree only when the file is damaged, and then nothing is worth waiting for.
  const std::string directory =
      fs::path(path).has_parent_path() ? fs::path(path).parent_path().string() : std::string(".");
  if (monitor::filesystem_of(directory).shared)
    return uri + "?immutable=1&vfs=" + patient_vfs() + "&patient=1";
  return uri + "?immutable=1";
}

namespace {

// The first bytes of every rollback journal SQLite writes.
constexpr unsigned char kJournalMagic[8] = {0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7};

// `name` in the directory `dir_fd`, opened read-only if it is a regular file (never a link, a
// FIFO or a device), or -1.
int open_regular_at(int dir_fd, const std::string& name, struct stat& info) {
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -1;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

bool read_exactly(int fd, void* out, std::size_t size, off_t offset) {
  return ::pread(fd, out, size, offset) == static_cast<ssize_t>(size);
}

// Copies the open regular file `in` to the new file `to`, at most `budget` bytes; false otherwise.
bool copy_bounded(int in, const struct stat& info, const std::string& to, std::uint64_t& budget) {
  // Holes would be written out as zeros: a sparse file's size is not what it occupies.
  const auto size = static_cast<std::uint64_t>(info.st_size);
  bool ok = size <= budget && size <= static_cast<std::uint64_t>(info.st_blocks) * 512 + (1 << 20);
  const int out =
      ok ? ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
  ok = out >= 0;
  char buffer[1 << 16];
  std::uint64_t copied = 0;
  while (ok && copied < size) {
    // Never past the size it had: a live WAL grows while it is copied (a read of a whole buffer
    // there returned more than was left and failed the copy, now and then, mpi.heartbeat).
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(sizeof buffer, size - copied));
    const ssize_t n = ::pread(in, buffer, want, static_cast<off_t>(copied));
    if (n == 0) break;
    ok = n > 0 && ::write(out, buffer, static_cast<std::size_t>(n)) == n;
    copied += n > 0 ? static_cast<std::uint64_t>(n) : 0;
  }
  if (out >= 0) ::close(out);
  budget -= std::min(budget, copied);
  return ok;
}

}  // namespace

// The file is opened here, once, through its directory's descriptor and without following a
// link; SQLite is then given that descriptor (/proc/self/fd/N) or a private copy made from the
// descriptors, never the file's name: nothing a user does to the job directory's path (a swap for
// a symbolic link while root's cron reads it) can make SQLite open, create or chown a -wal,
// -shm or -journal anywhere, and nothing is created beside the user's files.
ReaderFile::ReaderFile(const std::string& path) {
  guard_sqlite_opens();  // /proc/self/fd/N is opened as the link it is only there
  const auto [directory, name] = monitor::split_path(path);
  dir_fd_ = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat info {};
  file_fd_ = dir_fd_ < 0 ? -1 : open_regular_at(dir_fd_, name, info);
  if (file_fd_ < 0) {
    problem_ = "not a regular file that can be opened (a link, a FIFO, a device, or gone)";
    return;
  }
  unsigned char header[100] = {};
  const bool header_read = read_exactly(file_fd_, header, sizeof header, 0);
  const bool wal = header_read && header[18] == 2 && header[19] == 2;
  // Side files that hold committed data the main file lacks: a hot rollback journal (a rank
  // killed inside a transaction) or a WAL with frames not yet checkpointed (a live writer).
  struct stat side_info {};
  const std::string side = name + (wal ? "-wal" : "-journal");
  const int side_fd = open_regular_at(dir_fd_, side, side_info);
  bool needs_copy = false;
  if (side_fd >= 0 && side_info.st_size > 0) {
    if (wal) {
      needs_copy = side_info.st_size >= 32;  // a WAL header: frames may follow
    } else {
      // A journal that does not start as SQLite's do is not hot: SQLite ignores it, and so do we.
      unsigned char head[sizeof kJournalMagic] = {};
      needs_copy = read_exactly(side_fd, head, sizeof head, 0) &&
                   std::memcmp(head, kJournalMagic, sizeof head) == 0;
    }
  }
  if (!needs_copy) {
    if (side_fd >= 0) ::close(side_fd);
    // Immutable, through the descriptor: no locks, no side files (a WAL file without frames is
    // read as the rollback file it then is, see PatientFile).
    const bool shared = monitor::filesystem_of(directory).shared;
    uri_ = "file:/proc/self/fd/" + std::to_string(file_fd_) + "?immutable=1&vfs=" + patient_vfs() +
           (shared ? "&patient=1" : "");
    return;
  }
  // A private copy of the file and its side file, which SQLite (read-write there) rolls back or
  // recovers. Only a writer may roll a hot journal back, and a live WAL is otherwise read
  // through its -shm, created by name beside the user's file. A WAL restarted by a checkpoint
  // while it was copied (its salt changed) makes a copy that mixes two generations: copied again,
  // three times at most.
  problem_ = wal ? "a live WAL beside it, and no private copy to read it from"
                 : "a hot journal beside it, and no private copy to roll it back in";
  std::error_code ec;
  std::string copy_dir = (fs::temp_directory_path(ec) / "commtap-recover-XXXXXX").string();
  if (ec || ::mkdtemp(copy_dir.data()) == nullptr) {
    ::close(side_fd);
    return;
  }
  directory_ = copy_dir;
  const std::string into = (fs::path(copy_dir) / name).string();
  bool copied = false;
  for (int attempt = 0; attempt < 3 && !copied; ++attempt) {
    unsigned char salt_before[8] = {}, salt_after[8] = {};
    if (wal && !read_exactly(side_fd, salt_before, 8, 16)) break;
    fs::remove(into, ec);
    fs::remove(into + side.substr(name.size()), ec);
    const fs::space_info space = fs::space(copy_dir, ec);
    std::uint64_t budget = ec ? 0 : space.available / 2;
    struct stat now {};
    if (::fstat(file_fd_, &now) != 0 || ::fstat(side_fd, &side_info) != 0 ||
        !copy_bounded(file_fd_, now, into, budget) ||
        !copy_bounded(side_fd, side_info, into + side.substr(name.size()), budget)) {
      problem_ = std::string(wal ? "a live WAL" : "a hot journal") +
                 " beside it, and its files are not regular files whose copy fits in half the "
                 "free space of " +
                 fs::temp_directory_path(ec).string();
      break;
    }
    copied = !wal || (read_exactly(side_fd, salt_after, 8, 16) &&
                      std::memcmp(salt_before, salt_after, 8) == 0);
  }
  ::close(side_fd);
  if (!copied) return;
  problem_.clear();
  uri_ = file_uri(into);
  // The copy is what SQLite reads from now on: the user's file and directory need no descriptor
  // (a pooled copy then holds SQLite's three: the copy, its -wal and its -shm).
  for (const std::string& copy : {into, into + side.substr(name.size())}) {
    struct stat copy_info {};
    if (::stat(copy.c_str(), &copy_info) == 0)
      copy_bytes_ += static_cast<std::uint64_t>(copy_info.st_size);
  }
  const fs::space_info left = fs::space(copy_dir, ec);
  free_after_copy_ = ec ? 0 : left.available;
  close_descriptors();
}

void ReaderFile::close_descriptors() {
  for (int* fd : {&file_fd_, &dir_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  // Its number may name any file opened from now on: uri() names a private copy or nothing.
  if (!copied()) uri_.clear();
}

ReaderFile::~ReaderFile() {
  std::error_code ec;
  if (!directory_.empty()) fs::remove_all(directory_, ec);
  close_descriptors();
}

int ReaderFile::open_flags() const {
  // One connection is only ever used by the thread that opened it: SQLite's per-call locking of
  // the connection (about 7% of an analysis) is not needed.
  // The file itself is a descriptor the reader holds (/proc/self/fd/N, a link only in name), or
  // a private copy in a directory of the reader's own.
  return (directory_.empty() ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_URI |
         SQLITE_OPEN_NOMUTEX;
}

std::unique_ptr<TraceReader> TraceReader::open(const std::string& path, std::string& error) {
  auto reader = std::unique_ptr<TraceReader>(new TraceReader());
  reader->path_ = path;
  reader->file_ = std::make_unique<ReaderFile>(path);
  if (!reader->file_->problem().empty()) {
    error = path + ": " + reader->file_->problem();
    return nullptr;
  }
  if (sqlite3_open_v2(reader->file_->uri().c_str(), &reader->db_, reader->file_->open_flags(),
                      nullptr) != SQLITE_OK) {
    error = path + ": " + (reader->db_ ? sqlite3_errmsg(reader->db_) : "cannot open");
    return nullptr;
  }
  sqlite3_busy_timeout(reader->db_, 2000);
  // A private copy is removed once closed: no checkpoint of its recovered WAL into it at close,
  // and no syncs. A live analysis of 8 ranks' LULESH on 2 loaded cores spent 2.4 s of its
  // threads' time in 129 fdatasyncs and wrote 2,868 pages for them (strace -f -c -w).
  if (reader->file_->copied()) {
    sqlite3_db_config(reader->db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
    sqlite3_exec(reader->db_, "PRAGMA synchronous=OFF", nullptr, nullptr, nullptr);
  }
  // The file's views are off here (no query can reach one); content_problem names them.
  harden_connection(reader->db_, /*allow_views=*/false);
  int version = -1;
  if (!reader->each(
          "PRAGMA user_version", {}, [&](sqlite3_stmt* s) { version = sqlite3_column_int(s, 0); },
          error))
    return nullptr;
  if (const std::string problem = schema_version_problem(version); !problem.empty()) {
    error = path + ": " + problem;
    return nullptr;
  }
  // SQLite has read page 1 through its own descriptor: a reader the pool keeps holds that one.
  reader->file_->close_descriptors();
  if (version < monitor::kSchemaVersion && !shadow_older_schema(reader->db_, error)) {
    error = path + ": cannot read schema version " + std::to_string(version) + ": " + error;
    return nullptr;
  }
  return reader;
}

std::string TraceReader::content_problem(const std::vector<std::string>& read_checked) const {
  std::string problem = hostile_schema_problem(db_, "main");
  if (problem.empty()) problem = missing_keys_problem(db_, "main");
  if (problem.empty()) problem = implausible_values_problem(db_, "main", read_checked);
  return problem.empty() ? "" : path_ + ": " + problem;
}

TraceReader::~TraceReader() {
  for (auto& [sql, stmt] : idle_statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

KeyValue key_value(sqlite3_stmt* s, int column) {
  return KeyValue(sqlite3_value_dup(sqlite3_column_value(s, column)), sqlite3_value_free);
}

void TraceReader::release_memory() {
  for (auto& [sql, stmt] : idle_statements_) sqlite3_finalize(stmt);
  idle_statements_.clear();
  sqlite3_db_release_memory(db_);
}

sqlite3_stmt* TraceReader::statement(const std::string& sql, std::string& error) {
  if (auto idle = idle_statements_.find(sql); idle != idle_statements_.end()) {
    sqlite3_stmt* stmt = idle->second;
    idle_statements_.erase(idle);
    return stmt;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    error = path_ + ": " + sqlite3_errmsg(db_);
    return nullptr;
  }
  return stmt;
}

void TraceReader::put_back(const std::string& sql, sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  // A statement of the same text run inside another's rows was prepared twice: keep one.
  if (!idle_statements_.try_emplace(sql, stmt).second) sqlite3_finalize(stmt);
}

bool TraceReader::run_and_put_back(const std::string& sql, sqlite3_stmt* stmt,
                                   const std::function<void(sqlite3_stmt*)>& row,
                                   std::string& error) {
  bool ok = false;
  try {
    ok = run(stmt, row, error);
  } catch (...) {
    put_back(sql, stmt);
    throw;
  }
  put_back(sql, stmt);
  return ok;
}

bool TraceReader::run(sqlite3_stmt* stmt, const std::function<void(sqlite3_stmt*)>& row,
                      std::string& error) {
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) row(stmt);
  if (rc != SQLITE_DONE) {
    error = path_ + ": " + sqlite3_errmsg(db_);
    return false;
  }
  return true;
}

bool TraceReader::each(const std::string& sql, std::initializer_list<std::int64_t> binds,
                       const std::function<void(sqlite3_stmt*)>& row, std::string& error) {
  sqlite3_stmt* stmt = statement(sql, error);
  if (!stmt) return false;
  int index = 1;
  for (std::int64_t value : binds) sqlite3_bind_int64(stmt, index++, value);
  return run_and_put_back(sql, stmt, row, error);
}

bool TraceReader::each(const std::string& sql, const std::vector<SqlParameter>& binds,
                       const std::function<void(sqlite3_stmt*)>& row, std::string& error) {
  sqlite3_stmt* stmt = statement(sql, error);
  if (!stmt) return false;
  int index = 1;
  for (const SqlParameter& value : binds) {
    if (const auto* number = std::get_if<std::int64_t>(&value))
      sqlite3_bind_int64(stmt, index++, *number);
    else
      sqlite3_bind_value(stmt, index++, std::get<KeyValue>(value).get());
  }
  return run_and_put_back(sql, stmt, row, error);
}

}  // namespace commtap::analyzer
