#!/usr/bin/env bash
# NCCL jobs without MPI, as torchrun starts them: launch_ranks (environment variables only)
# starts nccl_train on the test suite's fake NCCL, which moves the data between the processes
# over TCP and calls NCCL's profiler plugin as NCCL does. Under `commtap run` every rank records
# (no MPI call anywhere), the ids of every communicator agree across its members, and the
# analyzer reads the trace; the results of the training loop are those of the native run.
source "$(dirname "$0")/common.sh"

if [ "${COMMTAP_TEST_HAVE_NCCL:-0}" != 1 ]; then
  echo "skipped: built without nccl.h"
  exit 77
fi
launch=("$PROGRAMS/launch_ranks" -n 4 --master-port $((20000 + $$ % 20000)) --)
train=("$PROGRAMS/nccl_train" --steps 60 --split --compute-us 200)

# Native, then under commtap: the same results (the program checks every all-reduce).
timeout "$LIMIT" "${launch[@]}" "${train[@]}" >native.out 2>&1 || {
  cat native.out >&2
  fail "native run"
}
timeout "$LIMIT" "$CLI" run --dir trace -- "${launch[@]}" "${train[@]}" >preloaded.out \
  2>preloaded.err || {
  cat preloaded.out preloaded.err >&2
  fail "preloaded run"
}
grep -q "result checks passed" preloaded.out || fail "the training loop's results under commtap"
grep -q "trace database: trace (4 rank files)" preloaded.err || {
  cat preloaded.err >&2
  fail "commtap run did not report 4 rank files"
}
grep -qi "MPI" <(db_query trace "SELECT function FROM call_totals WHERE function LIKE 'MPI%'") &&
  fail "an MPI call was recorded in a job without MPI"
expect_equal "0|4|none;1|4|none;2|4|none;3|4|none;" \
  "$(db_query trace "SELECT rank, world_size, mpi_library FROM ranks ORDER BY rank" | tr '\n' ';')" \
  "ranks from the launcher's environment"
expect_equal "1" "$(db_query trace "SELECT count(DISTINCT value) FROM meta WHERE key = 'job_id'")" "one job id"
pass "a job without MPI records every rank under commtap run"

# Every communicator's id is equal on its members: the world one on 4 ranks, the two halves of
# the split on 2 ranks each, both made from the world one.
got=$(db_query trace "SELECT created_by, count(*), count(DISTINCT comm_rank), min(size), max(size)
        FROM communicators WHERE created_by LIKE 'nccl%' GROUP BY comm_id
        ORDER BY created_by, min(comm_rank), count(*)" | tr '\n' ';')
expect_equal "ncclCommInitRank|4|4|4|4;ncclCommSplit|2|2|2|2;ncclCommSplit|2|2|2|2;" "$got" \
  "communicators and their members"
expect_equal "1" "$(db_query trace "SELECT count(DISTINCT c.comm_id) FROM communicators c
  JOIN communicators w ON w.comm_id = c.parent_id AND w.created_by = 'ncclCommInitRank'
  WHERE c.created_by = 'ncclCommSplit' AND c.rank = 0")" "the split's parent is the world one"
# All ranks record the same collective instances of the world communicator.
got=$(db_query trace "SELECT count(DISTINCT rank), count(DISTINCT seq), count(*) FROM collectives
        WHERE comm_id = (SELECT comm_id FROM communicators WHERE created_by = 'ncclCommInitRank'
        LIMIT 1)")
ranks=${got%%|*}
expect_equal 4 "$ranks" "ranks with world collective instances"
pass "NCCL communicator ids agree across members for InitRank and Split"

# The analyzer reads it: a healthy job (exit 0), its clocks aligned without MPI.
"$CLI" analyze trace >analysis.txt 2>&1 || {
  cat analysis.txt >&2
  fail "commtap analyze on a healthy NCCL job"
}
pass "commtap analyze reads the trace of a job without MPI"

# A program that never makes an MPI or NCCL call records nothing, and commtap run says so.
timeout "$LIMIT" "$CLI" run --dir none -- /bin/true 2>none.err || fail "commtap run /bin/true"
grep -q "no rank recorded anything" none.err || fail "commtap run did not say nothing was recorded"
pass "commtap run says when no rank recorded anything"
