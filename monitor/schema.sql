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
  end_ns       INTEGER NOT NULL,  -- CLOCK_REALTIME of the last window written (the end, once
                                  -- ended_by is set)
  ended_by     TEXT    NOT NULL,  -- 'running' while the rank runs, then 'finalize', 'abort' or
                                  -- 'exit' (the process exited without MPI_Finalize)
  clock_offset_ns INTEGER,        -- rank 0's monotonic clock = this rank's + offset (NULL: none)
  clock_error_ns  INTEGER,        -- the offset is right within +- this many ns
  node         INTEGER NOT NULL,  -- index of the rank's node (MPI_COMM_TYPE_SHARED domain)
  local_rank   INTEGER NOT NULL   -- rank within the node
);

-- The commtap settings each rank ran with (after validation: the values actually used).
CREATE TABLE IF NOT EXISTS settings (
  rank  INTEGER NOT NULL,
  name  TEXT    NOT NULL,
  value TEXT    NOT NULL,
  PRIMARY KEY (rank, name)
);

-- Totals per intercepted function since MPI_Init, rewritten every window. Only functions called
-- at least once appear.
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

-- Every communicator the rank belonged to (including freed ones). comm_id is equal on all
-- member ranks, so rows of different ranks join on it.
CREATE TABLE IF NOT EXISTS communicators (
  rank       INTEGER NOT NULL,
  comm_id    INTEGER NOT NULL,
  parent_id  INTEGER NOT NULL,  -- the communicator it was made from; 0 for world and self
  created_by TEXT    NOT NULL,  -- 'MPI_COMM_WORLD', 'MPI_COMM_SELF', 'MPI_Comm_split', ...
  size       INTEGER NOT NULL,  -- ranks in it (of the local group, for intercommunicators)
  comm_rank  INTEGER NOT NULL,  -- this rank's rank in it
  inter      INTEGER NOT NULL,  -- 1 for an intercommunicator
  members    TEXT,              -- world ranks in comm-rank order, comma-separated; only in the
                                -- row of the communicator's rank 0 (NULL elsewhere)
  PRIMARY KEY (rank, comm_id)
);

-- One row per window (COMMTAP_INTERVAL) and a last one at the end: what the rank was doing.
-- A rank stuck in a collective keeps writing 'in_call' rows with the same since_ns; a rank whose
-- rows stop while others go on has crashed or frozen.
CREATE TABLE IF NOT EXISTS heartbeats (
  rank     INTEGER NOT NULL,
  wall_ns  INTEGER NOT NULL,  -- CLOCK_REALTIME when the row was written
  state    TEXT    NOT NULL,  -- 'computing', 'in_call', or how it ended ('finalize', ...)
  function TEXT,              -- in_call: the longest-running call on any of the rank's threads
  comm_id  INTEGER,           -- in_call: its communicator (NULL if it has none)
  seq      INTEGER,           -- in_call: the collective's sequence number on that communicator
  since_ns INTEGER,           -- in_call: CLOCK_REALTIME when that call was entered
  threads_in_calls INTEGER NOT NULL,
  instances_dropped INTEGER NOT NULL,  -- collective records lost to full buffers, since start
  PRIMARY KEY (rank, wall_ns)
);

-- Sampled collective instances (COMMTAP_SAMPLE): (comm_id, seq) names the same instance on every
-- member rank, and every rank samples the same sequence numbers.
CREATE TABLE IF NOT EXISTS collectives (
  rank     INTEGER NOT NULL,
  comm_id  INTEGER NOT NULL,
  seq      INTEGER NOT NULL,  -- 1 for the first collective on the communicator
  function TEXT    NOT NULL,  -- 'MPI_Allreduce', 'MPI_Iallreduce', 'MPI_Allreduce_init', ...
  bytes    INTEGER NOT NULL,  -- as call_totals.bytes, for this instance
  root     INTEGER,           -- rooted collectives (rank in the communicator); NULL otherwise
  site     INTEGER,           -- call_sites.site of the calling code (rank-local); NULL: unknown
  enter_ns INTEGER NOT NULL,  -- this host's monotonic ns: entry, post, or MPI_Start
  exit_ns  INTEGER,           -- return of the blocking call, or of the call that completed it;
                              -- NULL for NCCL collectives (completion on the stream not recorded)
  PRIMARY KEY (rank, comm_id, seq)
);

-- Where the application called MPI: for each call site (rank-local id), the stack frames above
-- the MPI library, innermost (frame 0, the function that made the call) first.
CREATE TABLE IF NOT EXISTS call_sites (
  rank          INTEGER NOT NULL,
  site          INTEGER NOT NULL,
  frame         INTEGER NOT NULL,
  address       INTEGER NOT NULL,  -- return address in this process
  module        TEXT    NOT NULL,  -- executable or shared object
  symbol        TEXT,              -- enclosing function, if its symbol is known
  symbol_offset INTEGER,
  PRIMARY KEY (rank, site, frame)
);


-- Collective instances on rank 0's clock (enter/exit plus the rank's clock offset).
CREATE VIEW IF NOT EXISTS collectives_aligned AS
  SELECT c.rank, c.comm_id, c.seq, c.function, c.bytes, c.root, c.site,
         c.enter_ns + coalesce(r.clock_offset_ns, 0) AS enter_ns,
         c.exit_ns + coalesce(r.clock_offset_ns, 0) AS exit_ns
  FROM collectives c JOIN ranks r ON r.rank = c.rank;
