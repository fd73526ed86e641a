#!/usr/bin/env bash
# Data survives faults: a rank killed with SIGTERM writes a last window saying so and leaves a
# plain, intact file; a rank killed with SIGKILL leaves a file that passes integrity_check and
# still holds the heartbeats written before the kill. The ranks' pids come from the live database.
source "$(dirname "$0")/common.sh"

held_job() {  # trace-dir fifo: starts the held job in the background, waits for its heartbeats
  mkfifo "$2"
  COMMTAP_DIR=$1 COMMTAP_INTERVAL=50 run_preloaded 2 "$PROGRAMS/hold_in_barrier" "$2" \
    >/dev/null 2>&1 &
  job=$!
  for ((i = 0; i < 200; i++)); do
    n=$(db_query "$1" "SELECT count(DISTINCT rank) FROM heartbeats" 2>/dev/null) || n=0
    [ "$n" == 2 ] && return 0
    sleep 0.05
  done
  fail "no heartbeats from the held job"
}
pid_of() { db_query "$1" "SELECT pid FROM ranks WHERE rank = $2"; }
integrity() { sqlite3 "$1" "PRAGMA integrity_check"; }

held_job term gate-term
kill -TERM "$(pid_of term 1)"
wait $job || true
expect_equal SIGTERM "$(db_query term/rank-1.db "SELECT ended_by FROM ranks")" "rank 1 ended by"
last=$(db_query term/rank-1.db "SELECT state FROM heartbeats ORDER BY wall_ns DESC LIMIT 1")
expect_equal SIGTERM "$last" "rank 1's last heartbeat"
[ ! -e term/rank-1.db-wal ] || fail "SIGTERM left a WAL file: the last window was not closed"
expect_equal ok "$(integrity term/rank-1.db)" "integrity of rank 1's file"
pass "SIGTERM: last window written, file closed"

held_job kill gate-kill
kill -KILL "$(pid_of kill 1)"
wait $job || true
expect_equal ok "$(integrity kill/rank-1.db)" "integrity of the SIGKILLed rank's file"
beats=$(db_query kill/rank-1.db "SELECT count(*) FROM heartbeats")
[ "$beats" -ge 1 ] || fail "the SIGKILLed rank's heartbeats are gone"
expect_equal running "$(db_query kill/rank-1.db "SELECT ended_by FROM ranks")" "SIGKILLed rank"
pass "SIGKILL: the file is intact and keeps $beats heartbeats"
