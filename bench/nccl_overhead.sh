#!/usr/bin/env bash
# What commtap adds to an NCCL call, in a job without MPI, against a library whose calls cost
# nothing (bench/null_nccl): native, preloaded, and native again, alternating within each round.
# Each run reports the median of 9 batches; the table gives the minimum and the median of those
# over the rounds. Without a GPU no CUDA event is recorded after a sampled collective, so the
# figures are the wrappers' own cost (counters, call site, aggregate, heartbeat).
#
#   bench/nccl_overhead.sh [build dir] [rounds]
set -euo pipefail
build=${1:-build}
rounds=${2:-7}
lib=$(realpath "$build/interpose/libcommtap.so")
program=$(realpath "$build/bench/nccl_overhead")
trace=$(mktemp -d)
trap 'rm -rf "$trace"' EXIT

declare -A values
for ((round = 0; round < rounds; round++)); do
  for mode in native preloaded native_again; do
    env=()
    [ "$mode" == preloaded ] && env=(LD_PRELOAD="$lib" COMMTAP_DIR="$trace/$round")
    while read -r name value; do values[$name,$mode]+="$value "; done < <(env "${env[@]}" "$program")
  done
done

stat() { tr ' ' '\n' | grep . | sort -g | awk -v which="$1" '{a[NR]=$1}
  END {print (which == "min") ? a[1] : a[int((NR+1)/2)]}'; }

echo "| call | statistic | native ns | preloaded ns | added ns | native again ns |"
echo "|---|---|---:|---:|---:|---:|"
for name in allreduce group_send_recv; do
  case $name in
    allreduce) label="ncclAllReduce 8 B" ;;
    group_send_recv) label="ncclGroupStart + ncclSend + ncclRecv + ncclGroupEnd" ;;
  esac
  for which in min median; do
    a=$(echo "${values[$name,native]}" | stat "$which")
    p=$(echo "${values[$name,preloaded]}" | stat "$which")
    b=$(echo "${values[$name,native_again]}" | stat "$which")
    echo "| $label | $which | $a | $p | $(awk -v a="$a" -v p="$p" 'BEGIN { printf "%.1f", p - a }') | $b |"
  done
done
echo
echo "rounds: $rounds; $(nproc) cores; the null NCCL's own cost is the native column"
