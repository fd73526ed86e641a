#!/usr/bin/env bash
# The conformance matrix: tests/programs/conformance drives every function of
# interpose/mpi_functions.def and writes every output an application can see; its files from
# runs under commtap, in every mode, must be identical to a native run's. The native run is
# made twice first (the program's own determinism: a difference there is this test's bug).
# Coverage is generated from the table: every function it lists must have been called and
# recorded in the default mode's trace, but the two that start or end a process
# (MPI_Init_thread: mpi.threads and mpi.same_output; MPI_Abort: mpi.signals and mpi.faults).
source "$(dirname "$0")/common.sh"

RANKS=2  # see conformance.cpp: MPICH 4.0.2 cannot restart persistent collectives on more
PROGRAM="$PROGRAMS/conformance"

run_matrix() {  # name env-assignments...  -> output directory $name, trace trace-$name
  local name=$1
  shift
  mkdir "$name"
  env "$@" COMMTAP_DIR="trace-$name" \
    timeout "$LIMIT" mpiexec -n "$RANKS" -genv LD_PRELOAD "$LIB" "$PROGRAM" "$name" \
    >"$name.out" 2>"$name.err" || fail "$name: the run failed: $(tail -5 "$name.err")"
  [ ! -s "$name.err" ] || fail "$name: commtap wrote to stderr: $(head -5 "$name.err")"
  diff -r native "$name" >"$name.diff" ||
    fail "$name: outputs differ from the native run's: $(head -30 "$name.diff")"
}

mkdir native native-again
timeout "$LIMIT" mpiexec -n "$RANKS" "$PROGRAM" native >/dev/null || fail "native run failed"
timeout "$LIMIT" mpiexec -n "$RANKS" "$PROGRAM" native-again >/dev/null ||
  fail "second native run failed"
diff -r native native-again >&2 || fail "the program is not deterministic natively"
grep -qx end native/rank-0.txt || fail "the native run did not reach its end"
pass "native runs agree ($(cat native/rank-*.txt | wc -l) outputs)"

run_matrix default
# Coverage, from the table itself.
sed -n 's/^COMMTAP_MPI(\([A-Za-z_0-9]*\),.*/MPI_\1/p' "$SOURCE/interpose/mpi_functions.def" |
  grep -vx -e MPI_Init_thread -e MPI_Abort | sort >table.txt
[ "$(wc -l <table.txt)" -gt 150 ] || fail "could not read the function table"
db_query trace-default "SELECT DISTINCT function FROM call_totals WHERE calls > 0" | sort \
  >recorded.txt
missing=$(comm -23 table.txt recorded.txt)
[ -z "$missing" ] || fail "functions of the table the matrix never called: $missing"
pass "default mode: identical outputs; all $(wc -l <table.txt) functions of the table called"

run_matrix sample1 COMMTAP_SAMPLE=1
run_matrix yield COMMTAP_YIELD=1
run_matrix yield-sample1 COMMTAP_YIELD=1 COMMTAP_SAMPLE=1
run_matrix datatypes0 COMMTAP_DATATYPES=0
run_matrix datatypes1 COMMTAP_DATATYPES=1
pass "sample 1, yield, yield with sample 1, datatypes off and on: identical outputs"

# Every all-reduce form (allreduce_forms: the library's own list), on one node and on two (each
# rank its own node), forced; the trace must show that the form ran.
forms=$(allreduce_forms)
for algorithm in $forms; do
  for nodes in 0 2; do
    name=allreduce-$algorithm-$nodes
    run_matrix "$name" COMMTAP_ALLREDUCE="$algorithm" COMMTAP_TEST_NODES="$nodes" COMMTAP_SAMPLE=1
    if [ "$algorithm" != auto ]; then
      ran=$(db_query "trace-$name" \
        "SELECT count(*) FROM collectives WHERE algorithm = '$algorithm'")
      [ "$ran" -gt 0 ] || fail "$name: no all-reduce ran as $algorithm"
    fi
  done
done
run_matrix allreduce-yield COMMTAP_ALLREDUCE=ring COMMTAP_YIELD=1 COMMTAP_TEST_NODES=2
pass "every all-reduce form, on 1 and 2 nodes, and in yield mode: identical outputs"
