#!/usr/bin/env bash
# Point-to-point on device buffers over the non-CUDA-aware MPICH, without a GPU: under
# COMMTAP_TEST_FAKE_DEVICE=1 the buffers tests/programs/device_p2p.cpp registers count as device
# memory and are inaccessible (PROT_NONE) to MPICH, so a transfer commtap fails to stage crashes
# the job. Every mode's output (return codes, statuses counted in the user's types, flags,
# indices, checksums of whole receive allocations) must equal the native run's on host buffers.
source "$(dirname "$0")/common.sh"

run_native 2 "$PROGRAMS/device_p2p" native || fail "native run"
[ -s native.0 ] && [ -s native.1 ] || fail "native run wrote nothing"
lines=$(cat native.0 native.1 | wc -l)

check_mode() {  # name, then VAR=value settings
  local name=$1
  shift
  local log="$name.log"
  env COMMTAP_TEST_FAKE_DEVICE=1 COMMTAP_DIR="$WORK/trace-$name" "$@" \
    timeout "$LIMIT" mpiexec -n 2 -genv LD_PRELOAD "$LIB" "$PROGRAMS/device_p2p" "$name" \
    2>"$log" || { cat "$log" >&2; fail "$name: the job failed"; }
  expect_same_files native.0 "$name.0" "$name: rank 0's outputs and the native run's"
  expect_same_files native.1 "$name.1" "$name: rank 1's outputs and the native run's"
  counts=$(grep '^fake device:' "$log") || fail "$name: no fake-device counters"
  read -r _ _ _ copies _ kernels <<<"$counts"
}

check_mode auto
[ "$kernels" -gt 0 ] && [ "$copies" -gt 0 ] || fail "auto: copies $copies kernels $kernels"
pass "auto: $lines results equal to native on host buffers ($copies copies, $kernels kernels)"

check_mode device COMMTAP_DEVICE_METHOD=device
[ "$kernels" -gt 0 ] || fail "device method ran no kernel"
pass "COMMTAP_DEVICE_METHOD=device: equal to native ($copies copies, $kernels kernels)"

check_mode blocks COMMTAP_DEVICE_METHOD=blocks
expect_equal 0 "$kernels" "kernels with the copy-per-block method"
pass "COMMTAP_DEVICE_METHOD=blocks: equal to native ($copies copies, no kernel)"

check_mode host COMMTAP_DEVICE_METHOD=host
pass "COMMTAP_DEVICE_METHOD=host (sends; receives by the model): equal to native"

check_mode yield COMMTAP_YIELD=1
pass "COMMTAP_YIELD=1: equal to native"

check_mode noplans COMMTAP_DATATYPES=0
pass "COMMTAP_DATATYPES=0 (every type through a host copy of its extent): equal to native"

check_mode model COMMTAP_DEVICE_MODEL=launch_us=1,pack_gbs=1000,block_us=100
pass "COMMTAP_DEVICE_MODEL with parameters: equal to native"

check_mode measure COMMTAP_DEVICE_MODEL=measure
pass "COMMTAP_DEVICE_MODEL=measure (timed on the fake device at MPI_Init): equal to native"

check_mode badvalues COMMTAP_DEVICE_METHOD=fastest COMMTAP_DEVICE_MODEL=copy_gbs=fast
grep -q "COMMTAP_DEVICE_METHOD=fastest is not" badvalues.log || fail "no line for a bad method"
grep -q "COMMTAP_DEVICE_MODEL: 'copy_gbs=fast'" badvalues.log || fail "no line for a bad model"
pass "bad COMMTAP_DEVICE_METHOD/MODEL: one line each, defaults used, equal to native"

# The test can fail: with staging off, MPICH meets the inaccessible "device" buffers.
if env COMMTAP_TEST_FAKE_DEVICE=1 COMMTAP_DEVICE_STAGING=0 COMMTAP_DIR="$WORK/trace-off" \
  timeout "$LIMIT" mpiexec -n 2 -genv LD_PRELOAD "$LIB" "$PROGRAMS/device_p2p" off \
  >/dev/null 2>&1; then
  fail "COMMTAP_DEVICE_STAGING=0 ran through: the buffers were not device memory to MPICH"
fi
pass "COMMTAP_DEVICE_STAGING=0: MPICH touches the device buffers and the job dies (as on a GPU)"
