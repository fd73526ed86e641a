#!/usr/bin/env bash
# The fake NCCL raises a network transfer's proxy events as NCCL 2.28/2.30 do (docs/nccl.md,
# "What NCCL raises for a network transfer"): a spy plugin (tests/programs/profiler_spy.cpp)
# checks every ProxyOp and ProxyStep of a training loop's all-reduces and point-to-point
# messages against NCCL's order, states, sizes and posting window (8 steps ahead).
source "$(dirname "$0")/common.sh"

if [ "${COMMTAP_TEST_HAVE_NCCL:-0}" != 1 ]; then
  echo "skipped: built without nccl.h"
  exit 77
fi
SPY=$PROGRAMS/libprofiler_spy.so
[ -f "$SPY" ] || fail "no $SPY"
launch=("$PROGRAMS/launch_ranks" -n 3 --master-port $((20000 + $$ % 20000)) --)
# 4 MiB all-reduces: 11 chunks of 128 KiB per ring step and direction (more than the window);
# one host, so FAKE_NCCL_PROXY_EVENTS=all gives every peer the network's events.
FAKE_NCCL_PROXY_EVENTS=all NCCL_PROFILER_PLUGIN=$SPY timeout "$LIMIT" "${launch[@]}" \
  "$PROGRAMS/nccl_train" --steps 4 --bytes 4194304 --p2p-bytes 393216 >spy.out 2>&1 || {
  cat spy.out >&2
  fail "nccl_train with the spy plugin"
}
summaries=$(grep "^profiler_spy: [0-9]* ops" spy.out || true)
[ "$(echo "$summaries" | grep -c ops)" -eq 3 ] || {
  cat spy.out >&2
  fail "the spy's report from every rank"
}
if echo "$summaries" | grep -qv " 0 violations$" || echo "$summaries" | grep -q ": 0 ops"; then
  grep "^profiler_spy: " spy.out >&2
  fail "the fake's proxy events differ from NCCL's sequence"
fi
pass "the fake's ProxyOp/ProxyStep sequence is NCCL's ($(echo "$summaries" | head -1))"
