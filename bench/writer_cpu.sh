#!/usr/bin/env bash
# The writer thread's CPU share in a preloaded job calling MPI_Allreduce at a fixed rate, from
# the trace database's own accounting (heartbeats.writer_cpu_ns, the thread's CPU clock), over
# the steady part of the run: from the first heartbeat after 2 s to the last one before the end.
#
#   bench/writer_cpu.sh [build dir] [calls per second] [seconds] [COMMTAP_SAMPLE values...]
set -euo pipefail
build=${1:-build}
rate=${2:-100000}
seconds=${3:-12}
shift $(($# < 3 ? $# : 3))
samples=("$@")
((${#samples[@]})) || samples=(default 1)
lib=$(realpath "$build/interpose/libcommtap.so")
trace=$(mktemp -d)
trap 'rm -rf "$trace"' EXIT
echo "| COMMTAP_SAMPLE | calls/s | instances/s sampled | dropped (whole run) | writer CPU ms/s | share of a core |"
echo "|---|---:|---:|---:|---:|---:|"
for sample in "${samples[@]}"; do
  rm -rf "${trace:?}"/*
  env_sample=()
  [[ $sample == default ]] || env_sample=(-genv COMMTAP_SAMPLE "$sample")
  timeout 300 mpiexec -n 1 -genv LD_PRELOAD "$lib" -genv COMMTAP_DIR "$trace" \
    "${env_sample[@]}" "$build/bench/rate" "$rate" "$seconds"
  sqlite3 -separator ' ' "$trace/rank-0.db" "
    WITH start AS (SELECT MIN(wall_ns) AS t FROM heartbeats),
         steady AS (SELECT wall_ns, writer_cpu_ns FROM heartbeats, start
                    WHERE wall_ns >= start.t + 2000000000 AND state IN ('computing', 'in_call')),
         first AS (SELECT * FROM steady ORDER BY wall_ns LIMIT 1),
         last AS (SELECT * FROM steady ORDER BY wall_ns DESC LIMIT 1),
         sample AS (SELECT CAST(value AS INTEGER) AS n FROM settings WHERE name = 'COMMTAP_SAMPLE'),
         dropped AS (SELECT MAX(instances_dropped) AS n FROM heartbeats)
    SELECT (last.writer_cpu_ns - first.writer_cpu_ns) * 1.0 / (last.wall_ns - first.wall_ns),
           sample.n, dropped.n
    FROM first, last, sample, dropped" |
    awk -v s="$sample" -v r="$rate" \
      '{printf "| %s | %d | %.0f | %d | %.2f | %.2f%% |\n", s, r, r / $2, $3, $1 * 1e3, $1 * 100}'
done
