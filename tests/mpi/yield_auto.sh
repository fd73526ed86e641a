#!/usr/bin/env bash
# COMMTAP_YIELD=auto, the default: yield mode where some machine runs more ranks than its CPUs
# allow them, the library's spinning waits where none does, and one choice on every rank whatever
# the ranks' environments say: a yielding rank's blocking collective is its nonblocking form,
# which no blocking collective on another rank matches (MPICH waits forever).
source "$(dirname "$0")/common.sh"

program="$PROGRAMS/toy_train"
run_native 2 "$program" 20 512 >native.out

# Two ranks on one CPU (the launcher's affinity is its ranks').
COMMTAP_VERBOSE=2 COMMTAP_DIR=trace-one-cpu timeout "$LIMIT" taskset -c 0 \
  mpiexec -n 2 -genv LD_PRELOAD "$LIB" "$program" 20 512 >one-cpu.out 2>one-cpu.err ||
  fail "job on one CPU (exit $?)"
expect_same_files native.out one-cpu.out "native and one-CPU outputs"
expect_equal 2 "$(grep -c ', yield mode (auto: 2 ranks on 1 CPU on this machine; rank 0.s machine is oversubscribed)' one-cpu.err)" \
  "ranks that say why they yield"
expect_equal "1|1" "$(db_query trace-one-cpu "SELECT group_concat(value, '|') FROM settings
                      WHERE name = 'COMMTAP_YIELD' ORDER BY rank")" "COMMTAP_YIELD in force"
pass "auto: two ranks on one CPU yield, and say why"

# Two ranks on two CPUs: nothing to yield to.
if [ "$(nproc)" -ge 2 ]; then
  COMMTAP_VERBOSE=2 COMMTAP_DIR=trace-two-cpus timeout "$LIMIT" taskset -c 0,1 \
    mpiexec -n 2 -genv LD_PRELOAD "$LIB" "$program" 20 512 >two-cpus.out 2>two-cpus.err ||
    fail "job on two CPUs (exit $?)"
  expect_same_files native.out two-cpus.out "native and two-CPU outputs"
  expect_equal 2 "$(grep -c ', spinning waits (auto: 2 ranks on 2 CPUs on this machine)' two-cpus.err)" \
    "ranks that say why they spin"
  expect_equal "0|0" "$(db_query trace-two-cpus "SELECT group_concat(value, '|') FROM settings
                        WHERE name = 'COMMTAP_YIELD' ORDER BY rank")" "COMMTAP_YIELD in force"
  pass "auto: two ranks on two CPUs spin"
else
  echo "two-CPU case skipped: $(nproc) CPU here"
fi

# Ranks launched with different settings (an MPMD launch, each part its own environment): rank
# 0's is used everywhere, with one line saying so. Each rank's own would leave rank 0 in
# MPI_Iallreduce and rank 1 in MPI_Allreduce.
timeout "$LIMIT" mpiexec -genv LD_PRELOAD "$LIB" -genv COMMTAP_DIR trace-mixed \
  -n 1 -env COMMTAP_YIELD 1 "$program" 20 512 : -n 1 -env COMMTAP_YIELD 0 "$program" 20 512 \
  >mixed.out 2>mixed.err || fail "run with COMMTAP_YIELD differing between ranks (exit $?)"
expect_same_files native.out mixed.out "native and mixed-settings outputs"
expect_equal 1 "$(grep -c "rank 1's settings differ from rank 0's: COMMTAP_YIELD=0 (rank 0: 1)" mixed.err)" \
  "lines about the difference"
expect_equal "1|1" "$(db_query trace-mixed "SELECT group_concat(value, '|') FROM settings
                      WHERE name = 'COMMTAP_YIELD' ORDER BY rank")" "COMMTAP_YIELD in force"
pass "COMMTAP_YIELD that differs between ranks: rank 0's is used, one line says so"
