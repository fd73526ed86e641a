#include "monitor/shared_fs.hpp"

#include <sys/vfs.h>

#include <cstdint>
#include <cstdlib>

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
  return local_dir + "/commtap-" + job + "-rank-" + std::to_string(rank) + "." +
         std::to_string(pid) + ".db";
}

}  // namespace commtap::monitor
