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
train=("$PROGRAMS/nccl_train" --steps 200 --split --compute-us 200)

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

# The other constructors: InitRankConfig and InitRankScalable on all 4 ranks (ids from the
# unique id), Shrink on the 3 that remain (id from the world one and the excluded rank), each
# with one all-reduce that every member records under the same id and sequence number.
COMMTAP_SAMPLE=1 timeout "$LIMIT" "$CLI" run --dir made -- "${launch[@]}" "$PROGRAMS/nccl_train" --steps 5 \
  --constructors --compute-us 100 >made.out 2>&1 || {
  cat made.out >&2
  fail "run with every constructor"
}
got=$(db_query made "SELECT created_by, count(*), count(DISTINCT comm_id), count(DISTINCT comm_rank),
        max(size) FROM communicators GROUP BY created_by ORDER BY created_by" | tr '\n' ';')
expect_equal "ncclCommInitRank|4|1|4|4;ncclCommInitRankConfig|4|1|4|4;ncclCommInitRankScalable|4|1|4|4;ncclCommShrink|3|1|3|3;" \
  "$got" "every constructor's communicator, one id on all its members"
expect_equal "1" "$(db_query made "SELECT count(*) FROM communicators s JOIN communicators w
  ON w.rank = s.rank AND w.comm_id = s.parent_id AND w.created_by = 'ncclCommInitRank'
  WHERE s.created_by = 'ncclCommShrink' AND s.rank = 0")" "the shrunk communicator's parent"
got=$(db_query made "SELECT m.created_by, count(DISTINCT c.rank), count(DISTINCT c.seq)
        FROM collectives c JOIN communicators m ON m.rank = c.rank AND m.comm_id = c.comm_id
        WHERE m.created_by IN ('ncclCommInitRankConfig', 'ncclCommInitRankScalable',
          'ncclCommShrink') GROUP BY m.created_by ORDER BY 1" | tr '\n' ';')
expect_equal "ncclCommInitRankConfig|4|1;ncclCommInitRankScalable|4|1;ncclCommShrink|3|1;" "$got" \
  "their all-reduces, one instance on every member"
expect_equal "4" "$(db_query made "SELECT count(DISTINCT rank) FROM call_totals
  WHERE function = 'ncclCommFinalize' AND calls >= 2")" "ncclCommFinalize recorded"
pass "InitRankConfig, InitRankScalable and Shrink: ids equal on their members"

# The analyzer reads it: a healthy job (exit 0), its clocks aligned without MPI.
"$CLI" analyze trace >analysis.txt 2>&1 || {
  cat analysis.txt >&2
  fail "commtap analyze on a healthy NCCL job"
}
pass "commtap analyze reads the trace of a job without MPI"

# Clocks 25 ms apart per rank (a test-only shift, as if each rank were a host whose clock
# disagrees): with no MPI to measure offsets, the analyzer aligns the ranks by their collectives'
# completions. Aligned, each all-reduce ends within 20 ms on every rank (one rank off by its skew:
# 25 ms or more; unaligned, 75 ms), and the job reads healthy.
COMMTAP_TEST_CLOCK_SKEW=25000000 timeout "$LIMIT" "$CLI" run --dir skewed -- "${launch[@]}" \
  "${train[@]}" >/dev/null 2>skewed.err || {
  cat skewed.err >&2
  fail "run with skewed clocks"
}
"$CLI" analyze --json skewed >skewed.json || {
  cat skewed.json >&2
  fail "commtap analyze with skewed clocks: a finding, or an error"
}
grep -q '"clocks": "collective completions' skewed.json || fail "clocks not aligned by completions"
"$CLI" export skewed -o skewed-trace.json 2>/dev/null || fail "export with skewed clocks"
spread=$(grep '"name":"ncclAllReduce"' skewed-trace.json |
  sed 's/.*"comm_id":\([0-9]*\),"seq":\([0-9]*\).*"ts":\([0-9.]*\),"dur":\([0-9.]*\).*/\1:\2 \3 \4/' |
  awk '{ end = $2 + $3; if (!($1 in lo) || end < lo[$1]) lo[$1] = end
         if (!($1 in hi) || end > hi[$1]) hi[$1] = end; n[$1]++ }
       END { worst = 0; for (k in n) if (n[k] > 1 && hi[k] - lo[k] > worst) worst = hi[k] - lo[k]
             printf "%d %d", worst, length(n) }')
read -r worst instances <<<"$spread"
[ "$instances" -ge 3 ] || fail "too few all-reduce instances in the export ($instances)"
[ "$worst" -lt 20000 ] || fail "aligned all-reduce ends $worst us apart across ranks (skew 25 ms/rank)"
pass "clocks skewed by 25 ms per rank aligned from completions: ends within $worst us"

# A program that never makes an MPI or NCCL call records nothing, and commtap run says so.
timeout "$LIMIT" "$CLI" run --dir none -- /bin/true 2>none.err || fail "commtap run /bin/true"
grep -q "no rank recorded anything" none.err || fail "commtap run did not say nothing was recorded"
pass "commtap run says when no rank recorded anything"
