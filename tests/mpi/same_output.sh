#!/usr/bin/env bash
# The same programs give byte-identical output natively, preloaded, preloaded with
# COMMTAP_DISABLE=1 and preloaded in yield mode; C, C++ and all three Fortran bindings.
# Preloaded runs print nothing to stderr, and a disabled run leaves no trace directory.
source "$(dirname "$0")/common.sh"

check() {  # ranks program args...
  local n=$1 name
  name=$(basename "$2")
  run_native "$@" >native.out 2>native.err || fail "$name native run failed"
  [ -s native.out ] || fail "$name printed nothing"

  COMMTAP_DIR=trace-$name run_preloaded "$@" >preloaded.out 2>preloaded.err ||
    fail "$name preloaded run failed"
  expect_same_files native.out preloaded.out "$name: native and preloaded outputs"
  [ ! -s preloaded.err ] || fail "$name: preloaded run wrote to stderr: $(cat preloaded.err)"
  [ "$(ls trace-"$name"/rank-*.db | wc -l)" -eq "$n" ] || fail "$name: expected $n rank files"

  COMMTAP_DISABLE=1 COMMTAP_DIR=disabled-$name run_preloaded "$@" >disabled.out 2>&1 ||
    fail "$name disabled run failed"
  expect_same_files native.out disabled.out "$name: native and disabled outputs"
  [ ! -e disabled-"$name" ] || fail "$name: COMMTAP_DISABLE=1 still created a trace directory"

  COMMTAP_YIELD=1 COMMTAP_DIR=yield-$name run_preloaded "$@" >yield.out 2>yield.err ||
    fail "$name yield run failed"
  expect_same_files native.out yield.out "$name: native and yield-mode outputs"
  pass "$name on $n ranks"
}

mkdir tallies
check 4 "$PROGRAMS/toy_train" 20 2048
check 3 "$PROGRAMS/pipeline_train" 20 512 256
check 4 "$PROGRAMS/pipeline_train" 20 512 256
check 3 "$PROGRAMS/transpose_solve" 20 100 0
check 2 "$PROGRAMS/call_families" tallies 2
check 4 "$PROGRAMS/call_families" tallies 1
check 2 "$PROGRAMS/threads" 3 20
check 2 "$PROGRAMS/fortran_mpif"
check 2 "$PROGRAMS/fortran_use_mpi"
check 2 "$PROGRAMS/fortran_use_mpi_f08"
check 2 "$PROGRAMS/fortran_use_mpi_f08" init_thread
