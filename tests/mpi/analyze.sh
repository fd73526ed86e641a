#!/usr/bin/env bash
# commtap analyze on real preloaded jobs: a 4-rank training loop where rank 2 computes 20 ms
# longer before each all-reduce is named, a clean run is healthy, a live job held in a barrier
# is a hang naming the rank that never arrived, and bad input is exit 2 naming the file.
# (Oversubscribed CI machines delay ranks by a scheduler slice now and then: the test asks for
# 5 ms of median lateness, a quarter of the injected delay.)
source "$(dirname "$0")/common.sh"

run_job() {  # dir [slow rank] [extra us]
  COMMTAP_DIR=$1 COMMTAP_SAMPLE=1 COMMTAP_YIELD=1 \
    run_preloaded 4 "$PROGRAMS/toy_train" 120 1024 "${2:--1}" "${3:-0}" >/dev/null
}
# The jobs last about 3 s: windows of 0.5 s give the detectors the windows an error needs.
analyze() { "$CLI" analyze --min-lateness-ms 5 --window 0.5 "$@"; }

run_job slow 2 20000
# With the default options the 3 s job is one window, and its evidence is overwhelming (rank 2
# last at every collective, 20 ms late where the others differ by microseconds): an error (exit 1).
status=0
"$CLI" analyze slow >default-window.txt || status=$?
expect_equal 1 "$status" "exit status of a short job's slow rank ($(cat default-window.txt))"
grep -q "ERROR slow_rank: rank 2 (.*a healthy job shows this with probability" default-window.txt ||
  fail "one window: not an error with its evidence: $(cat default-window.txt)"
status=0
analyze slow >report.txt || status=$?
expect_equal 1 "$status" "exit status with a slow rank"
grep -q "ERROR slow_rank: rank 2 (" report.txt || fail "rank 2 not named: $(cat report.txt)"
[ "$(grep -c 'ERROR\|CRITICAL\|WARNING' report.txt)" == 1 ] || fail "other findings: $(cat report.txt)"
analyze slow --json >report.json || true
grep -q '"kind": "slow_rank"' report.json || fail "JSON lacks the finding"
grep -q '"subject": "rank 2 (' report.json || fail "JSON lacks the subject"
status=0
analyze slow --fail-on critical >/dev/null || status=$?
expect_equal 0 "$status" "exit status with --fail-on critical"
pass "a rank computing 20 ms longer is named (text, JSON, exit status; a warning in one window)"

run_job clean
status=0
analyze clean >clean.txt || status=$?
expect_equal 0 "$status" "exit status of a clean run ($(cat clean.txt))"
grep -q "healthy: no findings" clean.txt || fail "clean run: $(cat clean.txt)"
pass "a clean run is healthy"

# Findings stored without duplicates; a parent directory is scanned for jobs.
mkdir jobs && mv slow clean jobs/
analyze jobs --store findings.db >/dev/null || true
analyze jobs --store findings.db >/dev/null || true
expect_equal "1|1" "$(sqlite3 findings.db 'SELECT count(*), sum(active) FROM findings')" \
  "stored findings after two runs"
pass "two cron-style runs store one active finding"

"$CLI" report jobs/slow --min-lateness-ms 5 -o report.html 2>/dev/null || fail "commtap report failed"
grep -q "<svg" report.html || fail "report without SVG"
grep -q "rank 2 (" report.html || fail "report without the finding"
grep -Eq "(src|href)=|https?:" report.html && fail "report refers to the network"
pass "commtap report writes one self-contained HTML page"

# A live hang: rank 0 holds outside MPI, rank 1 waits in MPI_Barrier.
mkfifo gate
COMMTAP_DIR=held COMMTAP_INTERVAL=100 run_preloaded 2 "$PROGRAMS/hold_in_barrier" gate >/dev/null &
job=$!
release() { exec 3>gate; echo x >&3; exec 3>&-; }
trap 'release 2>/dev/null || true; wait $job 2>/dev/null || true; rm -rf "$WORK"' EXIT
found=""
for ((i = 0; i < 100; i++)); do
  found=$("$CLI" analyze held --hang-after 1 2>/dev/null | grep "CRITICAL hang" || true)
  [ -n "$found" ] && break
  sleep 0.1
done
release
wait $job
trap 'rm -rf "$WORK"' EXIT
[[ "$found" == *"1 of 2 ranks stuck in MPI_Barrier #1 on comm 1"*"never arrived: rank 0 ("* ]] ||
  fail "live hang not found: [$found]"
pass "a live job held in a barrier: hang, rank 0 never arrived"

mkdir broken && echo "not a database" >broken/rank-0.db
status=0
"$CLI" analyze broken >/dev/null 2>err.txt || status=$?
expect_equal 2 "$status" "exit status on a corrupt file"
grep -q "broken/rank-0.db" err.txt || fail "the error does not name the file: $(cat err.txt)"
pass "a corrupt database: exit 2, the file named"

# The cron wrapper: alert with the JSON report, log, and no overlapping runs.
cron="$SOURCE/scripts/commtap-cron"
status=0
"$cron" --jobs jobs --state state --commtap "$CLI" --alert "cat >alerted.json" \
  -- --min-lateness-ms 5 --window 0.5 || status=$?
expect_equal 1 "$status" "commtap-cron exit status with a finding"
grep -q '"subject": "rank 2 (' alerted.json || fail "the alert did not get the report"
grep -q "exit 1, 1 findings" state/commtap-cron.log || fail "log: $(cat state/commtap-cron.log)"
[ -f state/findings.db ] || fail "commtap-cron kept no findings store"
flock state/commtap-cron.lock "$cron" --jobs jobs --state state --commtap "$CLI" ||
  fail "a run that finds the lock taken should exit 0"
grep -q "skipped: the previous run still holds the lock" state/commtap-cron.log ||
  fail "overlap not logged"
pass "commtap-cron: alert, log, findings store, lock"
