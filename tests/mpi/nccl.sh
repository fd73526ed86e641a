#!/usr/bin/env bash
# NCCL interception without a GPU: a program linked with the fake libnccl.so.2 makes NCCL calls
# after MPI_Init. Preloaded, every call still reaches the library (the fake counts them, so the
# output matches the native run) and every call is recorded under its nccl* name.
source "$(dirname "$0")/common.sh"

if [ "${COMMTAP_TEST_HAVE_NCCL:-0}" != 1 ]; then
  echo "skipped: built without nccl.h"
  exit 77
fi
run_native 1 "$PROGRAMS/nccl_user" 5 >native.out
COMMTAP_DIR=trace run_preloaded 1 "$PROGRAMS/nccl_user" 5 >preloaded.out
expect_same_files native.out preloaded.out "calls reaching the NCCL library"
grep -q "ncclAllReduce reached the library 5 times" preloaded.out || fail "fake NCCL not reached"
got=$(db_query trace "SELECT function, calls, bytes FROM call_totals WHERE function LIKE 'nccl%'
        ORDER BY function" | tr '\n' ' ')
expect_equal "ncclAllReduce|5|5120 ncclBroadcast|1|1024 ncclCommDestroy|1|0 ncclCommInitRank|1|0 ncclGroupEnd|5|0 ncclGroupStart|5|0 ncclRecv|5|320 ncclSend|5|320 " \
  "$got" "recorded NCCL calls"
# Collectives are aggregated per call site like MPI's (the shared call scope of interpose/).
expect_equal "ncclAllReduce|5 ncclBroadcast|1 " "$(db_query trace "SELECT function, sum(calls)
  FROM aggregates WHERE function LIKE 'nccl%' GROUP BY 1 ORDER BY 1" | tr '\n' ' ')" \
  "aggregated NCCL collectives"
pass "NCCL calls intercepted and forwarded to pnccl*, collectives aggregated"

# NCCL communicators and collective instances: the id comes from the ncclUniqueId, so both
# ranks agree; collectives take sequence numbers (point-to-point and group calls do not); the
# completion time is unknown without CUDA events.
COMMTAP_DIR=trace2 COMMTAP_SAMPLE=1 run_preloaded 2 "$PROGRAMS/nccl_user" 5 >/dev/null
got=$(db_query trace2 "SELECT count(DISTINCT comm_id), count(*), min(size), max(size)
        FROM communicators WHERE created_by = 'ncclCommInitRank'")
expect_equal "1|2|2|2" "$got" "the NCCL communicator on both ranks"
got=$(db_query trace2 "SELECT rank, group_concat(instance, ' ') FROM (
        SELECT c.rank, c.function || '#' || c.seq AS instance FROM collectives c
        JOIN communicators m ON m.rank = c.rank AND m.comm_id = c.comm_id
        WHERE m.created_by = 'ncclCommInitRank' AND c.exit_ns IS NULL ORDER BY c.rank, c.seq)
        GROUP BY rank ORDER BY rank" | tr '\n' ';')
instances="ncclAllReduce#1 ncclAllReduce#2 ncclAllReduce#3 ncclAllReduce#4 ncclAllReduce#5 ncclBroadcast#6"
expect_equal "0|$instances;1|$instances;" "$got" "NCCL collective instances"
pass "NCCL communicator ids and collective sequence numbers agree across ranks"
