#!/usr/bin/env bash
# MPI_THREAD_MULTIPLE: 4 threads per rank making nonblocking point-to-point calls, completing
# them with MPI_Waitall and reducing, each on its own communicator. Every call and every
# completion is counted exactly, and the results equal the native run's.
source "$(dirname "$0")/common.sh"

threads=4 iterations=100
run_native 2 "$PROGRAMS/threads" $threads $iterations >native.out
COMMTAP_DIR=trace run_preloaded 2 "$PROGRAMS/threads" $threads $iterations >preloaded.out
expect_same_files native.out preloaded.out "threads output"
n=$((threads * iterations))
for rank in 0 1; do
  got=$(db_query trace "SELECT function, calls, completions FROM call_totals WHERE rank = $rank
          AND function IN ('MPI_Isend', 'MPI_Irecv', 'MPI_Waitall', 'MPI_Allreduce',
          'MPI_Comm_dup', 'MPI_Init_thread') ORDER BY function" | tr '\n' ' ')
  expect_equal "MPI_Allreduce|$n|0 MPI_Comm_dup|$threads|0 MPI_Init_thread|1|0 MPI_Irecv|$n|$n MPI_Isend|$n|$n MPI_Waitall|$n|0 " \
    "$got" "rank $rank thread counts"
done
pass "$threads threads x $iterations iterations counted exactly on both ranks"

COMMTAP_YIELD=1 COMMTAP_DIR=trace-yield run_preloaded 2 "$PROGRAMS/threads" $threads $iterations \
  >yield.out
expect_same_files native.out yield.out "threads output in yield mode"
pass "yield mode under MPI_THREAD_MULTIPLE"
