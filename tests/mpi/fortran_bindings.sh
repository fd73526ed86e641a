#!/usr/bin/env bash
# The Fortran bindings: every route by which libmpichfort's bindings (mpif.h, `use mpi`,
# `use mpi_f08`) reach a function of the wrapper table leads through commtap, and a `use mpi_f08`
# program whose bindings take different routes (MPI_Barrier, MPI_Wait, MPI_Waitall by PMPI_)
# has every call recorded.
source "$(dirname "$0")/common.sh"

# Every relocation of the bindings library, checked inside a preloaded process.
COMMTAP_DIR=trace-routes run_preloaded 1 "$PROGRAMS/fortran_routes_check" >routes.out ||
  fail "routes not through commtap: $(cat routes.out)"
grep -q " 0 not through commtap" routes.out || fail "$(cat routes.out)"
pass "$(tail -1 routes.out)"
# The check can fail: with commtap disabled nothing is routed.
if COMMTAP_DISABLE=1 run_preloaded 1 "$PROGRAMS/fortran_routes_check" >unrouted.out; then
  fail "the routes check passes without commtap: $(tail -1 unrouted.out)"
fi
grep -q "NOT ROUTED PMPI_Barrier" unrouted.out || fail "$(tail -3 unrouted.out)"
pass "the check fails where nothing is routed"

# A mpi_f08 program: what it says it called is what the trace recorded (rank 0's tally; how
# many MPI_Test polls it took varies from run to run, so the run's own tally is the truth).
COMMTAP_DIR=trace-f08 run_preloaded 2 "$PROGRAMS/fortran_f08_calls" >preloaded.out ||
  fail "preloaded run failed"
while read -r function calls; do
  got=$(db_query trace-f08/rank-0.db "SELECT calls FROM call_totals WHERE function = '$function'")
  expect_equal "$calls" "$got" "$function calls recorded"
done <preloaded.out
# Completions of requests made in Fortran are attributed, also when MPI_Waitall (a PMPI_ route
# in MPICH's mpi_f08) completes them.
isend=$(db_query trace-f08/rank-0.db "SELECT completions FROM call_totals WHERE function = 'MPI_Isend'")
expect_equal 3 "$isend" "MPI_Isend completions (by MPI_Waitall, a PMPI_ route)"
pass "use mpi_f08: every call recorded ($(wc -l <preloaded.out) functions)"
