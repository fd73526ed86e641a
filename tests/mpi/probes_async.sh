#!/usr/bin/env bash
# Asynchronous link probes (issue 48): a program with no collective after MPI_Init (a ring of
# MPI_Irecv/MPI_Send/MPI_Wait and MPI_Sendrecv_replace) is never probed by the collective rounds;
# its hosts' leaders measure their pairs with pings and transfers answered wherever the peer
# leader polls (probes/async_probes.hpp). On pretend hosts (COMMTAP_TEST_NODES): every directed
# pair of the hosts gets latency and throughput rows, measured by its sending host's leader only,
# with sane windows; the program prints what it prints natively, in both wait modes; none with
# probes off. Before the asynchronous probes, this job had no probe rows at all.
source "$(dirname "$0")/common.sh"

program=$PROGRAMS/ring_no_collectives
# At least 150 steps of 8 ms of compute (a sleep), about 1.3 s: the asynchronous probes start
# once no collective round or collective has come for the interval (1 s), and a tournament of 4
# hosts meets every pair in 3 slots of a third of the interval. The probed runs then go on until
# every pair's rows are in the trace (or a minute has passed): how soon that is depends on the
# machine's load (a leader over its cost bound skips measurements), the verdict does not.
steps=150 doubles=512 work_us=8000

count_pairs() {  # dir -> directed pairs x sizes with rows so far
  db_query "$1" "SELECT count(DISTINCT from_node || '>' || to_node || ':' || bytes)
    FROM probes WHERE ns > 0 AND from_node <> to_node"
}

# probed dir ranks nodes [more -genv pairs] -> stdout of the job, which ran until every directed
# pair of the hosts was measured in both sizes (24 rows, the trace written every second)
probed() {
  local dir=$1 ranks=$2 nodes=$3
  shift 3
  local stop=$WORK/stop-$dir
  run_preloaded "$ranks" -genv COMMTAP_DIR "$dir" -genv COMMTAP_TEST_NODES "$nodes" \
    -genv COMMTAP_PROBE_INTERVAL 1 "$@" "$program" $steps $doubles $work_us "$stop" &
  wait_then_stop $! "$stop" every_pair_measured "$dir"
}

every_pair_measured() {  # dir
  [ "$(count_pairs "$1" 2>/dev/null)" == 24 ]
}

# native N probed.out -> the same program natively, for as many steps as the probed run took
native_like() {
  local steps_run
  steps_run=$(sed -n 's/.* steps \([0-9]*\) .*/\1/p' "$2")
  [ -n "$steps_run" ] || fail "the probed run printed no step count"
  run_native "$1" "$program" "$steps_run" $doubles $work_us
}

check_rows() {  # dir what
  local dir=$1 what=$2
  local pairs leaders insane held
  pairs=$(count_pairs "$dir")
  expect_equal 24 "$pairs" "directed pairs x sizes probed ($what)"
  expect_equal async "$(db_query "$dir" "SELECT group_concat(DISTINCT method) FROM probes")" \
    "how the rows were measured ($what)"
  # One measuring rank per host: its leader, whose host is the row's from_node.
  leaders=$(db_query "$dir" "SELECT count(DISTINCT rank) || ' ' || count(DISTINCT rank || ':' ||
              from_node) FROM probes")
  expect_equal "4 4" "$leaders" "measuring ranks, and ranks x measuring hosts ($what)"
  # A latency row's four times are the tightest ping's: sent <= found by the peer <= replied and,
  # on one machine's clock (1 ms of slack for two processes' counter calibrations), the round
  # trip is at least twice the latency (the upper bound takes the peer's time to reply out).
  insane=$(db_query "$dir" "SELECT count(*) FROM probes WHERE bytes = 1 AND (
             sent_ns IS NULL OR peer_received_ns IS NULL OR peer_replied_ns IS NULL OR
             received_ns IS NULL OR sent_ns > peer_received_ns + 1000000 OR
             peer_received_ns > peer_replied_ns OR peer_replied_ns > received_ns + 1000000 OR
             received_ns - sent_ns < 2 * ns - 1 OR slowest_ns < ns)")
  expect_equal 0 "$insane" "latency rows with missing or disordered times ($what)"
  # Held times: recorded on every row; a latency row's own side is part of its round trip.
  held=$(db_query "$dir" "SELECT count(*) FROM probes WHERE from_held_ns IS NULL OR
           to_held_ns IS NULL OR (bytes = 1 AND from_held_ns > received_ns - sent_ns)")
  expect_equal 0 "$held" "rows without held times, or held longer than the round trip ($what)"
  # A transfer of COMMTAP_PROBE_BYTES takes longer than nothing and is never faster than memory.
  fast=$(db_query "$dir" "SELECT count(*) FROM probes WHERE bytes > 1 AND (bytes <> 262144 OR
           ns < 1000)")
  expect_equal 0 "$fast" "transfer rows of the wrong size or under a microsecond ($what)"
}

for mode in 0 1; do
  probed trace-$mode 4 4 -genv COMMTAP_YIELD $mode >probed.out || fail "probed run (yield $mode)"
  native_like 4 probed.out >native.out
  expect_same_files native.out probed.out "native and probed outputs (yield $mode)"
  check_rows trace-$mode "4 hosts of 1 rank, yield $mode"
  pass "4 pretend hosts, yield $mode: 12 directed pairs x 2 sizes measured asynchronously"
done

# Two ranks per host: the leaders measure, the others only wait at MPI_Finalize.
probed trace-8 8 4 >probed8.out || fail "probed run on 8 ranks"
native_like 8 probed8.out >native8.out
expect_same_files native8.out probed8.out "native and probed outputs (8 ranks)"
check_rows trace-8 "4 hosts of 2 ranks"
pass "4 pretend hosts of 2 ranks: only the leaders measure, every pair"

run_preloaded 4 -genv COMMTAP_DIR trace-off -genv COMMTAP_TEST_NODES 4 \
  -genv COMMTAP_PROBE_INTERVAL 0 "$program" 300 $doubles 10000 >/dev/null || fail "run with probes off"
expect_equal 0 "$(db_query trace-off "SELECT count(*) FROM probes")" "probe rows with interval 0"
pass "no rows with probes off"
