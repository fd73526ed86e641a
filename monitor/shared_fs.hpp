// monitor/shared_fs: whether the trace directory is on a filesystem shared between hosts, and
// where a rank keeps its working copy then.
//
// SQLite's WAL mode keeps its index in a -shm file that writer and readers map into memory: that
// works only between processes of one host. A cron analyzer on another host reading a live WAL
// database through NFS, Lustre, GPFS or FUSE may see stale or torn pages, or fail to open it.
// On such a filesystem each rank therefore writes a node-local WAL database and publishes
// consistent snapshots of it into the trace directory (see TraceWriter::start).
#pragma once

#include <sys/stat.h>

#include <string>
#include <utility>

namespace commtap::monitor {

struct Filesystem {
  std::string name;     // "nfs", "lustre", "fuse", ..., or "local"; "unknown" if statfs failed
  bool shared = false;  // a network, cluster or FUSE filesystem: WAL is unsafe for other hosts
};

// The filesystem `directory` lives on, from statfs(2)'s f_type.
Filesystem filesystem_of(const std::string& directory);

// COMMTAP_SHARED_FS: "auto" (by the filesystem), "on" (always snapshots), "off" (never).
enum class SnapshotLayout { automatic, on, off };
// False if `text` is none of auto, on/1/yes/true, off/0/no/false.
bool parse_snapshot_layout(const std::string& text, SnapshotLayout& out);

// Where a rank's working copy goes: `setting` (COMMTAP_LOCAL_DIR) if not empty, else $TMPDIR,
// else /tmp.
std::string local_directory(const std::string& setting);

// The working copy's path: rank-<rank>.db in a new private directory (mkdtemp, 0700) named
// `local_dir`/commtap-<job>-rank-<rank>.<pid>.XXXXXX, which this call creates. Nobody else can
// know the name beforehand or put anything in the directory, whatever `local_dir`'s mode (/tmp
// without fs.protected_*). Where mkdtemp fails the path names a directory that does not exist, so
// creating the file there fails and the rank writes in place (with the caller's message).
// TraceWriter removes the directory with the copy.
std::string local_copy_path(const std::string& local_dir, const std::string& job_id, int rank,
                            long pid);

// ---- Private files ------------------------------------------------------------------------
// The library creates its files, never adopts them: each directory it writes into is opened
// with O_NOFOLLOW and must belong to this process's effective user and be writable by nobody
// else (then no other user can plant, replace or link a name in it, SQLite's -wal and -shm
// included); every file is created O_CREAT|O_EXCL|O_NOFOLLOW through the directory's descriptor,
// and SQLite is given the name /proc/self/fd/<directory>/<file> with the literal VFS below, so
// that it, too, resolves every name inside that very directory and never through a path that
// could be switched after the check.

// An open directory descriptor that closes itself.
class PrivateDirectory {
 public:
  PrivateDirectory() = default;
  // Opens `path` (its last component not a symlink) and checks it; `tighten` first takes the
  // group's and others' permissions away (to 0700, or 0750 with `group_read`), for a directory
  // this job made. Check ok()/problem().
  PrivateDirectory(const std::string& path, bool tighten, bool group_read);
  ~PrivateDirectory();
  PrivateDirectory(PrivateDirectory&& other) noexcept;
  PrivateDirectory& operator=(PrivateDirectory&& other) noexcept;
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  const std::string& problem() const { return problem_; }
  // The name SQLite opens for `name` in this directory: /proc/self/fd/<fd>/<name>.
  std::string sqlite_name(const std::string& name) const;
  // Creates `name` (O_CREAT|O_EXCL|O_NOFOLLOW, `mode` whatever the umask), first removing a stale
  // file of that name and its -wal, -shm and -journal. Returns the open descriptor, or -1 with
  // `error` set.
  int create(const std::string& name, mode_t mode, std::string& error) const;

 private:
  int fd_ = -1;
  std::string path_, problem_;
};

// Why `info` (a directory's fstat) is not private to this process's effective user, or empty.
std::string directory_trust_problem(const std::string& path, const struct stat& info);

// A VFS like `base` (nullptr: the default one, or e.g. "unix-none") whose names are taken as
// given, not resolved through symbolic links: SQLite's unix VFS would otherwise turn
// /proc/self/fd/N back into the directory's name. Registered once; returns its name.
const char* literal_vfs(const char* base = nullptr);

// The directory part and the last component of `path` ("." for a bare name).
std::pair<std::string, std::string> split_path(const std::string& path);

}  // namespace commtap::monitor
