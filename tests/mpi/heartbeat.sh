#!/usr/bin/env bash
# The trace database is written while the job runs and can be read meanwhile: with one rank held
# outside MPI and the other waiting in MPI_Barrier, the heartbeats say exactly that, window after
# window; once released, the last rows say how each rank ended. Files are private to the user.
# A rank's process stopped for a while shows in its stall counter.
source "$(dirname "$0")/common.sh"

mkfifo gate
COMMTAP_DIR=trace COMMTAP_INTERVAL=50 run_preloaded 2 "$PROGRAMS/hold_in_barrier" gate >job.out &
job=$!
release() { exec 3>gate; echo x >&3; exec 3>&-; }
trap 'release 2>/dev/null || true; wait $job 2>/dev/null || true; rm -rf "$WORK"' EXIT

# Poll (bounded) until both ranks have written a few heartbeats while held.
state=""
for ((i = 0; i < 200; i++)); do
  state=$(db_query trace "SELECT rank, state, coalesce(function, ''), coalesce(comm_id, '')
            FROM heartbeats h WHERE wall_ns = (SELECT max(wall_ns) FROM heartbeats
            WHERE rank = h.rank) AND (SELECT count(*) FROM heartbeats WHERE rank = h.rank) >= 3
            ORDER BY rank" 2>/dev/null | tr '\n' ' ') || true
  [ "$state" == "0|computing|| 1|in_call|MPI_Barrier|1 " ] && break
  sleep 0.05
done
expect_equal "0|computing|| 1|in_call|MPI_Barrier|1 " "$state" "heartbeats of the held job"
since=$(db_query trace "SELECT count(DISTINCT since_ns) FROM heartbeats
          WHERE rank = 1 AND state = 'in_call'")
expect_equal 1 "$since" "the barrier's entry time, the same in every window"
running=$(db_query trace "SELECT group_concat(ended_by) FROM ranks")
expect_equal "running,running" "$running" "ranks while the job runs"
pass "live heartbeats: rank 1 waits in MPI_Barrier on MPI_COMM_WORLD, rank 0 computes"

# Stall counters: rank 1's process stopped for 1.5 s (a fault, as a throttled cgroup or a
# SIGSTOP duty cycle would inflict) shows in its stalled_ns, and much less in rank 0's. (Rank 0's
# is compared with rank 1's, not with a constant: on a loaded machine its writer wakes late too,
# and each late wakeup counts as a stall.)
stalled() { db_query trace "SELECT coalesce(max(stalled_ns), 0) FROM heartbeats WHERE rank = $1"; }
before0=$(stalled 0) before1=$(stalled 1)
pid=$(db_query trace "SELECT pid FROM ranks WHERE rank = 1")
kill -STOP "$pid"
sleep 1.5
kill -CONT "$pid"
for ((i = 0; i < 200; i++)); do
  [ $(($(stalled 1) - before1)) -ge 1200000000 ] && break
  sleep 0.05
done
grown1=$(($(stalled 1) - before1)) grown0=$(($(stalled 0) - before0))
[ "$grown1" -ge 1200000000 ] || fail "rank 1 stopped 1.5 s: its stalled_ns grew by $grown1 ns only"
[ "$grown0" -lt $((grown1 / 3)) ] ||
  fail "rank 0 was not stopped: its stalled_ns grew by $grown0 ns, rank 1's by $grown1 ns"
pass "stall counters: rank 1 stopped 1.5 s counted $((grown1 / 1000000)) ms, rank 0 $((grown0 / 1000000)) ms"

release
wait $job
trap 'rm -rf "$WORK"' EXIT
expect_equal released "$(cat job.out)" "job output"
got=$(db_query trace "SELECT h.rank, h.state FROM heartbeats h WHERE wall_ns = (SELECT max(wall_ns)
        FROM heartbeats WHERE rank = h.rank) ORDER BY rank" | tr '\n' ' ')
expect_equal "0|finalize 1|finalize " "$got" "last heartbeats"
expect_equal "finalize,finalize" "$(db_query trace "SELECT group_concat(ended_by) FROM ranks")" \
  "ranks at the end"
[ "$(ls trace)" == "$(printf 'rank-0.db\nrank-1.db')" ] || fail "leftover files: $(ls trace)"
[ "$(stat -c %a trace/rank-0.db)" == 600 ] || fail "rank-0.db is not private to the user"
pass "after the release: ended by finalize, one private file per rank"

# A rank blocked in MPI_Probe (a worker waiting for its next task) is in a call, on the probe's
# communicator, not computing: a hang there is told from work.
rm -f gate
mkfifo gate
COMMTAP_DIR=trace-probe COMMTAP_INTERVAL=50 run_preloaded 2 "$PROGRAMS/hold_in_barrier" gate probe \
  >probe.out &
job=$!
trap 'release 2>/dev/null || true; wait $job 2>/dev/null || true; rm -rf "$WORK"' EXIT
state=""
for ((i = 0; i < 200; i++)); do
  state=$(db_query trace-probe "SELECT state || ':' || coalesce(function, '') || ':' ||
            coalesce(comm_id, '') FROM heartbeats WHERE rank = 1 ORDER BY wall_ns DESC LIMIT 1" \
    2>/dev/null) || true
  [ "$state" == "in_call:MPI_Probe:1" ] && break
  sleep 0.05
done
expect_equal "in_call:MPI_Probe:1" "$state" "heartbeat of a rank blocked in MPI_Probe"
release
wait $job
trap 'rm -rf "$WORK"' EXIT
expect_equal released "$(cat probe.out)" "output of the probing job"
pass "a rank blocked in MPI_Probe is in_call MPI_Probe"

COMMTAP_DIR=shared COMMTAP_GROUP_READ=1 run_preloaded 2 "$PROGRAMS/toy_train" 2 64 >/dev/null
[ "$(stat -c %a shared/rank-1.db)" == 640 ] || fail "COMMTAP_GROUP_READ=1 file mode"
got=$(db_query shared "SELECT group_concat(node || ':' || local_rank) FROM ranks")
expect_equal "0:0,0:1" "$got" "node index and local rank on one machine"
pass "COMMTAP_GROUP_READ and node facts"

COMMTAP_DIR=noticks COMMTAP_STALL_TICK=0 run_preloaded 2 "$PROGRAMS/toy_train" 2 64 >/dev/null
got=$(db_query noticks "SELECT count(*), count(stalled_ns) FROM heartbeats")
[[ "$got" == *"|0" && "$got" != "0|0" ]] || fail "COMMTAP_STALL_TICK=0: heartbeats, stalled_ns: $got"
pass "COMMTAP_STALL_TICK=0: no stall counters ($got)"
