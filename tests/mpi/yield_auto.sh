#!/usr/bin/env bash
# COMMTAP_YIELD=auto, the default: yield mode where some machine runs more ranks than its CPUs
# allow them, the library's spinning waits where none does, and one choice on every rank whatever
# the ranks' environments say: a yielding rank's blocking collective is its nonblocking form,
# which no blocking collective on another rank matches (MPICH waits forever).
source "$(dirname "$0")/common.sh"

program="$PROGRAMS/toy_train"
run_native 2 "$program" 20 512 >native.out

# run_on CPUS NAME: the program's 2 ranks preloaded, with the launcher's (and so its ranks')
# affinity CPUS and COMMTAP_VERBOSE=2; then its output against native and COMMTAP_YIELD in force.
run_on() {
  COMMTAP_VERBOSE=2 COMMTAP_DIR=trace-$2 timeout "$LIMIT" taskset -c "$1" \
    mpiexec -n 2 -genv LD_PRELOAD "$LIB" "$program" 20 512 >"$2.out" 2>"$2.err" ||
    fail "job on CPUs $1 (exit $?)"
  expect_same_files native.out "$2.out" "native and $2 outputs"
  db_query "trace-$2" "SELECT group_concat(value, '|') FROM settings
                       WHERE name = 'COMMTAP_YIELD' ORDER BY rank"
}

# Two ranks on one CPU.
expect_equal "1|1" "$(run_on 0 one-cpu)" "COMMTAP_YIELD in force on one CPU"
expect_equal 2 "$(grep -c ', yield mode (auto: 2 ranks on 1 CPU on this machine; rank 0.s machine is oversubscribed)' one-cpu.err)" \
  "ranks that say why they yield"
pass "auto: two ranks on one CPU yield, and say why"

# Two ranks on two CPUs: nothing to yield to.
if [ "$(nproc)" -ge 2 ]; then
  expect_equal "0|0" "$(run_on 0,1 two-cpus)" "COMMTAP_YIELD in force on two CPUs"
  expect_equal 2 "$(grep -c ', spinning waits (auto: 2 ranks on 2 CPUs on this machine)' two-cpus.err)" \
    "ranks that say why they spin"
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
