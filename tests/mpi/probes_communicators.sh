#!/usr/bin/env bash
# Link probes in programs whose collectives are not on MPI_COMM_WORLD (issue 48): a 2-D stencil
# whose every collective is on a Cartesian communicator (its halos by point-to-point, then by
# neighbourhood collectives), a parameter server on a duplicate of MPI_COMM_WORLD, a pipeline
# whose only collectives are on a communicator split off without rank 0, two coupled models
# joined by an intercommunicator, and a one-sided halo exchange that synchronizes only by the
# fences of a window. On 4 pretend hosts (COMMTAP_TEST_NODES, one rank each) the probes run on
# the communicators' own collectives (the window's fences): every directed pair of the hosts each
# spans, and the pairs none spans asynchronously; the programs print what they print natively.
# Before probes followed any communicator, these jobs had no probe rows at all.
source "$(dirname "$0")/common.sh"

probed_run() {  # name program [args...] -> stdout of the job, traced in trace-NAME
  local name=$1
  shift
  run_preloaded 4 -genv COMMTAP_DIR "trace-$name" -genv COMMTAP_TEST_NODES 4 \
    -genv COMMTAP_PROBE_INTERVAL 1 -genv COMMTAP_YIELD 1 "$@"
}

pairs_probed() {  # dir -> directed pairs x sizes measured, each by its measuring host's leader
  db_query "$1" "SELECT count(DISTINCT from_node || '>' || to_node || ':' || bytes) FROM probes
    WHERE ns > 0 AND from_node <> to_node AND from_node = rank"
}

# probed_until name pairs program [args...] -> stdout of the job, which ran (the trace written
# every second) until `pairs` directed pairs x sizes were measured, or a minute had passed
probed_until() {
  local name=$1 want=$2 stop=$WORK/stop-$1
  shift 2
  probed_run "$name" "$@" "$stop" &
  wait_then_stop $! "$stop" pairs_are "trace-$name" "$want"
}

pairs_are() {  # dir pairs
  [ "$(pairs_probed "$1" 2>/dev/null)" == "$2" ]
}

# 300 steps of 3 ms of compute (a sleep) at least: one round comes at the communicator's 16th
# collective whatever the load, and every pair is measured in each round.
# NAME=... names a second run of the same program (its files and messages). UNTIL_PROBED=1 runs
# a program that takes a stop file (its last argument) until every expected pair is in its trace:
# pairs measured asynchronously wait for their leaders' turns, which a loaded machine can put
# off (the verdict does not depend on it); the native run then takes as many steps.
check() {  # program expected_pairs forbidden_node(-1: none) what [args...]
  local path=$1 program=${NAME:-$1} want=$2 forbidden=$3 what=$4
  shift 4
  if [ -n "${UNTIL_PROBED:-}" ]; then
    probed_until "$program" "$want" "$PROGRAMS/$path" "$@" >"$program.probed" ||
      fail "$program: probed run"
    local steps_run
    steps_run=$(sed -n 's/.* steps \([0-9]*\) .*/\1/p' "$program.probed")
    [ -n "$steps_run" ] || fail "$program: the probed run printed no step count"
    run_native 4 "$PROGRAMS/$path" "$steps_run" "${@:2}" >"$program.native" ||
      fail "$program: native run"
  else
    run_native 4 "$PROGRAMS/$path" "$@" >"$program.native" || fail "$program: native run"
    probed_run "$program" "$PROGRAMS/$path" "$@" >"$program.probed" || fail "$program: probed run"
  fi
  [ -s "$program.native" ] || fail "$program: native run printed nothing"
  if [ -n "${STEPS_ONLY:-}" ]; then
    # The program's checksum varies between native runs (one_sided_halo under MPICH 4.0.2): the
    # steps it reports are compared.
    cut -d' ' -f1-2 "$program.native" >"$program.native.steps"
    cut -d' ' -f1-2 "$program.probed" >"$program.probed.steps"
    expect_same_files "$program.native.steps" "$program.probed.steps" "$program: steps reported"
  else
    expect_same_files "$program.native" "$program.probed" "$program: native and probed outputs"
  fi
  local rows pairs outside
  rows=$(db_query "trace-$program" "SELECT count(*) FROM probes")
  [ "$rows" -gt 0 ] || fail "$program: no probe rows ($what)"
  # Each measured pair by its measuring host's rank (one rank per pretend host), latency and
  # throughput.
  pairs=$(pairs_probed "trace-$program")
  expect_equal "$want" "$pairs" "$program: directed pairs x sizes probed ($what)"
  outside=$(db_query "trace-$program" "SELECT count(*) FROM probes WHERE from_node = $forbidden
              OR to_node = $forbidden")
  expect_equal 0 "$outside" "$program: rows of a host outside the communicator"
  pass "$program: $pairs directed pairs x sizes probed in $rows rows ($what)"
}

check stencil_cart 24 -1 "collectives on a Cartesian communicator only" 300 64 3000
# The same stencil with its halos moved by MPI_Neighbor_alltoall and an all-reduce every 50th
# step only: the rounds run at the neighbourhood collectives (6 all-reduces in 300 steps would
# never reach a communicator's 16th collective), and every directed pair is measured in them.
NAME=stencil_neighbor check stencil_cart 24 -1 "neighbourhood collectives" 300 64 3000 neighbor
expect_equal 12 "$(db_query trace-stencil_neighbor "SELECT count(DISTINCT from_node || '>' ||
                     to_node) FROM probes WHERE method = 'round'")" \
  "stencil_neighbor: directed pairs measured in rounds"
neighbor_calls=$(db_query trace-stencil_neighbor "SELECT sum(calls) FROM call_totals WHERE
                   function = 'MPI_Neighbor_alltoall'")
expect_equal 1200 "$neighbor_calls" "stencil_neighbor: MPI_Neighbor_alltoall calls recorded"
pass "stencil_neighbor: 1200 neighbourhood all-to-alls recorded, rounds on them"
check param_server 24 -1 "collectives on a duplicate of MPI_COMM_WORLD" 300 64 3000
# The split communicator spans hosts 1-3: the rounds measure their 6 directed pairs, and the
# asynchronous probes the 6 with host 0, which no communicator with collectives spans (host 0's
# leader answers them in its blocking sends and receives): every directed pair, host 0's only
# asynchronously.
UNTIL_PROBED=1 check split_pipeline 24 -1 "collectives on a split communicator without rank 0 only" \
  300 1024 3000
method() {  # where
  db_query trace-split_pipeline "SELECT count(DISTINCT from_node || '>' || to_node) FROM probes
    WHERE $1"
}
expect_equal 6 "$(method "method = 'round' AND from_node <> 0 AND to_node <> 0")" \
  "split_pipeline: pairs of hosts 1-3 measured in rounds"
# (Pairs of hosts 1-3 are measured asynchronously too where their rounds are overdue, two
# intervals without one, as a loaded machine's cost bound may space them: not counted here.)
expect_equal 6 "$(method "method = 'async' AND (from_node = 0 OR to_node = 0)")" \
  "split_pipeline: host 0's pairs measured asynchronously"
expect_equal 0 "$(method "method <> 'async' AND (from_node = 0 OR to_node = 0)")" \
  "split_pipeline: host 0's pairs in rounds"
pass "split_pipeline: the split communicator's pairs in rounds, host 0's asynchronously"
# Two models of 2 ranks (hosts 0-1 and 2-3), each all-reducing on its own communicator, coupled
# through an intercommunicator whose all-reduce both models call: the pairs within each model on
# their communicators, and those across the models on the intercommunicator (both groups are its
# members), every directed pair of the 4 hosts. 800 steps: the intercommunicator's 16th all-reduce
# comes at step 160, within a second of the models' first rounds, and the next decision on it at
# least a second after those.
check coupled_models 24 -1 "collectives on two split communicators and an intercommunicator" \
  800 64 3000
across=$(db_query trace-coupled_models "SELECT count(DISTINCT from_node || '>' || to_node) FROM
           probes WHERE from_node / 2 <> to_node / 2")
expect_equal 8 "$across" "coupled_models: directed pairs across the models probed"
pass "coupled_models: the 8 directed pairs across the intercommunicator are probed"
# A program that synchronizes only by the fences of a window (one_sided_halo: no collective until
# its checksum, no point-to-point message): the rounds run at the fences, collective over the
# window's group, and measure every directed pair there. (The asynchronous probes alone are
# answered only at a fence's entry, once a step, and never while a leader is blocked in one.)
STEPS_ONLY=1 check one_sided_halo 24 -1 "the fences of a window only" 300 64 3000
expect_equal 12 "$(db_query trace-one_sided_halo "SELECT count(DISTINCT from_node || '>' ||
                     to_node) FROM probes WHERE method = 'round'")" \
  "one_sided_halo: directed pairs measured in rounds at the fences"
pass "one_sided_halo: every directed pair measured in rounds at the fences"
# Rounds that never come while collectives go on: a Cartesian communicator's all-reduce every
# 0.8 s, whose first decision would come at its 16th collective, after the job's 12. Once two
# intervals have passed without a round, the pairs are measured asynchronously whatever the
# collectives (a fault that slows a program's collectives puts its next decision off as much:
# CoMD's host network was never measured, docs/faults.md sweep 56). Before, a communicator not
# yet decided on kept the asynchronous probes off, and this job had no probe rows at all.
run_preloaded 4 -genv COMMTAP_DIR trace-overdue -genv COMMTAP_TEST_NODES 4 \
  -genv COMMTAP_PROBE_INTERVAL 1 -genv COMMTAP_YIELD 1 "$PROGRAMS/stencil_cart" 12 64 800000 \
  >overdue.out || fail "overdue: probed run"
expect_equal 0 "$(db_query trace-overdue "SELECT count(*) FROM probes WHERE method = 'round'")" \
  "overdue: probe rounds (no decision point in 12 collectives)"
overdue=$(db_query trace-overdue "SELECT count(DISTINCT from_node || '>' || to_node) FROM probes
            WHERE method = 'async' AND ns > 0")
[ "$overdue" -gt 0 ] || fail "overdue: no pair measured asynchronously while no round came"
pass "overdue rounds: $overdue directed pairs measured asynchronously beside the collectives"
