#!/usr/bin/env bash
# Overhead of interception, same run, three ways: native, preloaded with COMMTAP_DISABLE=1
# (pure pass-through) and preloaded with everything on (counting, request tracking, database).
# The modes alternate within each round. Each program reports the median of 9 timed batches;
# the table gives, per mode, the minimum and the median of those over the rounds. On a shared
# 2-core machine two busy-polling ranks sometimes share a core (a whole run then reads ~3x
# slower), which is why the minimum is the figure to compare.
#
#   bench/overhead.sh [build dir] [rounds]
set -euo pipefail
build=${1:-build}
rounds=${2:-7}
lib=$(realpath "$build/interpose/libcommtap.so")
program=$(realpath "$build/bench/overhead")
trace=$(mktemp -d)
trap 'rm -rf "$trace"' EXIT

measure() {  # mode ranks [program arguments] -> "name value" lines
  local mode=$1 n=$2 env=()
  shift 2
  case $mode in
    native) env=() ;;
    disabled) env=(-genv LD_PRELOAD "$lib" -genv COMMTAP_DISABLE 1) ;;
    enabled) env=(-genv LD_PRELOAD "$lib" -genv COMMTAP_DIR "$trace") ;;
  esac
  timeout 300 mpiexec -bind-to core -n "$n" "${env[@]}" "$program" "$@"
}

declare -A values
for ((round = 0; round < rounds; round++)); do
  for n in 1 2; do
    for mode in native disabled enabled; do
      while read -r name value; do values[$name,$mode]+="$value "; done < <(measure $mode $n)
    done
  done
  # A short job: measured from MPI_Init on, 20,000 calls a batch, done well within the first
  # writer window (1 s).
  for mode in native disabled enabled; do
    while read -r name value; do
      if [ "$name" == allreduce8 ]; then values[allreduce8_short,$mode]+="$value "; fi
    done < <(measure $mode 1 20000 0)
  done
done

stat() { tr ' ' '\n' | grep . | sort -g | awk -v which="$1" '{a[NR]=$1}
  END {print (which == "min") ? a[1] : a[int((NR+1)/2)]}'; }

echo "| call | statistic | native ns | disabled ns | added | enabled ns | added | enabled/native |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for name in allreduce8 allreduce8_short p2p_self8 pingpong8 exchange8; do
  case $name in
    allreduce8) label="MPI_Allreduce 8 B, 1 rank" ;;
    allreduce8_short) label="MPI_Allreduce 8 B, 1 rank, a job shorter than 1 s" ;;
    p2p_self8) label="MPI_Irecv+MPI_Send+MPI_Wait 8 B to self, 1 rank" ;;
    pingpong8) label="MPI_Send/MPI_Recv ping-pong 8 B, 2 ranks, per message" ;;
    exchange8) label="2 MPI_Irecv + 2 MPI_Isend + MPI_Waitall 8 B, 2 ranks, per exchange" ;;
  esac
  for which in min median; do
    a=$(echo "${values[$name,native]}" | stat $which)
    d=$(echo "${values[$name,disabled]}" | stat $which)
    e=$(echo "${values[$name,enabled]}" | stat $which)
    awk -v l="$label" -v w="$which of $rounds" -v a="$a" -v d="$d" -v e="$e" 'BEGIN {
      printf "| %s | %s | %.1f | %.1f | %+.1f | %.1f | %+.1f | %.2f |\n", l, w, a, d, d - a, e, e - a, e / a }'
  done
done
