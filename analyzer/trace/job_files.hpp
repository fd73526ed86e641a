// analyzer/trace/job_files: what a read of a job's files needs to know of the job: its files,
// the threads that read them, and the bounds of what is read (cron mode's horizon, --at). The
// model's Job is one (model/job_model.hpp), so a reader takes the job the detectors hold.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace commtap::analyzer {

class ReaderPool;

struct JobFiles {
  std::string path;
  std::vector<std::string> files;  // each holds one or more ranks
  int threads = 1;                 // reading threads (HealthOptions::threads)
  // The files' readers, each file opened once for every pass of the analysis (reader_pool.hpp);
  // null: each pass opens the files itself.
  std::shared_ptr<ReaderPool> readers;
  // Rows read from the files so far (every pass counts its rows): what an analysis costs.
  mutable std::uint64_t rows_read = 0;
  // Cron mode (--since, recent_rows.hpp): the tables of kTablesReadRecent are read from this
  // wall time on (INT64_MIN: whole) ...
  std::int64_t read_from_wall = INT64_MIN;
  // ... which is, per rank, this time on its own monotonic clock (collective instances are read
  // from there; a rank not listed has no facts and its rows are not read).
  std::map<int, std::int64_t> read_from_local;
  // --at: rows written after this wall time are ignored (INT64_MAX: none are).
  std::int64_t until_wall = INT64_MAX;
};

}  // namespace commtap::analyzer
