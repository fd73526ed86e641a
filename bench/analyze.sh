#!/usr/bin/env bash
# Times `commtap analyze` on a synthetic job of RANKS x INSTANCES instance records (default
# 1,000 x 10,000 = 10 million), written through the monitor's own writer, and reports the time
# and the peak memory (docs/benchmarks.md). Needs GNU time (/usr/bin/time, Debian package time).
#
#   bench/analyze.sh [build dir] [ranks] [instances]
set -euo pipefail
build=${1:-build}
ranks=${2:-1000}
instances=${3:-10000}
job=$(mktemp -d "${TMPDIR:-/tmp}/commtap-bench-analyze.XXXXXX")
trap 'rm -rf "$job"' EXIT
start=$(date +%s.%N)
"$build/bench/synthetic_job" "$job" "$ranks" "$instances"
made=$(date +%s.%N)
/usr/bin/time -f "%e %M" -o "$job/time.txt" "$build/cli/commtap" analyze "$job" \
  >"$job/findings.txt" || true
read -r seconds kib < <(tail -n 1 "$job/time.txt")  # after "Command exited with ..."
records=$((ranks * instances))
echo "| ranks | instances | instance records | database size | write (s) | analyze (s) | records/s | peak memory |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
printf "| %d | %d | %d | %s | %.1f | %s | %.2g | %d MiB |\n" "$ranks" "$instances" "$records" \
  "$(du -sh "$job" | cut -f1)" "$(awk "BEGIN { print $made - $start }")" "$seconds" \
  "$(awk "BEGIN { print $records / $seconds }")" $((kib / 1024))
echo
sed 's/^/    /' "$job/findings.txt"
