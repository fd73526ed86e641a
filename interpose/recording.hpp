// Where a rank's trace goes and the writer that writes it, from the monitor's settings: the
// trace directory (made if missing), the node-local working copy where the trace directory is
// shared between hosts, and the writer thread. Nothing here calls MPI: an MPI job agrees between
// these steps (runtime.cpp) that all ranks record or none, and which rank explains a problem.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "monitor/shared_fs.hpp"
#include "monitor/trace_writer.hpp"
#include "settings/module_settings.hpp"

namespace commtap::interpose {

// COMMTAP_SHARED_FS as a layout; an unknown value adds one line to `problems` and means auto.
monitor::SnapshotLayout snapshot_layout(const MonitorSettings& settings,
                                        std::vector<std::string>& problems);

// The trace directory: COMMTAP_DIR, else commtap-JOBID in the working directory.
std::string trace_directory(const MonitorSettings& settings, const std::string& job_id);

// mkdir -p (the last component 0700 where `must_be_private`), then checks that `path` is a
// directory this process can write and, where `must_be_private`, that it is no link and belongs
// to this user alone (no other user can write it); returns an empty string or the reason it
// cannot be used.
std::string make_directory(const std::string& path, bool must_be_private);

// Where a rank works on its database: in place, or on a node-local copy that it publishes as
// snapshots (monitor/shared_fs.hpp) where the trace directory is on a filesystem shared between
// hosts. Decided per rank: mounts may differ between nodes.
struct WorkingCopy {
  monitor::Filesystem filesystem;  // the trace directory's
  std::string path;                // the node-local copy; empty: the database is written in place
  std::string problem;  // why the wanted local copy cannot be kept (COMMTAP_LOCAL_DIR); or empty
};
WorkingCopy choose_working_copy(const MonitorSettings& settings, monitor::SnapshotLayout layout,
                                const std::string& directory, const monitor::RankFacts& facts);

// Starts the writer of `database_path` (COMMTAP_INTERVAL, COMMTAP_TSC) on `copy.path` where there
// is one; where that fails it says so, clears `copy.path` and writes in place. Returns nullptr,
// having said so, where the database cannot be created at all.
std::unique_ptr<monitor::TraceWriter> start_trace_writer(
    const MonitorSettings& settings, const std::string& database_path,
    const monitor::RankFacts& facts,
    const std::vector<std::pair<std::string, std::string>>& described_settings,
    monitor::TraceWriter::Collect collect, WorkingCopy& copy);

}  // namespace commtap::interpose
