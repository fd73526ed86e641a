#!/usr/bin/env bash
# Times `commtap analyze` on synthetic jobs written through the monitor's own writer, and reports
# the time, the CPU time and the peak memory (docs/benchmarks.md). Needs GNU time (/usr/bin/time,
# Debian package time).
#
#   bench/analyze.sh [build dir] [ranks] [instances] [threads]
#     RANKS x INSTANCES all-reduce instance records (default 1,000 x 10,000 = 10 million),
#     analyzed on THREADS reading threads (default 0: one per core) and on one.
#   bench/analyze.sh [build dir] --cron [ranks] [hours]
#     A realistic job (instances, messages, aggregates, probes, TCP counters: bench/synthetic_job
#     --realistic) that has run HOURS (default 24), analyzed whole; then the same job a minute
#     older, analyzed as cron does (--since 600), and with --read-all (every row read and
#     filtered: what --since cost before cron mode).
set -euo pipefail
build=${1:-build}
job=$(mktemp -d "${TMPDIR:-/tmp}/commtap-bench-analyze.XXXXXX")
trap 'rm -rf "$job"' EXIT

# One timed analysis: prints "wall cpu peak-MiB rows" and leaves the findings in $job/findings.
timed() {
  /usr/bin/time -f "%e %U %S %M" -o "$job/time.txt" "$build/cli/commtap" analyze "$@" --json \
    >"$job/findings.json" || true
  read -r wall user sys kib < <(tail -n 1 "$job/time.txt")  # after "Command exited with ..."
  awk "BEGIN { printf \"%s %.2f %d\", $wall, $user + $sys, $kib / 1024 }"
}

if [ "${2:-}" = "--cron" ]; then
  ranks=${3:-16}
  hours=${4:-24}
  seconds=$((hours * 3600))
  start=$(date +%s.%N)
  "$build/bench/synthetic_job" --realistic "$job/run" "$ranks" "$seconds"
  made=$(date +%s.%N)
  full=$(timed "$job/run")
  rm -rf "$job/run"
  "$build/bench/synthetic_job" --realistic "$job/run" "$ranks" $((seconds + 60))
  cron=$(timed "$job/run" --since 600)
  readall=$(timed "$job/run" --since 600 --read-all)
  echo "| ranks | job age | database size | write (s) | analysis | wall (s) | CPU (s) | peak memory |"
  echo "|---:|---:|---:|---:|---|---:|---:|---:|"
  size=$(du -sh "$job/run" | cut -f1)
  write=$(awk "BEGIN { printf \"%.1f\", $made - $start }")
  for row in "whole job:$full" "cron, --since 600:$cron" "--since 600 --read-all:$readall"; do
    read -r wall cpu mib <<<"${row#*:}"
    printf "| %d | %d h | %s | %s | %s | %s | %s | %d MiB |\n" "$ranks" "$hours" "$size" "$write" \
      "${row%%:*}" "$wall" "$cpu" "$mib"
  done
  exit 0
fi

ranks=${2:-1000}
instances=${3:-10000}
threads=${4:-0}
start=$(date +%s.%N)
"$build/bench/synthetic_job" "$job/run" "$ranks" "$instances"
made=$(date +%s.%N)
read -r wall cpu mib <<<"$(timed "$job/run" --threads "$threads")"
cp "$job/findings.json" "$job/findings-parallel.json"
read -r wall1 cpu1 mib1 <<<"$(timed "$job/run" --threads 1)"
cmp -s "$job/findings.json" "$job/findings-parallel.json" || echo "FINDINGS DIFFER between thread counts" >&2
records=$((ranks * instances))
echo "| ranks | instances | instance records | database size | write (s) | threads | analyze (s) | CPU (s) | records/s | peak memory |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
size=$(du -sh "$job/run" | cut -f1)
write=$(awk "BEGIN { printf \"%.1f\", $made - $start }")
printf "| %d | %d | %d | %s | %s | %s | %s | %s | %.2g | %d MiB |\n" "$ranks" "$instances" \
  "$records" "$size" "$write" "$([ "$threads" = 0 ] && echo "all" || echo "$threads")" "$wall" "$cpu" \
  "$(awk "BEGIN { print $records / $wall }")" "$mib"
printf "| %d | %d | %d | %s | %s | 1 | %s | %s | %.2g | %d MiB |\n" "$ranks" "$instances" \
  "$records" "$size" "$write" "$wall1" "$cpu1" "$(awk "BEGIN { print $records / $wall1 }")" "$mib1"
echo
"$build/cli/commtap" analyze "$job/run" --threads "$threads" | sed 's/^/    /' || true
