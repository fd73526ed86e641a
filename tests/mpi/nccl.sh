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
pass "NCCL calls intercepted and forwarded to pnccl*"
