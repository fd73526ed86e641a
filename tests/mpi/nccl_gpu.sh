#!/usr/bin/env bash
# NCCL completions on a real GPU (skipped without one): the real libnccl on a 1-rank
# communicator, commtap preloaded with every instance sampled. Each collective's completion
# comes from a CUDA event on the application's stream: known, after the enqueue, and for the
# group's two all-reduces after the group's end (markers recorded at ncclGroupEnd). The rank's
# GPU is named with its PCI bus id.
source "$(dirname "$0")/common.sh"

if [ ! -x "$PROGRAMS/nccl_gpu" ]; then
  echo "skipped: built without the real NCCL library"
  exit 77
fi
out=$(COMMTAP_DIR=trace COMMTAP_SAMPLE=1 run_preloaded 1 "$PROGRAMS/nccl_gpu")
if [ "$out" = "no gpu" ]; then
  echo "skipped: no usable GPU"
  exit 77
fi
expect_equal done "$out" "the program's output"
got=$(db_query trace "SELECT count(*), count(exit_ns), sum(exit_ns > enter_ns) FROM collectives
        WHERE function = 'ncclAllReduce'")
expect_equal "5|5|5" "$got" "five NCCL all-reduces with completions after their enqueue"
# Out of place on one rank NCCL copies the buffer: 64 MiB read and written takes at least
# ~40 us even at 3.35 TB/s; an event recorded before the work (or a completion taken from the
# host's clock at enqueue) would read less.
echo "enqueue to completion, ns: $(db_query trace "SELECT group_concat(exit_ns - enter_ns, ' ')
        FROM collectives WHERE function = 'ncclAllReduce'")"
got=$(db_query trace "SELECT sum(exit_ns - enter_ns > 20000) FROM collectives
        WHERE function = 'ncclAllReduce'")
expect_equal 5 "$got" "each completion at least the work's duration after the enqueue"
# Stream order: each completes after the previous one.
got=$(db_query trace "SELECT count(*) FROM collectives a JOIN collectives b
        ON b.comm_id = a.comm_id AND b.seq = a.seq + 1
        WHERE a.function = 'ncclAllReduce' AND b.exit_ns < a.exit_ns")
expect_equal 0 "$got" "completions in stream order"
got=$(db_query trace "SELECT gpus LIKE 'device 0 (%PCI %' FROM ranks")
expect_equal 1 "$got" "the rank's GPU and its PCI bus id"
pass "NCCL completions from CUDA events on the real library"

# Without MPI, as torchrun starts a process: preloaded with NCCL's profiler plugin (what
# `commtap run` sets), then as NCCL's profiler plugin alone (no LD_PRELOAD): either way the rank
# records its all-reduces, with completions.
for how in preloaded plugin; do
  env=(COMMTAP_DIR="trace-$how" COMMTAP_SAMPLE=1 NCCL_PROFILER_PLUGIN="$LIB")
  [ $how == preloaded ] && env+=(LD_PRELOAD="$LIB")
  out=$(env "${env[@]}" timeout "$LIMIT" "$PROGRAMS/nccl_gpu" --no-mpi)
  expect_equal done "$out" "the program's output without MPI ($how)"
  expect_equal "0|none" "$(db_query "trace-$how" "SELECT rank, mpi_library FROM ranks")" \
    "a rank without MPI ($how)"
  got=$(db_query "trace-$how" "SELECT count(*) >= 5, sum(exit_ns > enter_ns) >= 5 FROM collectives
          WHERE function = 'ncclAllReduce'")
  expect_equal "1|1" "$got" "all-reduces with completions without MPI ($how)"
done
pass "a job without MPI on the real library, through the wrappers and through the plugin"
