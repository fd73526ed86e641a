#!/usr/bin/env bash
# commtap's per-job steps by number of ranks (docs/benchmarks.md, "Scale"): MPI_Init (+ a
# barrier) and MPI_Finalize, native vs preloaded vs native again, interleaved, medians and minima
# over rounds; and what a clock re-estimation costs the job against one 8-byte all-reduce, from
# the preloaded ranks' own accounting (COMMTAP_VERBOSE=2: the mid-job estimates' median, the
# slowest rank's). Every run is in yield mode, so that oversubscribed ranks make progress; on
# this 2-core machine more than 2 ranks are oversubscribed and every latency is a scheduler's.
#
#   bench/scale.sh [build dir] [rounds] [ranks...]          one machine (default 2 4 8 16 32 64)
#   SCALE_LAUNCH="scripts/cluster run 0:2,1:2,2:2,3:2 --" bench/scale.sh build 3 8
#                                                            the emulated cluster (ranks as given)
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
shift $(($# > 2 ? 2 : $#))
counts=("${@:-2 4 8 16 32 64}")
read -r -a counts <<<"${counts[*]}"
lib=$(realpath "$build/interpose/libcommtap.so")
program=$(realpath "$build/bench/scale")
trace=$(mktemp -d)
trap 'rm -rf "$trace"' EXIT
# ranks iterations [env...] -> the job's stdout and stderr. The native jobs run no all-reduces:
# without a yield mode, oversubscribed MPICH ranks busy-poll, and only their init and finalize
# are compared.
launch() {
  local n=$1 iterations=$2
  shift 2
  if [ -n "${SCALE_LAUNCH:-}" ]; then
    # Across hosts MPI_Finalize can hang in UCX (scripts/cluster): the ranks that finished count.
    env "$@" timeout 120 $SCALE_LAUNCH "$program" "$iterations" 20 2>&1
  else
    env "$@" timeout 600 mpiexec -n "$n" "$program" "$iterations" 20 2>&1
  fi
}
# "init_s finalize_s": the slowest rank's of one job
steps() { awk '$3 == "init_s" && $4 > i { i = $4 } $3 == "finalize_s" && $4 > f { f = $4 } END { print i, f + 0 }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
minimum() { printf '%s\n' "$@" | sort -g | head -1; }

echo "| ranks | init native (s) | init commtap (s) | init native again (s) | added at init (s) | finalize native (s) | finalize commtap (s) | added at finalize (s) | all-reduce (us) | clock re-estimate (us) | re-estimate / all-reduce |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in "${counts[@]}"; do
  ni=() nf=() pi=() pf=() ai=() af=() reduce=() clock=()
  for ((r = 0; r < rounds; r++)); do
    read -r i f < <(launch "$n" 0 | steps)
    ni+=("$i") nf+=("$f")
    out=$(launch "$n" 2000 LD_PRELOAD="$lib" COMMTAP_DIR="$trace/$n-$r" COMMTAP_YIELD=1 \
      COMMTAP_VERBOSE=2 COMMTAP_CLOCK_SYNC=100) || true  # a finalize that hung: its ranks lack a line
    read -r i f < <(steps <<<"$out")
    pi+=("$i") pf+=("$f")
    reduce+=("$(awk '/^allreduce_us/ { print $2 }' <<<"$out")")
    # The slowest rank's median mid-job estimate, in us.
    clock+=("$(awk '/clock estimates/ { v = $(NF - 4) * 1000; if (v > m) m = v } END { print m }' <<<"$out")")
    read -r i f < <(launch "$n" 0 | steps)
    ai+=("$i") af+=("$f")
    rm -rf "${trace:?}/$n-$r"
  done
  awk -v n="$n" -v ni="$(median "${ni[@]}")" -v pi="$(median "${pi[@]}")" \
    -v ai="$(median "${ai[@]}")" -v nf="$(median "${nf[@]}" "${af[@]}")" \
    -v pf="$(median "${pf[@]}")" -v ar="$(median "${reduce[@]}")" -v ck="$(median "${clock[@]}")" \
    -v mi="$(minimum "${pi[@]}")" -v mn="$(minimum "${ni[@]}" "${ai[@]}")" \
    'BEGIN { base = (ni + ai) / 2
             printf "| %d | %.3f | %.3f | %.3f | %.3f (min %.3f) | %.3f | %.3f | %.3f | %.1f | %.0f | %.1f |\n",
               n, ni, pi, ai, pi - base, mi - mn, nf, pf, pf - nf, ar, ck, (ar > 0 ? ck / ar : 0) }'
done
echo
echo "medians over $rounds rounds (the native-again runs' finalize pooled with the first native's)"
