// analyzer/trace/fact_rows: the rows the model's facts pass reads (model/job_model.cpp's
// load_facts): each rank's row, MPI's clock estimates, COMMTAP_INTERVAL, the newest heartbeats and
// communicator progress, NCCL aborts and the communicators, one struct per kind. They are read in
// one pass over the files (on job.threads threads, handed on in file order), which also checks
// each file's content once (TraceReader::content_problem).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "analyzer/trace/job_files.hpp"
#include "monitor/trace_schema.hpp"

namespace commtap::analyzer {

// The fatal MPI error that ended a rank (ranks.error_*, where ended_by is 'mpi_error').
struct MpiError {
  std::string function;  // the call that failed ('' if commtap did not record it)
  std::int64_t comm_id = 0;
  int peer = -1;            // its peer as a world rank; -1: none, or not one rank
  std::string error_class;  // 'MPI_ERR_OTHER', 'MPI_ERR_TAG', ...
  std::string text;
};

// A rank's row (ranks), as it stood at job.until_wall.
struct RankRow {
  int rank = 0;
  std::string host;
  std::string ended_by;  // 'running' where it ended after until_wall
  std::uint64_t start_ns = 0;
  std::int64_t clock_offset_ns = 0;  // at MPI_Init (0 where none)
  std::string command_line, mpi_library;
  std::uint64_t end_ns = 0;      // its last window's wall clock, at most until_wall
  bool has_clock_error = false;  // clock_error_ns recorded: MPI estimated its offset
  MpiError error;                // where ended_by is 'mpi_error'
};

// One of MPI's clock estimates (clock_offsets; those with a negative error are no estimate and
// are left out), oldest first per file.
struct ClockOffsetRow {
  int rank = 0;
  monitor::ClockEstimate estimate;
};

// A rank's newest heartbeat (at or before until_wall), and its newest written while it ran
// ('computing' or 'in_call').
struct HeartbeatRow {
  int rank = 0;
  bool running = false;  // the newest written while it ran
  std::uint64_t wall_ns = 0;
  std::string state, function;
  std::int64_t comm_id = 0;
  std::uint64_t seq = 0, since_ns = 0;
};

// The newest progress of each (rank, communicator) (comm_progress), and since when it held.
struct ProgressRow {
  int rank = 0;
  monitor::CommProgress progress;
  std::uint64_t wall_ns = 0;
};

// A rank's count of one function's calls (call_totals).
struct CallCountRow {
  int rank = 0;
  std::uint64_t calls = 0;
};

// A rank's row of an intracommunicator (communicators, inter = 0): MPI writes the members in
// its rank 0's row; another library (NCCL) has each rank write its own comm_rank.
struct CommunicatorRow {
  std::int64_t comm_id = 0;
  int size = 0;
  std::optional<std::string> members;  // "1,3,?"
  int rank = 0, comm_rank = 0;
  std::string created_by;
};

// Where the facts pass hands each kind of row (each callback must be set).
struct FactRows {
  std::function<void(const std::string&)> job_id;  // meta's job_id
  std::function<void(const RankRow&)> rank;
  std::function<void(const ClockOffsetRow&)> clock;
  std::function<void(const std::string&)> interval_ms;  // the COMMTAP_INTERVAL setting's text
  std::function<void(const HeartbeatRow&)> heartbeat;
  std::function<void(const ProgressRow&)> progress;
  std::function<void(const CallCountRow&)> nccl_aborts;  // ncclCommAbort calls
  std::function<void(const CommunicatorRow&)> communicator;
};

// Reads every file's facts, in file order. The tables checked as read (kTablesCheckedAsRead) are
// left out of the content check; `recent_only` (cron mode): so are the tables read recent
// (kTablesReadRecent), and the heartbeats' times are checked as they are read.
bool read_job_facts(const JobFiles& job, bool recent_only, const FactRows& rows,
                    std::string& error);

// The earliest start_ns of any rank (INT64_MAX where no file has a rank): --at counts from it.
bool earliest_rank_start(const JobFiles& job, std::int64_t& start, std::string& error);

}  // namespace commtap::analyzer
