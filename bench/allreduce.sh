#!/usr/bin/env bash
# All-reduce table on this machine: every commtap algorithm against the library's in the same
# run (docs/benchmarks.md). For several emulated hosts see scripts/cluster bench.
#
#   bench/allreduce.sh [build dir] [ranks] [max bytes] [nodes to pretend, 0: real]
set -euo pipefail
build=${1:-build}
ranks=${2:-4}
lib=$(realpath "$build/interpose/libcommtap.so")
trace=$(mktemp -d)
trap 'rm -rf "$trace"' EXIT
# More ranks than cores: everything waits with test-and-yield loops, native included.
yield=0
[ "$ranks" -gt "$(nproc)" ] && yield=1
timeout 600 mpiexec -n "$ranks" -genv LD_PRELOAD "$lib" -genv COMMTAP_DIR "$trace" \
  -genv COMMTAP_YIELD "$yield" -genv COMMTAP_TEST_NODES "${4:-0}" \
  "$build/bench/allreduce" "${3:-16777216}"
