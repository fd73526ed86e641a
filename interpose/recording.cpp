// Where a rank's trace goes and the writer that writes it (interpose/recording.hpp).
#include "interpose/recording.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "monitor/clock.hpp"

namespace commtap::interpose {

monitor::SnapshotLayout snapshot_layout(const MonitorSettings& settings,
                                        std::vector<std::string>& problems) {
  monitor::SnapshotLayout layout = monitor::SnapshotLayout::automatic;
  if (!monitor::parse_snapshot_layout(settings.shared_fs, layout))
    problems.push_back("commtap: COMMTAP_SHARED_FS=" + settings.shared_fs +
                       " is not one of auto, on, off; using auto");
  return layout;
}

std::string trace_directory(const MonitorSettings& settings, const std::string& job_id) {
  return settings.dir.empty() ? "commtap-" + job_id : settings.dir;
}

std::string make_directory(const std::string& path, bool must_be_private) {
  std::string partial;
  std::size_t position = 0;
  while (position != std::string::npos) {
    position = path.find('/', position + 1);
    partial = path.substr(0, position);
    if (partial.empty()) continue;
    // The directory itself is private from the start; the ones above it are the user's to set.
    const mode_t mode = position == std::string::npos && must_be_private ? 0700 : 0755;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST)
      return "cannot create " + partial + ": " + std::strerror(errno);
  }
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) return path + ": " + std::strerror(errno);
  if (S_ISLNK(info.st_mode)) return path + " is a symbolic link";
  if (must_be_private) {
    // Another user's directory, or one others can write, is refused, not adopted
    // (monitor/shared_fs.hpp, "Private files").
    if (std::string problem = monitor::directory_trust_problem(path, info); !problem.empty())
      return problem;
  } else if (!S_ISDIR(info.st_mode)) {
    return path + " is not a directory";
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) return path + ": " + std::strerror(errno);
  return "";
}

WorkingCopy choose_working_copy(const MonitorSettings& settings, monitor::SnapshotLayout layout,
                                const std::string& directory, const monitor::RankFacts& facts) {
  WorkingCopy copy;
  copy.filesystem = monitor::filesystem_of(directory);
  const bool snapshots = layout == monitor::SnapshotLayout::on ||
                         (layout == monitor::SnapshotLayout::automatic && copy.filesystem.shared);
  if (!snapshots) return copy;
  const std::string local_dir = monitor::local_directory(settings.local_dir);
  copy.problem =
      make_directory(local_dir, /*must_be_private: the copy gets a mkdtemp directory*/ false);
  if (copy.problem.empty())
    copy.path = monitor::local_copy_path(local_dir, facts.job_id, facts.rank, facts.pid);
  return copy;
}

std::unique_ptr<monitor::TraceWriter> start_trace_writer(
    const MonitorSettings& settings, const std::string& database_path,
    const monitor::RankFacts& facts,
    const std::vector<std::pair<std::string, std::string>>& described_settings,
    monitor::TraceWriter::Collect collect, WorkingCopy& copy) {
  // The writer refines the counter clock every window; without a writer nothing would.
  if (settings.tsc) monitor::use_fast_clock();
  const std::uint64_t interval_ns = static_cast<std::uint64_t>(settings.interval) * 1'000'000;
  std::string error;
  std::unique_ptr<monitor::TraceWriter> writer;
  if (!copy.path.empty()) {
    writer = monitor::TraceWriter::start(database_path, facts, described_settings, interval_ns,
                                         collect, error, copy.path);
    if (writer == nullptr) {
      std::fprintf(stderr,
                   "commtap: rank %d cannot write its working copy %s (%s); it writes %s in "
                   "place, the job goes on\n",
                   facts.rank, copy.path.c_str(), error.c_str(), database_path.c_str());
      copy.path.clear();
    }
  }
  if (writer == nullptr)
    writer = monitor::TraceWriter::start(database_path, facts, described_settings, interval_ns,
                                         collect, error);
  if (writer == nullptr)
    std::fprintf(stderr,
                 "commtap: rank %d cannot create %s (%s); it records nothing, the job goes on\n",
                 facts.rank, database_path.c_str(), error.c_str());
  return writer;
}

}  // namespace commtap::interpose
