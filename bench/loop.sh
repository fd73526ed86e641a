#!/usr/bin/env bash
# Compute-plus-all-reduce loop, native against preloaded (everything on, default settings), the
# two alternating in each round; 2 ranks bound to cores. Prints a table of the time per step.
#
#   bench/loop.sh [build dir] [rounds] [compute us per step] [all-reduce bytes]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
lib=$(realpath "$build/interpose/libcommtap.so")
trace=$(mktemp -d)
trap 'rm -rf "$trace"' EXIT
native=() preloaded=()
for ((r = 0; r < rounds; r++)); do
  native+=("$(timeout 300 mpiexec -bind-to core -n 2 "$build/bench/loop" "${3:-100}" "${4:-8192}" |
    awk '{print $2}')")
  preloaded+=("$(timeout 300 mpiexec -bind-to core -n 2 -genv LD_PRELOAD "$lib" \
    -genv COMMTAP_DIR "$trace" "$build/bench/loop" "${3:-100}" "${4:-8192}" | awk '{print $2}')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
minimum() { printf '%s\n' "$@" | sort -g | head -1; }
echo "| statistic over $rounds rounds | native us/step | commtap us/step | commtap/native |"
echo "|---|---:|---:|---:|"
for stat in minimum median; do
  n=$($stat "${native[@]}") p=$($stat "${preloaded[@]}")
  awk -v s="$stat" -v n="$n" -v p="$p" 'BEGIN {printf "| %s | %.2f | %.2f | %.4f |\n", s, n, p, p / n}'
done
