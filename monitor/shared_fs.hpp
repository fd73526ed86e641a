// monitor/shared_fs: whether the trace directory is on a filesystem shared between hosts, and
// where a rank keeps its working copy then.
//
// SQLite's WAL mode keeps its index in a -shm file that writer and readers map into memory: that
// works only between processes of one host. A cron analyzer on another host reading a live WAL
// database through NFS, Lustre, GPFS or FUSE may see stale or torn pages, or fail to open it.
// On such a filesystem each rank therefore writes a node-local WAL database and publishes
// consistent snapshots of it into the trace directory (see TraceWriter::start).
#pragma once

#include <string>

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

// The working copy's name in `local_dir`, unique per job, rank and process (two job steps of one
// allocation share a job id and may share a node).
std::string local_copy_path(const std::string& local_dir, const std::string& job_id, int rank,
                            long pid);

}  // namespace commtap::monitor
