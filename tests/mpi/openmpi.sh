#!/usr/bin/env bash
# A process whose MPI is not MPICH (Open MPI's libmpi.so.40, as mpi4py uses on stock GPU images):
# commtap's MPI entry points hand every call to that library untouched (its handles are pointers,
# not MPICH's integers), rank 0 says once that MPI is not recorded, and the job's output is the
# native run's. Open MPI is Debian's, unpacked by scripts/install-deps into its own directory and
# run by its full path: the system's `mpirun` stays MPICH's.
source "$(dirname "$0")/common.sh"

root=${COMMTAP_TEST_OPENMPI:-/opt/commtap-test/openmpi}
libdir=$root/usr/lib/x86_64-linux-gnu
mpirun=$root/usr/bin/mpirun.openmpi
if [ ! -x "$mpirun" ] || [ ! -e "$libdir/libmpi.so.40" ]; then
  echo "skipped: no unpacked Open MPI in $root (scripts/install-deps test unpacks it, as root)"
  exit 77
fi
# Open MPI relocated: its components and help files under the unpacked prefix; components whose
# libraries this machine lacks (fabrics) are skipped quietly.
export OPAL_PREFIX=$root/usr LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cc -O1 -I"$libdir/openmpi/include" "$SOURCE/tests/programs/openmpi/openmpi_job.c" \
  "$libdir/libmpi.so.40" -Wl,-rpath-link,"$libdir" -o openmpi_job || fail "building against Open MPI"

timeout "$LIMIT" "$mpirun" -n 4 ./openmpi_job >native.out 2>native.err || {
  cat native.err >&2
  fail "native Open MPI run"
}
[ "$(grep -c "world sum 12.0" native.out)" == 4 ] || {
  cat native.out native.err >&2
  fail "native Open MPI run's results"
}

# Under `commtap run` (the library preloaded into mpirun and every rank).
timeout "$LIMIT" "$CLI" run --dir trace -- "$mpirun" -n 4 ./openmpi_job >preloaded.out \
  2>preloaded.err || {
  cat preloaded.out preloaded.err >&2
  fail "Open MPI run under commtap run"
}
expect_same_files <(sort native.out) <(sort preloaded.out) "native and preloaded outputs"
said=$(grep -c "does not have MPICH's ABI: its MPI calls go to it untouched" preloaded.err || true)
expect_equal 1 "$said" "ranks saying that MPI is not recorded"
grep -q "no rank recorded anything" preloaded.err || fail "commtap run did not say nothing was recorded"
pass "an Open MPI job runs untouched under commtap run, and it says MPI is not recorded"

# One process, preloaded directly (a singleton, as `python -c 'from mpi4py import MPI'` starts).
LD_PRELOAD=$LIB COMMTAP_DIR=$WORK/single timeout "$LIMIT" ./openmpi_job >single.out 2>single.err || {
  cat single.out single.err >&2
  fail "Open MPI singleton preloaded"
}
grep -q "rank 0 of 1: half 0 of 1, from 0 tag 7 count 8 sum 48.0, world sum 1.5" single.out || {
  cat single.out single.err >&2
  fail "Open MPI singleton's results"
}
pass "an Open MPI singleton with the library preloaded"
