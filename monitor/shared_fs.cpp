#include "monitor/shared_fs.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace commtap::monitor {

namespace {

struct Known {
  std::uint32_t magic;
  const char* name;
};

// Filesystems where two hosts may open the same file. Values from linux/magic.h where it has
// them (nfs, smb, cifs, smb2, ceph, fuse, afs, coda, 9p, ocfs2); the others from their clients'
// sources (Lustre's LL_SUPER_MAGIC, GPFS's "GPFS", BeeGFS, GFS2, OrangeFS, PanFS). FUSE is
// counted as shared since sshfs, s3fs, gcsfuse and most FUSE filesystems met on clusters are
// network ones; COMMTAP_SHARED_FS=off overrides a local one.
constexpr Known kShared[] = {
    {0x00006969u, "nfs"},      {0x0BD00BD0u, "lustre"}, {0x47504653u, "gpfs"},
    {0x65735546u, "fuse"},     {0xFF534D42u, "cifs"},   {0xFE534D42u, "smb2"},
    {0x0000517Bu, "smb"},      {0x00C36400u, "ceph"},   {0x19830326u, "beegfs"},
    {0x5346414Fu, "afs"},      {0x6B414653u, "afs"},    {0x73757245u, "coda"},
    {0x01021997u, "9p"},       {0x7461636Fu, "ocfs2"},  {0x01161970u, "gfs2"},
    {0x20030528u, "orangefs"}, {0xAAD7AAEAu, "panfs"},
};

}  // namespace

Filesystem filesystem_of(const std::string& directory) {
  struct statfs info {};
  if (::statfs(directory.c_str(), &info) != 0) return {"unknown", false};
  // f_type is a signed word on some ABIs: compare its low 32 bits, where every magic lives.
  const auto magic = static_cast<std::uint32_t>(info.f_type);
  for (const Known& known : kShared)
    if (known.magic == magic) return {known.name, true};
  return {"local", false};
}

bool parse_snapshot_layout(const std::string& text, SnapshotLayout& out) {
  if (text == "auto" || text.empty()) {
    out = SnapshotLayout::automatic;
    return true;
  }
  for (const char* yes : {"on", "1", "yes", "true"})
    if (text == yes) return out = SnapshotLayout::on, true;
  for (const char* no : {"off", "0", "no", "false"})
    if (text == no) return out = SnapshotLayout::off, true;
  return false;
}

std::string local_directory(const std::string& setting) {
  if (!setting.empty()) return setting;
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

std::string local_copy_path(const std::string& local_dir, const std::string& job_id, int rank,
                            long pid) {
  std::string job;
  for (char c : job_id) job += c == '/' ? '_' : c;
  std::string directory = local_dir + "/commtap-" + job + "-rank-" + std::to_string(rank) + "." +
                          std::to_string(pid) + ".XXXXXX";
  ::mkdtemp(directory.data());  // on failure the name keeps its XXXXXX and does not exist
  return directory + "/rank-" + std::to_string(rank) + ".db";
}

std::pair<std::string, std::string> split_path(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::string directory_trust_problem(const std::string& path, const struct stat& info) {
  if (!S_ISDIR(info.st_mode)) return path + " is not a directory";
  if (info.st_uid != ::geteuid())
    return path + " belongs to uid " + std::to_string(info.st_uid) + ", not to this user (uid " +
           std::to_string(::geteuid()) +
           "): commtap writes only into directories of the job's own user (COMMTAP_DIR, "
           "docs/settings.md)";
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return path + " is writable by other users (mode " + mode +
           "): commtap writes only into directories no one else can write (COMMTAP_DIR, "
           "docs/settings.md)";
  }
  return "";
}

PrivateDirectory::PrivateDirectory(const std::string& path, bool tighten, bool group_read)
    : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    problem_ = path + (errno == ELOOP || errno == ENOTDIR
                           ? std::string(" is a symbolic link or not a directory")
                           : ": " + std::string(std::strerror(errno)));
    return;
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    problem_ = path + ": " + std::strerror(errno);
    ::close(fd);
    return;
  }
  const mode_t wanted = group_read ? 0750 : 0700;
  if (tighten && info.st_uid == ::geteuid() && (info.st_mode & 0777 & ~wanted) != 0 &&
      ::fchmod(fd, info.st_mode & 07777 & wanted) == 0)
    ::fstat(fd, &info);
  problem_ = directory_trust_problem(path, info);
  if (!problem_.empty()) {
    ::close(fd);
    return;
  }
  fd_ = fd;
}

PrivateDirectory::~PrivateDirectory() {
  if (fd_ >= 0) ::close(fd_);
}

PrivateDirectory::PrivateDirectory(PrivateDirectory&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)), problem_(std::move(other.problem_)) {
  other.fd_ = -1;
}

PrivateDirectory& PrivateDirectory::operator=(PrivateDirectory&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
    path_ = std::move(other.path_);
    problem_ = std::move(other.problem_);
  }
  return *this;
}

std::string PrivateDirectory::sqlite_name(const std::string& name) const {
  return "/proc/self/fd/" + std::to_string(fd_) + "/" + name;
}

int PrivateDirectory::create(const std::string& name, mode_t mode, std::string& error) const {
  if (fd_ < 0) {
    error = problem_;
    return -1;
  }
  // A stale file of an earlier attempt (same job id and rank) goes, with its side files: only
  // this user can have put them here.
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    ::unlinkat(fd_, (name + suffix).c_str(), 0);
  const int fd =
      ::openat(fd_, name.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_CLOEXEC, mode);
  if (fd < 0) {
    error = "cannot create " + path_ + "/" + name + ": " + std::strerror(errno);
    return -1;
  }
  ::fchmod(fd, mode);  // whatever the umask
  return fd;
}

namespace {

// The literal VFSes: the base VFS with a full-path function that keeps absolute names as they
// are (SQLite 3.40's resolves every symbolic link in them, /proc/self/fd/N included). The base's
// pAppData stays: the unix VFS finds its locking style through it.
sqlite3_vfs g_literal[2];
sqlite3_vfs* g_literal_base[2] = {nullptr, nullptr};

template <int Which>
int literal_full_pathname(sqlite3_vfs*, const char* name, int size, char* out) {
  if (name[0] != '/')
    return g_literal_base[Which]->xFullPathname(g_literal_base[Which], name, size, out);
  const std::size_t length = std::strlen(name);
  if (length + 1 > static_cast<std::size_t>(size)) return SQLITE_CANTOPEN;
  std::memcpy(out, name, length + 1);
  return SQLITE_OK;
}

}  // namespace

const char* literal_vfs(const char* base) {
  static std::mutex mutex;
  static constexpr const char* kNames[2] = {"commtap-literal", "commtap-literal-none"};
  std::lock_guard lock(mutex);
  const int which = base != nullptr && std::strcmp(base, "unix-none") == 0 ? 1 : 0;
  if (g_literal_base[which] == nullptr) {
    sqlite3_initialize();
    sqlite3_vfs* found = sqlite3_vfs_find(which == 1 ? "unix-none" : nullptr);
    if (found == nullptr) return nullptr;
    g_literal_base[which] = found;
    g_literal[which] = *found;
    g_literal[which].pNext = nullptr;
    g_literal[which].zName = kNames[which];
    g_literal[which].xFullPathname =
        which == 1 ? literal_full_pathname<1> : literal_full_pathname<0>;
    sqlite3_vfs_register(&g_literal[which], 0);
  }
  return kNames[which];
}

}  // namespace commtap::monitor
