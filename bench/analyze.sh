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
#     --realistic) that has run HOURS (default 24), analyzed whole, as cron does (--since 600), and
#     with --read-all (every row read and filtered: what --since cost before cron mode); then the
#     same cron run on the job one minute old (the target: at most twice that).
#   bench/analyze.sh [build dir] --files [files] [seconds] [cores]
#     FILES rank files (default 1,000) of a realistic job that ran SECONDS (default 3,600),
#     analyzed whole on CORES cores (default 2: taskset, --threads CORES).
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
  cron=$(timed "$job/run" --since 600)
  readall=$(timed "$job/run" --since 600 --read-all)
  size=$(du -sh "$job/run" | cut -f1)
  rm -rf "$job/run"
  "$build/bench/synthetic_job" --realistic "$job/run" "$ranks" 60
  young=$(timed "$job/run" --since 600)
  echo "| ranks | job age | database size | write (s) | analysis | wall (s) | CPU (s) | peak memory |"
  echo "|---:|---:|---:|---:|---|---:|---:|---:|"
  write=$(awk "BEGIN { printf \"%.1f\", $made - $start }")
  for row in "$hours h:whole job:$full" "$hours h:cron, --since 600:$cron" \
    "$hours h:--since 600 --read-all:$readall" "1 min:cron, --since 600:$young"; do
    read -r wall cpu mib <<<"${row##*:}"
    age=${row%%:*}
    what=${row#*:}
    printf "| %d | %s | %s | %s | %s | %s | %s | %d MiB |\n" "$ranks" "$age" \
      "$([ "$age" = "1 min" ] && du -sh "$job/run" | cut -f1 || echo "$size")" "$write" \
      "${what%%:*}" "$wall" "$cpu" "$mib"
  done
  exit 0
fi

if [ "${2:-}" = "--files" ]; then
  files=${3:-1000}
  seconds=${4:-3600}
  cores=${5:-2}
  start=$(date +%s.%N)
  "$build/bench/synthetic_job" --realistic "$job/run" "$files" "$seconds"
  made=$(date +%s.%N)
  size=$(du -sh "$job/run" | cut -f1)
  /usr/bin/time -f "%e %U %S %M" -o "$job/time.txt" taskset -c "0-$((cores - 1))" \
    "$build/cli/commtap" analyze "$job/run" --threads "$cores" --json >"$job/findings.json" || true
  read -r wall user sys kib < <(tail -n 1 "$job/time.txt")
  echo "| rank files | seconds each | database size | write (s) | cores | wall (s) | CPU (s) | peak memory |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf "| %d | %d | %s | %.0f | %d | %s | %.2f | %d MiB |\n" "$files" "$seconds" "$size" \
    "$(awk "BEGIN { print $made - $start }")" "$cores" "$wall" \
    "$(awk "BEGIN { print $user + $sys }")" $((kib / 1024))
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
