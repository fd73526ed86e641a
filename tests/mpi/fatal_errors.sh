#!/usr/bin/env bash
# A fatal MPI error (a call failing where the error handler is MPI_ERRORS_ARE_FATAL) is written
# before MPI aborts the job: the failing rank's trace ends by 'mpi_error' with the call, its
# communicator, its peer as a world rank and MPI's text (interpose/fatal_errors.hpp). The job
# aborts as natively, with the same error stack (the exit status hydra reports is a race between
# the aborting rank's and the ones it kills, natively too), and the program sees the error
# handlers it would natively (MPI_ERRORS_ARE_FATAL by MPI_Comm_get_errhandler, MPI_ERRORS_RETURN
# where it set it). Before the stand-in handler the failing rank's trace said 'running', like a
# rank killed by the launcher.
source "$(dirname "$0")/common.sh"

program=$PROGRAMS/fatal_error
ranks=4

# The error stack's lines below its first, without addresses and process ids.
error_stack() {
  sed -n '/error stack:/,$p' "$1" | sed '1d; s/0x[0-9a-f]*/ADDR/g' | grep -v '^\(Abort\|=\|BAD\|YOUR\|  PID\|  EXIT\|  CLEANING\)' |
    grep -v '^$' || true
}

# Runs a job that aborts (name, then the command) into name.out and name.err, again where its
# standard error lost the error stack: hydra kills the other ranks as the failing one writes it,
# and now and then none of it reaches the launcher, natively too (a native run under
# `scripts/test`'s parallel tests, 2026-11-30). Three tries; the status of the last in
# name_status.
run_aborting() {  # name command...
  local name=$1 try
  shift
  for try in 1 2 3; do
    set +e
    "$@" >"$name.out" 2>"$name.err"
    printf -v "${name}_status" '%s' "$?"
    set -e
    grep -q 'error stack:' "$name.err" && return 0
  done
  return 0
}
run_aborting native run_native $ranks "$program"
COMMTAP_DIR=trace run_aborting preloaded run_preloaded $ranks "$program"
[ "$native_status" -ne 0 ] || fail "the native job did not fail"
[ "$preloaded_status" -ne 0 ] || fail "the preloaded job did not fail"
# (Standard output is not compared: what an aborted job printed last may be lost, natively too,
# and hydra adds its banner there when it reports a killed rank.)
error_stack native.err >native.stack
error_stack preloaded.err >preloaded.stack
[ -s native.stack ] || fail "no error stack natively: $(cat native.err)"
expect_same_files native.stack preloaded.stack "the error stack"
pass "the job aborts as natively, with the same error stack"

# In yield mode too (the default where ranks outnumber the CPUs), though MPI_Send then runs as
# MPI_Isend and a wait: the error is raised by the blocking call the program made.
COMMTAP_YIELD=1 COMMTAP_DIR=trace-yield run_aborting yield run_preloaded $ranks "$program"
[ "$yield_status" -ne 0 ] || fail "the preloaded job in yield mode did not fail"
error_stack yield.err >yield.stack
expect_same_files native.stack yield.stack "the error stack in yield mode"
pass "in yield mode, the same error stack"

got=$(db_query trace/rank-1.db "SELECT r.ended_by, r.error_function, r.error_peer,
        r.error_comm_id = c.comm_id, r.error_text LIKE '%tag%'
        FROM ranks r JOIN communicators c ON c.created_by = 'MPI_Comm_split'")
expect_equal "mpi_error|MPI_Send|0|1|1" "$got" "the failing rank's end"
pass "the failing rank wrote its call, peer (world rank 0, comm rank 3), communicator and error"

# No fatal error: nothing but the program's own MPI_ERRORS_RETURN error, and every rank ends by
# MPI_Finalize.
run_native $ranks "$program" returned >native-returned.out
COMMTAP_DIR=trace-returned run_preloaded $ranks "$program" returned >returned.out
expect_same_files native-returned.out returned.out "output without a fatal error"
grep -q "of $ranks$" returned.out || fail "the program saw other error handlers: $(cat returned.out)"
got=$(db_query trace-returned "SELECT group_concat(DISTINCT ended_by) || ' ' ||
        count(error_function) FROM ranks")
expect_equal "finalize 0" "$got" "ends of a job whose errors were returned"
pass "the program sees MPI_ERRORS_ARE_FATAL where it is the handler, and its errors returned"
