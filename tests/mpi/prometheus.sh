#!/usr/bin/env bash
# commtap analyze --prometheus on real jobs: a 4-rank job with a slow rank and a clean one,
# analyzed cron-style; the file passes `promtool check metrics` (Debian's prometheus package,
# installed by scripts/install-deps) and carries the finding as a labelled gauge and both jobs'
# figures; it is replaced atomically (no temporary left behind, old content until the rename).
source "$(dirname "$0")/common.sh"

run_job() {  # dir [slow rank] [extra us]
  COMMTAP_DIR=$1 COMMTAP_SAMPLE=1 COMMTAP_YIELD=1 \
    run_preloaded 4 "$PROGRAMS/toy_train" 120 1024 "${2:--1}" "${3:-0}" >/dev/null
}
mkdir jobs
run_job jobs/slow 2 20000
run_job jobs/clean

mkdir textfile
status=0
"$CLI" analyze jobs --min-lateness-ms 5 --window 0.5 --prometheus textfile/commtap.prom \
  >report.txt || status=$?
expect_equal 1 "$status" "exit status with a slow rank ($(cat report.txt))"
prom=textfile/commtap.prom
[ -s "$prom" ] || fail "no metrics file"
expect_equal "commtap.prom" "$(ls textfile)" "files in the textfile directory"
grep -q '^commtap_finding{job_id="[^"]*",path="jobs/slow",kind="slow_rank",subject="rank 2 (.*)",severity="error"} 1$' \
  "$prom" || fail "no slow_rank gauge: $(cat "$prom")"
expect_equal 1 "$(grep -c '^commtap_finding{' "$prom")" "active findings"
grep -q '^commtap_job_ranks{job_id="[^"]*",path="jobs/clean"} 4$' "$prom" || fail "no clean job"
grep -q '^commtap_job_findings{job_id="[^"]*",path="jobs/clean",severity="error"} 0$' "$prom" ||
  fail "clean job's count"
grep -Eq '^commtap_job_analysis_seconds\{job_id="[^"]*",path="jobs/slow"\} [0-9.e-]+$' "$prom" ||
  fail "no analysis time"
grep -q '^commtap_analyze_jobs 2$' "$prom" || fail "job count"
pass "findings as labelled gauges, per-job counts and analysis time"

if command -v promtool >/dev/null; then
  promtool check metrics <"$prom" >promtool.txt 2>&1 || fail "promtool: $(cat promtool.txt)"
  pass "promtool check metrics: clean"
else
  # scripts/install-deps installs it; a machine where that was impossible still runs the rest.
  echo "promtool not installed (Debian package prometheus): format check skipped"
fi

# A failed write is exit 2 naming the file; an unreadable input is counted and still exit 2.
status=0
"$CLI" analyze jobs/clean --prometheus missing-dir/x.prom >/dev/null 2>err.txt || status=$?
expect_equal 2 "$status" "exit status when the metrics cannot be written"
grep -q "missing-dir/x.prom" err.txt || fail "the error does not name the file: $(cat err.txt)"
status=0
"$CLI" analyze jobs/clean no-such-job --prometheus "$prom" >/dev/null 2>&1 || status=$?
expect_equal 2 "$status" "exit status with an unreadable input"
grep -q '^commtap_analyze_unreadable_inputs 1$' "$prom" || fail "unreadable input not counted"
grep -q '^commtap_analyze_jobs 1$' "$prom" || fail "job count after the second run"
expect_equal "commtap.prom" "$(ls textfile)" "files in the textfile directory"
pass "errors: exit 2, counted, no temporary left"

# From cron: commtap-cron passes the option through to analyze.
status=0
"$SOURCE/scripts/commtap-cron" --jobs jobs --state state --commtap "$CLI" -- \
  --min-lateness-ms 5 --window 0.5 --prometheus textfile/commtap.prom || status=$?
expect_equal 1 "$status" "commtap-cron's exit status with a slow rank"
grep -q '^commtap_finding{.*kind="slow_rank".*} 1$' textfile/commtap.prom ||
  fail "commtap-cron did not write the finding: $(cat textfile/commtap.prom)"
expect_equal "commtap.prom" "$(ls textfile)" "files in the textfile directory"
pass "commtap-cron -- --prometheus FILE"
