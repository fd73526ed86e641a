#!/usr/bin/env bash
# The writer thread's CPU share in a preloaded job calling MPI_Allreduce at a fixed rate, from
# the trace database's own accounting (heartbeats.writer_cpu_ns, the thread's CPU clock), over
# the steady part of the run: from the first heartbeat after 2 s to the last one before the end;
# and what rank 0's trace grew by: its file, and the sampled rows it kept per second with the
# trace budget's level at the end (heartbeats.sample_level).
#
#   bench/writer_cpu.sh [build dir] [calls per second] [seconds] [COMMTAP_SAMPLE values...]
#
# RANKS (default 1) ranks; MESSAGES (default 0) messages to the next rank after each all-reduce;
# COMMTAP_TRACE_BUDGET, if set, is passed to every rank (unset: the default).
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
env_budget=()
[[ -z ${COMMTAP_TRACE_BUDGET:-} ]] || env_budget=(-genv COMMTAP_TRACE_BUDGET "$COMMTAP_TRACE_BUDGET")
echo "| COMMTAP_SAMPLE | calls/s | instances/s sampled | dropped (whole run) | writer CPU ms/s | share of a core | COMMTAP_TRACE_BUDGET | rows kept/s | level | file KB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for sample in "${samples[@]}"; do
  rm -rf "${trace:?}"/*
  env_sample=()
  [[ $sample == default ]] || env_sample=(-genv COMMTAP_SAMPLE "$sample")
  timeout 300 mpiexec -n "${RANKS:-1}" -genv LD_PRELOAD "$lib" -genv COMMTAP_DIR "$trace" \
    "${env_sample[@]}" "${env_budget[@]}" "$build/bench/rate" "$rate" "$seconds" "${MESSAGES:-0}"
  sqlite3 -separator ' ' "$trace/rank-0.db" "
    WITH start AS (SELECT MIN(wall_ns) AS t FROM heartbeats),
         steady AS (SELECT wall_ns, writer_cpu_ns FROM heartbeats, start
                    WHERE wall_ns >= start.t + 2000000000 AND state IN ('computing', 'in_call')),
         first AS (SELECT * FROM steady ORDER BY wall_ns LIMIT 1),
         last AS (SELECT * FROM steady ORDER BY wall_ns DESC LIMIT 1),
         sample AS (SELECT CAST(value AS INTEGER) AS n FROM settings WHERE name = 'COMMTAP_SAMPLE'),
         budget AS (SELECT coalesce(max(value), '-') AS mb FROM settings
                    WHERE name = 'COMMTAP_TRACE_BUDGET'),
         dropped AS (SELECT MAX(instances_dropped) AS n FROM heartbeats),
         kept AS (SELECT ((SELECT count(*) FROM collectives) + (SELECT count(*) FROM transfers))
                         * 1e9 / (max(r.end_ns - r.start_ns, 1)) AS per_s FROM ranks r),
         level AS (SELECT coalesce(sample_level, 0) AS k FROM heartbeats
                   ORDER BY wall_ns DESC LIMIT 1),
         size AS (SELECT page_count * page_size / 1000.0 AS kb
                  FROM pragma_page_count, pragma_page_size)
    SELECT (last.writer_cpu_ns - first.writer_cpu_ns) * 1.0 / (last.wall_ns - first.wall_ns),
           sample.n, dropped.n, budget.mb, kept.per_s, level.k, size.kb
    FROM first, last, sample, dropped, budget, kept, level, size" |
    awk -v s="$sample" -v r="$rate" \
      '{printf "| %s | %d | %.0f | %d | %.2f | %.2f%% | %s | %.1f | %d | %.0f |\n", s, r, r / $2, $3, $1 * 1e3, $1 * 100, $4, $5, $6, $7}'
done
