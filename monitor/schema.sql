-- commtap trace database, schema version 1 (also stored as PRAGMA user_version).
-- One file per rank (rank-<N>.db in the job directory); every table carries the rank so that
-- rank files can be merged into one job database by copying rows.

-- Job-level facts, equal on every rank: schema_version, commtap_version, job_id.
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

-- One row per rank: where and what it ran.
CREATE TABLE IF NOT EXISTS ranks (
  rank         INTEGER PRIMARY KEY,
  world_size   INTEGER NOT NULL,
  host         TEXT    NOT NULL,
  pid          INTEGER NOT NULL,
  mpi_library  TEXT    NOT NULL,
  command_line TEXT    NOT NULL,
  start_ns     INTEGER NOT NULL,  -- CLOCK_REALTIME at MPI_Init, nanoseconds since the epoch
  end_ns       INTEGER NOT NULL,  -- CLOCK_REALTIME when the row was written
  ended_by     TEXT    NOT NULL   -- 'finalize', 'abort' or 'exit' (no MPI_Finalize was called)
);

-- The commtap settings each rank ran with (after validation: the values actually used).
CREATE TABLE IF NOT EXISTS settings (
  rank  INTEGER NOT NULL,
  name  TEXT    NOT NULL,
  value TEXT    NOT NULL,
  PRIMARY KEY (rank, name)
);

-- Totals per intercepted function since MPI_Init. Only functions called at least once appear.
CREATE TABLE IF NOT EXISTS call_totals (
  rank          INTEGER NOT NULL,
  function      TEXT    NOT NULL,  -- e.g. 'MPI_Allreduce', 'ncclAllReduce'
  family        TEXT    NOT NULL,  -- e.g. 'collective', 'p2p_start', 'completion'
  calls         INTEGER NOT NULL,  -- times the wrapper was entered by the application
  time_ns       INTEGER NOT NULL,  -- time spent inside those calls
  bytes         INTEGER NOT NULL,  -- count x type size of the call's principal buffer, summed
  completions   INTEGER NOT NULL,  -- nonblocking/persistent operations of this function that a
                                   -- Wait/Test call completed
  completion_ns INTEGER NOT NULL,  -- sum of (completion - start) over those operations
  PRIMARY KEY (rank, function)
);
