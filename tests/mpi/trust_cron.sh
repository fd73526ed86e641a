#!/usr/bin/env bash
# Trust, third round (issue 46), root's cron run over many users' jobs and `commtap query`:
#  - a job whose rank file lacks commtap's primary key (every lookup a table scan) or holds planner
#    statistics is refused with one line, as a view is; the other jobs are analyzed;
#  - one file reached from several jobs (hard links) is read for the first job only;
#  - one deadline for the whole run (--deadline): owners take turns, a user's slow jobs use at most
#    their shares, the other user's slow job is still analyzed and its alert goes as soon as its
#    finding is known (before the run's report is printed);
#  - query --sql: PRAGMA table_info allowed, --timeout holds inside one long function call,
#    --memory-limit bounds what the process holds, a full disk is named as such, UTF-16 files are
#    queried and merged;
#  - a bad setting's value is echoed cut.
# Verdicts do not depend on timing: the deadline's verdict is which message the run ends with and
# which job was analyzed; the only times asserted are hang guards far above what the runs take.
source "$(dirname "$0")/common.sh"

[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (jobs of other users)"; exit 0; }
ANALYZE_OPTIONS=(--min-lateness-ms 5 --window 0.5)  # the slow job's finding is an ERROR
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"
chmod 0755 "$WORK"

run_job() {  # dir ranks [slow rank] [extra us]
  COMMTAP_DIR=$1 COMMTAP_SAMPLE=1 COMMTAP_YIELD=1 \
    run_preloaded "$2" "$PROGRAMS/toy_train" 120 1024 "${3:--1}" "${4:-0}" >/dev/null
}
run_job jobs/slow 4 2 20000
run_job jobs/clean 2

# ---- 1. Files without commtap's keys, or with planner statistics: refused like views ----------
tree=$WORK/keys
mkdir "$tree"
cp -a jobs/slow "$tree/slow"
cp -a jobs/clean "$tree/no-key"
sqlite3 "$tree/no-key/rank-1.db" "PRAGMA legacy_alter_table=ON;
  CREATE TABLE c2 AS SELECT * FROM collectives; DROP TABLE collectives;
  ALTER TABLE c2 RENAME TO collectives"
cp -a jobs/clean "$tree/stats"
sqlite3 "$tree/stats/rank-0.db" "ANALYZE"
chown -R nobody:nogroup "$tree/no-key" "$tree/stats"
status=0
timeout 120 "$CLI" analyze "$tree" --json "${ANALYZE_OPTIONS[@]}" >keys.json 2>keys.err || status=$?
expect_equal 1 "$status" "exit status with the slow job's finding beside refused jobs"
grep -q "no-key/rank-1.db: its table collectives lacks commtap's primary key (rank, comm_id, seq)" \
  keys.err || fail "a table without its primary key was read: $(cat keys.err)"
grep -q "stats/rank-0.db: holds planner statistics (sqlite_stat1)" keys.err ||
  fail "a file with planner statistics was read: $(cat keys.err)"
grep -q '"kind": "slow_rank"' keys.json || fail "the slow job beside them was not analyzed"
pass "a file without commtap's primary key or with planner statistics is refused, the rest analyzed"

# ---- 2. One file, several jobs (hard links): read once --------------------------------------------
tree=$WORK/links
mkdir "$tree"
cp -a jobs/clean "$tree/a"
for b in b1 b2 b3 b4 b5; do
  mkdir "$tree/$b"
  ln "$tree/a/rank-0.db" "$tree/$b/rank-0.db"
  ln "$tree/a/rank-1.db" "$tree/$b/rank-1.db"
done
chown -R nobody:nogroup "$tree"
status=0
timeout 120 "$CLI" analyze "$tree" --json >links.json 2>links.err || status=$?
expect_equal 2 "$status" "exit status with jobs of hard links"
expect_equal 5 "$(grep -c "is the same file as one of $tree/a (a hard link)" links.err)" \
  "jobs refused as hard links of another job's files"
expect_equal a "$(python3 -c 'import json, os, sys
print(" ".join(os.path.basename(j["path"]) for j in json.load(open(sys.argv[1]))["jobs"]))' links.json)" \
  "jobs analyzed"
pass "a file reached from 6 jobs through hard links is read once"

# ---- 3. One deadline for the run, owners' turns, the alert when the finding is known --------------
# One user's 12 slow jobs before another user's slow job, whose name sorts last. Every job has a
# finding, and the alert command takes a second (sleep 1): each job costs the run at least a
# second, whatever the machine's speed. The deadline is 25 s, the floor 15 s: the other user's job
# has its turn second (owners take turns), with a share of 15 s (the floor: a share is the time
# left over the jobs left, at least the floor), far more than its analysis needs under any load;
# no job starts with less than 15 s left, so after 10 s of the 13 jobs' alerts the run ends with
# its message.
tree=$WORK/deadline
mkdir "$tree" alerts
for a in $(seq 10 21); do cp -a jobs/slow "$tree/a$a"; done
cp -a jobs/slow "$tree/zz-slow"
chown -R nobody:nogroup "$tree"/a*
chown -R daemon:daemon "$tree/zz-slow"
alert="cat >'$WORK/alert.json'; grep -q zz-slow '$WORK/alert.json' && cp '$WORK/alert.json' '$WORK/victim-alert.json' && { [ -s '$WORK/deadline.json' ] || touch '$WORK/alerted-early'; }; sleep 1"
status=0
start=$SECONDS
timeout 300 "$CLI" analyze "$tree" --json --deadline 25 --job-floor 15 "${ANALYZE_OPTIONS[@]}" \
  --alert "$alert" >deadline.json 2>deadline.err || status=$?
took=$((SECONDS - start))
expect_equal 1 "$status" "exit status with a finding and jobs cut by the deadline"
grep -q "the run's deadline (--deadline 25 s) came before [0-9]* job(s) had their turn" \
  deadline.err || fail "the run did not end at its deadline: $(cat deadline.err)"
grep -q "zz-slow: not analyzed" deadline.err && fail "the other user's job had no turn"
analyzed() {  # report.json -> the analyzed jobs' names, one a line
  python3 -c 'import json, os, sys
print("\n".join(os.path.basename(j["path"]) for j in json.load(open(sys.argv[1]))["jobs"]))' "$1"
}
analyzed deadline.json | grep -qx zz-slow || fail "the other user's job was not analyzed"
grep -q '"kind": "slow_rank"' victim-alert.json || fail "no alert for the other user's job"
[ -e alerted-early ] || fail "the alert waited for the whole run"
[ "$took" -lt 200 ] || fail "the run took $took s with a deadline of 25 s"
pass "one deadline for the run ($took s): the other owner's job analyzed and alerted on at once"

# commtap-cron passes its deadline and the alert to analyze.
rm -f victim-alert.json
status=0
timeout 300 "$SOURCE/scripts/commtap-cron" --jobs "$tree" --state "$WORK/state" --deadline 25 \
  --alert "$alert" --commtap "$CLI" -- "${ANALYZE_OPTIONS[@]}" --job-floor 15 || status=$?
expect_equal 1 "$status" "commtap-cron's exit status"
grep -q '"kind": "slow_rank"' victim-alert.json || fail "commtap-cron sent no alert"
grep -q "the run's deadline (--deadline 25 s) came before" state/commtap-cron.log ||
  fail "commtap-cron's run had no deadline: $(tail -5 state/commtap-cron.log)"
status=0
"$SOURCE/scripts/commtap-cron" --jobs jobs --state "$WORK/state2" --alert "exit 3" \
  --commtap "$CLI" -- "${ANALYZE_OPTIONS[@]}" 2>cron.err || status=$?
expect_equal 1 "$status" "commtap-cron's exit status with a failing alert"
grep -q "commtap-cron: the alert command 'exit 3' failed (exit 3)" cron.err ||
  fail "a failed alert is not said on stderr: $(cat cron.err)"
pass "commtap-cron: one deadline, alerts per job, a failed alert on stderr"

# ---- 4. query --sql limits ----------------------------------------------------------------------
"$CLI" query jobs/clean --sql "PRAGMA table_info(ranks)" --raw >pragma.out 2>&1 ||
  fail "PRAGMA table_info refused: $(cat pragma.out)"
grep -q "^0|rank|INTEGER" pragma.out || fail "PRAGMA table_info: $(cat pragma.out)"
status=0
"$CLI" query jobs/clean --sql "PRAGMA user_version = 3" >/dev/null 2>&1 || status=$?
expect_equal 2 "$status" "setting user_version"
# One LIKE over 60 MB with a pattern of 998 letters before a 'b': a single function call of
# minutes (each position compared up to 998 times), that SQLite's progress handler never sees.
status=0
start=$SECONDS
timeout 120 "$CLI" query jobs/clean --timeout 2 --sql \
  "SELECT printf('%.60000000c', 'a') LIKE '%' || printf('%.998c', 'a') || 'b'" \
  >/dev/null 2>like.err || status=$?
took=$((SECONDS - start))
expect_equal 2 "$status" "a long function call's exit status"
grep -q -- "--timeout" like.err || fail "the time limit is not named: $(cat like.err)"
[ "$took" -lt 60 ] || fail "query --timeout 2 ran $took s"
# Long values in one row (within SQLite's heap limit, each tripled as text): the process stays
# within the limit and its own size.
rss_kib() {  # command... -> the peak resident set of the command, KiB (its output discarded)
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
columns=$(for i in $(seq 1 6); do printf "randomblob(30000000), "; done)
peak=$(rss_kib "$CLI" query jobs/clean --memory-limit 256 --sql "SELECT ${columns}1")
[ "$peak" -lt $(((256 + 300) * 1024)) ] || fail "query --memory-limit 256 held $((peak / 1024)) MiB"
status=0
"$CLI" query jobs/clean --memory-limit 256 --sql "SELECT ${columns}1" >/dev/null 2>mem.err ||
  status=$?
expect_equal 2 "$status" "an oversized row's exit status"
grep -q -- "--memory-limit" mem.err || fail "the memory limit is not named: $(cat mem.err)"
pass "query: PRAGMA table_info, --timeout inside one function call ($took s), --memory-limit ($((peak / 1024)) MiB peak)"

# A full disk: said as such, with the path.
mkdir full
unshare --mount bash -c '
  mount -t tmpfs -o size=16k tmpfs full || exit 3
  "$1" merge jobs/slow -o full/merged.db 2>merge.err; echo $? >merge.status
  SQLITE_TMPDIR=$PWD/full "$1" query jobs/slow --sql "SELECT * FROM collectives c1,
    collectives c2 ORDER BY c1.enter_ns + c2.exit_ns" >/dev/null 2>sort.err; echo $? >sort.status
  "$1" analyze jobs/slow --store full/findings.db "${@:2}" >/dev/null 2>store.err
  echo $? >store.status' full-disk "$CLI" "${ANALYZE_OPTIONS[@]}" ||
  fail "cannot mount a small tmpfs"
expect_equal 2 "$(cat merge.status)" "merge onto a full disk"
grep -q "the disk holding full/merged.db is full" merge.err || fail "merge: $(cat merge.err)"
expect_equal 2 "$(cat sort.status)" "a query that spills onto a full disk"
grep -q "the disk holding SQLite's temporary files ($WORK/full) is full" sort.err ||
  fail "query: $(cat sort.err)"
grep -q "cannot store findings: .*the disk holding full/findings.db is full" store.err ||
  fail "store: $(cat store.err)"
pass "a full disk is named as such, with the path (merge, a query's sort, the store)"

# UTF-16 files: queried and merged like UTF-8 ones (rank 1 in UTF-16, rank 0 not).
cp -a jobs/clean utf16
rm utf16/rank-1.db
{
  echo "PRAGMA encoding = 'UTF-16le';"
  sqlite3 jobs/clean/rank-1.db .dump
  echo "PRAGMA user_version = $(sqlite3 jobs/clean/rank-1.db 'PRAGMA user_version');"
} | sqlite3 utf16/rank-1.db
expect_equal UTF-16le "$(sqlite3 utf16/rank-1.db 'PRAGMA encoding')" "the copy's encoding"
expect_equal "0|$(hostname)
1|$(hostname)" "$("$CLI" query utf16 --sql "SELECT rank, host FROM ranks ORDER BY rank" --raw)" \
  "query over a UTF-16 rank file"
"$CLI" merge utf16 -o merged16.db 2>/dev/null || fail "merge of a UTF-16 rank file"
expect_equal 2 "$(sqlite3 merged16.db 'SELECT count(*) FROM ranks')" "ranks merged"
pass "a UTF-16 rank file is queried and merged"

# ---- 5. A bad setting's value is echoed cut ---------------------------------------------------
long=$(head -c 100000 /dev/zero | tr '\0' x)
COMMTAP_DIR=bad COMMTAP_SAMPLE=$long timeout "$LIMIT" mpiexec -n 1 -genv LD_PRELOAD "$LIB" \
  "$PROGRAMS/toy_train" 5 64 -1 0 >/dev/null 2>bad.err || fail "a bad setting stopped the job"
grep -q "COMMTAP_SAMPLE='x*\.\.\.(100000 bytes)'" bad.err || fail "not cut: $(head -c 300 bad.err)"
[ "$(wc -c <bad.err)" -lt 2000 ] || fail "a 100 KB value echoed: $(wc -c <bad.err) bytes"
pass "a 100 KB bad setting is echoed as its first 80 bytes and its length"
