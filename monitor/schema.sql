-- commtap trace database, schema version 17 (also stored as PRAGMA user_version).
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
  ended_by     TEXT    NOT NULL,  -- 'running' while the rank runs, then 'finalize', 'abort',
                                  -- 'exit' (the process exited without MPI_Finalize), 'SIGTERM',
                                  -- 'SIGINT', a crash ('SIGSEGV', 'SIGBUS', 'SIGFPE', 'SIGILL',
                                  -- 'SIGABRT') or 'mpi_error' (a fatal MPI error: error_* below)
  clock_offset_ns INTEGER,        -- rank 0's monotonic clock = this rank's + offset (NULL: none)
  clock_error_ns  INTEGER,        -- the offset is right within +- this many ns
  node         INTEGER NOT NULL,  -- index of the rank's node (MPI_COMM_TYPE_SHARED domain)
  local_rank   INTEGER NOT NULL,  -- rank within the node
  gpus         TEXT,              -- GPUs the rank's NCCL collectives ran on, '; '-separated:
                                  -- 'device 0 (NVIDIA H100 80GB HBM3, PCI 0000:19:00.0)'; NULL: none
  -- Where ended_by is 'mpi_error', the error (NULL otherwise): the call it came from, its
  -- communicator, the call's peer as a world rank (NULL: none, or not one rank), the error's
  -- class ('MPI_ERR_OTHER', 'MPI_ERR_TAG', ...; 'class N' for one without a name here) and
  -- MPI's text.
  error_function TEXT,
  error_comm_id  INTEGER,
  error_peer     INTEGER,
  error_class    TEXT,
  error_text     TEXT
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
-- Under a trace budget (COMMTAP_TRACE_BUDGET) windows older than 10 minutes are merged into
-- 1-minute windows: only the last row of each stays (its counters are since start).
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
  instances_dropped INTEGER NOT NULL,  -- collective and transfer records lost to full buffers,
                                       -- since start
  aggregates_dropped INTEGER NOT NULL, -- calls left out of `aggregates` (a thread's table was
                                       -- full), since start
  writer_cpu_ns INTEGER NOT NULL,      -- CPU time of commtap's writer thread, since start
  stalled_ns INTEGER,                  -- since start: time the process was held off the CPU
                                       -- (stopped, throttled, or queued), estimated by the
                                       -- writer's ticks (COMMTAP_STALL_TICK): each that woke at
                                       -- least 2 ms late counts the larger of its lateness and
                                       -- its wait. NULL: ticks off, or schema 6 or older
  sample_level INTEGER,                -- the trace budget's thinning (COMMTAP_TRACE_BUDGET) of
                                       -- the collectives and transfers rows written with this
                                       -- row: of the instances COMMTAP_SAMPLE recorded, those
                                       -- whose key / COMMTAP_SAMPLE is a multiple of
                                       -- 2^sample_level are kept (the key: collectives' seq,
                                       -- transfers' message hash, monitor/sampling.hpp); in a
                                       -- merged row the highest level of the windows it stands
                                       -- for. 0: all kept; NULL: no budget, or schema 10 or older
  instances_thinned INTEGER,           -- since start: instance records the budget left out (not
                                       -- counted in instances_dropped); NULL as sample_level
  throttled_ns INTEGER,                -- since start: time the process's cgroup CPU limit held it
                                       -- throttled (cpu.stat throttled_usec or throttled_time,
                                       -- the differences added up). NULL: no cgroup with a CPU
                                       -- controller found, or schema 14 or older
  measuring_ns INTEGER,                -- since start: time commtap's own measurements took
                                       -- outside the program's MPI calls (link-probe decisions
                                       -- and rounds and clock estimates after a collective's
                                       -- recorded end, asynchronous probes answered at a call's
                                       -- entry). NULL: schema 15 or older
  PRIMARY KEY (rank, wall_ns)
);

-- How far each rank got on each communicator: the sequence number of the last collective it
-- entered and of the last it completed. Written when they change (so the newest row per
-- (rank, comm_id) is the current state); under a trace budget windows older than 10 minutes keep
-- their last row per communicator and minute, as tcp_links its last per address pair. Members whose `entered` is below a seq that others are
-- stuck in never arrived.
CREATE TABLE IF NOT EXISTS comm_progress (
  rank      INTEGER NOT NULL,
  wall_ns   INTEGER NOT NULL,  -- the heartbeat row written with it
  comm_id   INTEGER NOT NULL,
  entered   INTEGER NOT NULL,
  completed INTEGER NOT NULL,
  PRIMARY KEY (rank, comm_id, wall_ns)
);

-- Per window and per (communicator, function, call site, size class): every call, sampled or
-- not. Blocking calls count their call time; nonblocking and persistent operations their time
-- from post (or MPI_Start) to completion, in the window of the completion. Under a trace budget
-- windows older than 10 minutes are merged into 1-minute windows (calls and times summed, the
-- extremes kept) at the wall time of the merged window's last heartbeat, the one it keeps.
CREATE TABLE IF NOT EXISTS aggregates (
  rank       INTEGER NOT NULL,
  wall_ns    INTEGER NOT NULL,  -- CLOCK_REALTIME at the end of the window (its heartbeat's)
  comm_id    INTEGER NOT NULL,  -- 0: none
  function   TEXT    NOT NULL,
  site       INTEGER NOT NULL,  -- call_sites.site; 0: unknown
  size_class INTEGER NOT NULL,  -- bytes rounded down to three significant bits
  calls      INTEGER NOT NULL,
  total_ns   INTEGER NOT NULL,
  min_ns     INTEGER NOT NULL,
  max_ns     INTEGER NOT NULL,
  PRIMARY KEY (rank, wall_ns, comm_id, function, site, size_class)
) WITHOUT ROWID;

-- Sampled point-to-point messages (every COMMTAP_SAMPLE-th message of each (communicator,
-- sender, receiver, tag) pair), one row on each side. The sender's and the receiver's rows of one
-- message have the same (comm_id, tag, msg) with rank and peer swapped: see transfers_joined.
CREATE TABLE IF NOT EXISTS transfers (
  rank      INTEGER NOT NULL,
  direction TEXT    NOT NULL,  -- 'send' or 'recv'
  peer      INTEGER NOT NULL,  -- world rank of the other side
  comm_id   INTEGER NOT NULL,
  tag       INTEGER NOT NULL,
  msg       INTEGER NOT NULL,  -- 1 for the pair's first message with this tag on this comm
  function  TEXT    NOT NULL,
  bytes     INTEGER NOT NULL,  -- as sent, or as received
  site      INTEGER,           -- call_sites.site; NULL: unknown
  start_ns  INTEGER NOT NULL,  -- send: the send call's entry; recv: the receive's post
  end_ns    INTEGER NOT NULL,  -- send: local completion; recv: the receive was first seen done
                               -- (the message is in the buffer)
  -- recv: the last moment the receive was seen not yet done, so the message arrived in
  -- (seen_pending_ns, end_ns]. Where the call that completed it found it pending and waited (the
  -- MPI library, or commtap's polls, looking until it was done), end_ns itself. Where that call
  -- found it done at its first look (the program computed between post and wait), the last
  -- earlier look that found it pending (commtap's polls while the rank waited in another call, a
  -- failed MPI_Test), else start_ns: its arrival is known only to lie in that window. A blocking
  -- receive that commtap polled for (MPI_Iprobe: COMMTAP_YIELD, other receives watched, a probe
  -- leader) and found 50 us or more after its last look that did not (the rank off the CPU in
  -- between): that look. NULL: not known (sends; other blocking receives; receives completed by
  -- MPI_Waitany, MPI_Waitsome, MPI_Testany, MPI_Testsome, or not watched (more than 16
  -- outstanding, MPI_THREAD_MULTIPLE); files before version 12): end_ns is taken as the arrival.
  seen_pending_ns INTEGER,
  PRIMARY KEY (rank, direction, comm_id, peer, tag, msg)
) WITHOUT ROWID;

-- Estimates of each rank's offset to rank 0's monotonic clock: at MPI_Init, every
-- COMMTAP_CLOCK_SYNC collectives on MPI_COMM_WORLD, and at MPI_Finalize. Under a trace budget
-- estimates 10 minutes older than the newest keep the most precise of each minute of at_ns.
CREATE TABLE IF NOT EXISTS clock_offsets (
  rank      INTEGER NOT NULL,
  at_ns     INTEGER NOT NULL,  -- this rank's monotonic ns when it was made
  offset_ns INTEGER NOT NULL,  -- rank 0's clock = this rank's + offset
  error_ns  INTEGER NOT NULL,
  PRIMARY KEY (rank, at_ns)
);

-- Link probes (COMMTAP_PROBE_INTERVAL): at points all ranks agree on, the node leaders measure
-- every directed host pair, disjoint pairs at a time. Each row is one measurement, by the sending
-- host's leader: bytes = 1 is the latency (half the fastest of 2-5 one-byte round trips: more
-- while the two fastest differ by over 25%), a
-- larger size the time to deliver that many bytes (the fastest of 1-3 sends, alike, each timed to
-- the receiver's acknowledgement, less half a round trip); throughput is bytes / ns.
CREATE TABLE IF NOT EXISTS probes (
  rank      INTEGER NOT NULL,  -- the measuring leader
  at_ns     INTEGER NOT NULL,  -- its monotonic ns when the probe round began
  from_node INTEGER NOT NULL,  -- node indices (ranks.node of the leaders)
  to_node   INTEGER NOT NULL,
  from_host TEXT    NOT NULL,
  to_host   TEXT    NOT NULL,
  bytes     INTEGER NOT NULL,
  ns        INTEGER NOT NULL,
  -- latency rows: the fastest round trip's times, sent and received on the measuring leader's
  -- monotonic clock, the peer leader's receipt and reply on the peer's (NULL otherwise)
  sent_ns          INTEGER,
  peer_received_ns INTEGER,
  peer_replied_ns  INTEGER,
  received_ns      INTEGER,
  -- the slowest of the same measurements (half the slowest round trip, the slowest transfer): a
  -- link that drops packets delays a few of them by a retransmission timeout, which the fastest
  -- leaves out (NULL: not recorded, files before version 8)
  slowest_ns       INTEGER,
  -- the longest one-way delay from from_host to to_host in the round: latency rows over every
  -- small message that way (pings, replies, acknowledgements), transfer rows the longest of
  -- its transfers' data legs, until the receiver had it all; each split from its round trip with the
  -- fastest round trip's clock offset, so a retransmission stall is put on the direction that
  -- lost the packet (NULL: not recorded, files before version 9)
  slowest_oneway_ns INTEGER,
  -- how long the kept measurement's messages may have waited off the CPU for the measuring
  -- leader (from_held_ns) and for the peer's (to_held_ns): at each completion it waited for, the
  -- time since that leader last found it incomplete; the rest of ns is the network's at least
  -- (NULL: not recorded, files before version 13)
  from_held_ns     INTEGER,
  to_held_ns       INTEGER,
  -- 'round': measured in a probe round the leaders agreed on at a collective; 'async': by the
  -- asynchronous probes, pings and transfers the peer leader answered wherever it polled (NULL:
  -- files before version 14)
  method           TEXT,
  PRIMARY KEY (rank, at_ns, to_node, bytes)
) WITHOUT ROWID;

-- The kernel's counters of the rank's TCP connections (COMMTAP_TCP_INTERVAL; TCP_INFO), added up
-- per (local address, peer address) over the connections between them since the rank's first
-- read, so that they only grow; a row for each pair whose counters changed, at most every
-- COMMTAP_TCP_INTERVAL. An MPI library that runs over TCP between hosts holds a connection per
-- peer: the local address says which host sent (the rank's), the peer address which host
-- received (the host of the ranks that have it as their local address). Connections inside a
-- host and to programs outside the job appear too.
CREATE TABLE IF NOT EXISTS tcp_links (
  rank           INTEGER NOT NULL,
  wall_ns        INTEGER NOT NULL,  -- the heartbeat row written with it
  local_address  TEXT    NOT NULL,  -- without the port: '10.0.0.2', 'fd00::2'
  peer_address   TEXT    NOT NULL,
  connections    INTEGER NOT NULL,  -- open between the two at this read
  bytes_acked    INTEGER NOT NULL,  -- sent and acknowledged
  bytes_received INTEGER NOT NULL,
  data_segs_out  INTEGER NOT NULL,  -- segments sent that carried data, resends included
  data_segs_in   INTEGER NOT NULL,
  retrans_segs   INTEGER NOT NULL,  -- segments sent again (lost, or presumed lost)
  dsack_dups     INTEGER,           -- resends the receiver reported as duplicates (D-SACK): the
                                    -- first copy had arrived, so these were not lost (NULL: the
                                    -- kernel does not report them, before Linux 4.19)
  rtt_us         INTEGER NOT NULL,  -- the largest smoothed round trip of the open connections
  min_rtt_us     INTEGER NOT NULL,  -- the lowest round trip seen
  busy_us        INTEGER,           -- time with data sent and not yet acknowledged
                                    -- (tcpi_busy_time, in the kernel's ticks of 1-4 ms)
  rwnd_limited_us INTEGER,          -- of it, time the receiver's window was full: the
                                    -- receiving process did not read
  notsent_bytes  INTEGER,           -- written by the process and not yet sent, now: a backlog
                                    -- (NULL, as the two above: the kernel does not report
                                    -- them, before Linux 4.10; schema 16 or older)
  PRIMARY KEY (rank, local_address, peer_address, wall_ns)
) WITHOUT ROWID;

-- Sampled collective instances (COMMTAP_SAMPLE): (comm_id, seq) names the same instance on every
-- member rank, and every rank samples the same ones (a hash of comm_id and seq, one in
-- COMMTAP_SAMPLE). A trace budget keeps those whose hash / COMMTAP_SAMPLE is a multiple of 2^heartbeats.sample_level (nested: any level's are kept by
-- every rank at that level or below).
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
                              -- NCCL: completion on the stream (CUDA event); NULL: unknown
  algorithm TEXT   NOT NULL,  -- who ran it: 'native' (the library's own), or commtap's all-reduce
                              -- ('hier', 'hier-rs', 'hier-pipe', 'hier-star', 'star', 'ring',
                              -- 'rd', 'rabenseifner')
  PRIMARY KEY (rank, comm_id, seq)
) WITHOUT ROWID;

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
  file          TEXT,              -- source file of the call (from DWARF line tables), if known
  line          INTEGER,           -- its line, if known
  PRIMARY KEY (rank, site, frame)
);


-- Collective instances on rank 0's clock (enter/exit plus the rank's clock offset).
CREATE VIEW IF NOT EXISTS collectives_aligned AS
  SELECT c.rank, c.comm_id, c.seq, c.function, c.bytes, c.root, c.site,
         c.enter_ns + coalesce(r.clock_offset_ns, 0) AS enter_ns,
         c.exit_ns + coalesce(r.clock_offset_ns, 0) AS exit_ns
  FROM collectives c JOIN ranks r ON r.rank = c.rank;

-- Both sides of each sampled message, on rank 0's clock (each rank's offset at MPI_Init).
-- latency_ns: from the later of send start and receive post to the receive's completion. Its
-- two ends come from two ranks' clocks: it is right within +- clock_error_ns (the two offsets'
-- errors added), so a short message's latency can come out negative by up to that much.
CREATE VIEW IF NOT EXISTS transfers_joined AS
  SELECT s.rank AS sender, r.rank AS receiver, s.comm_id, s.tag, s.msg, s.bytes,
         s.start_ns + coalesce(rs.clock_offset_ns, 0) AS send_start_ns,
         s.end_ns + coalesce(rs.clock_offset_ns, 0) AS send_end_ns,
         r.start_ns + coalesce(rr.clock_offset_ns, 0) AS recv_posted_ns,
         r.end_ns + coalesce(rr.clock_offset_ns, 0) AS recv_end_ns,
         r.end_ns + coalesce(rr.clock_offset_ns, 0)
           - max(s.start_ns + coalesce(rs.clock_offset_ns, 0),
                 r.start_ns + coalesce(rr.clock_offset_ns, 0)) AS latency_ns,
         coalesce(rs.clock_error_ns, 0) + coalesce(rr.clock_error_ns, 0) AS clock_error_ns
  FROM transfers s
  JOIN transfers r ON r.direction = 'recv' AND r.rank = s.peer AND r.peer = s.rank
                  AND r.comm_id = s.comm_id AND r.tag = s.tag AND r.msg = s.msg
  JOIN ranks rs ON rs.rank = s.rank
  JOIN ranks rr ON rr.rank = r.rank
  WHERE s.direction = 'send';

-- Time per function per rank, for the common question "where does each rank spend its MPI time".
CREATE VIEW IF NOT EXISTS time_per_function AS
  SELECT rank, function, calls, time_ns, bytes,
         CAST(time_ns AS REAL) / max(calls, 1) AS mean_ns
  FROM call_totals;
