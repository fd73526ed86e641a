#!/usr/bin/env bash
# Hostile trace directories, as root's cron analysis meets them (docs/analyzer.md, "Running it
# as root from cron"): job directories owned by another user (nobody, where this runs as root)
# that hold planted symbolic links, FIFOs, views over endless queries, values no writer writes,
# invalid UTF-8 and escape sequences, sparse files with journals, hard links by the thousand, and
# 1,000 seeded corruptions of a real rank file. For every case every command finishes within its
# limit (never killed by a signal, exit 0, 1 or 2), writes nothing but its output, follows no
# planted link, and the real finding of the healthy-but-slow job beside them is still printed,
# stored, exported to Prometheus and alerted on.
source "$(dirname "$0")/common.sh"

HOSTILE=$PROGRAMS/hostile_traces
ANALYZE_OPTIONS=(--min-lateness-ms 5 --window 0.5)  # the slow job's finding is an ERROR
export TMPDIR=$WORK/tmp  # recovery copies go here: checked to stay small and be removed
mkdir -p "$TMPDIR"

run_job() {  # dir ranks [slow rank] [extra us]
  COMMTAP_DIR=$1 COMMTAP_SAMPLE=1 COMMTAP_YIELD=1 \
    run_preloaded "$2" "$PROGRAMS/toy_train" 120 1024 "${3:--1}" "${4:-0}" >/dev/null
}
run_job jobs/slow 4 2 20000
run_job jobs/clean 2

# What an attacker wants: root's files (a stand-in for /root/.ssh/authorized_keys) and another
# user's private trace.
mkdir -m 0700 victim
echo "root's secret" >victim/authorized_keys
chmod 0600 victim/authorized_keys
cp -a jobs/clean victim/job
sqlite3 victim/job/rank-0.db "UPDATE meta SET value = 'victim-job-id' WHERE key = 'job_id'"
victim_state() { find victim -printf '%p %s %m %U %T@\n' | sort; md5sum victim/authorized_keys; }
victim_state >victim.before

# Runs a commtap command bounded in time; its exit status must be 0, 1 or 2 (not a signal, not
# the time limit), and is left in $last_status.
bounded() {  # what command...
  local what=$1
  shift
  last_status=0
  timeout 120 "$@" || last_status=$?
  case $last_status in
    0 | 1 | 2) return 0 ;;
    124) fail "$what: did not finish within 120 s" ;;
    *) fail "$what: exit $last_status (a crash?)" ;;
  esac
}
no_control_bytes() {  # file what
  if LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]' "$1"; then
    fail "$2: control characters reach the output: $(LC_ALL=C grep -naP '[\x00-\x08\x0b-\x1f\x7f]' "$1" | head -3 | od -c | head)"
  fi
  iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1 || fail "$2: not valid UTF-8"
}

# ---- Hand-made attacks, one job directory each -------------------------------------------------
tree=$WORK/tree
mkdir "$tree" elsewhere
cp -a jobs/slow "$tree/slow"
copy_clean() { cp -a jobs/clean "$tree/$1"; }

copy_clean view-hang  # a table replaced by a view over an endless recursive query
sqlite3 "$tree/view-hang/rank-1.db" "PRAGMA legacy_alter_table=ON;
  ALTER TABLE heartbeats RENAME TO hb;
  CREATE VIEW heartbeats AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)
  SELECT 1 AS rank, x AS wall_ns, 'computing' AS state, NULL AS function, NULL AS comm_id,
  NULL AS seq, NULL AS since_ns, 0 AS threads_in_calls, 0 AS instances_dropped,
  0 AS aggregates_dropped, 0 AS writer_cpu_ns, NULL AS stalled_ns FROM r"
copy_clean fifo  # a FIFO among the rank files: skipped, the rest analyzed
mkfifo "$tree/fifo/rank-9.db"
mkfifo elsewhere/pipe
copy_clean fifo-link && ln -s "$WORK/elsewhere/pipe" "$tree/fifo-link/rank-9.db"
mkdir "$tree/fifo-only" && mkfifo "$tree/fifo-only/rank-0.db"
mkdir "$tree/link-to-victim"  # another user's 0600 trace through a link
ln -s "$WORK/victim/job/rank-0.db" "$tree/link-to-victim/rank-0.db"
ln -s "$WORK/victim/job" "$tree/linked-job"  # a job directory that is a link
copy_clean bad-text  # invalid UTF-8, escape sequences and an ssh key on a line of its own
for f in "$tree"/bad-text/rank-*.db; do
  sqlite3 "$f" "UPDATE ranks SET host = CAST(X'68FF1B5B324A1B5D303B78' AS TEXT);
    UPDATE meta SET value = 'id' || char(10) || 'ssh-ed25519 AAAAC3Nz attacker@evil' || char(10)
    WHERE key = 'job_id'"
done
cp -a jobs/clean "$tree/$(printf 'name\377with\033[31mescape\nand newline')"
cp -a jobs/slow "$tree/huge-times"  # times at the ends of 64 bits
sqlite3 "$tree/huge-times/rank-1.db" "UPDATE collectives SET enter_ns = -9000000000000000000
  WHERE seq % 2 = 0; UPDATE collectives SET exit_ns = 9000000000000000000 WHERE seq % 2 = 1"
copy_clean text-times && sqlite3 "$tree/text-times/rank-1.db" "UPDATE heartbeats SET wall_ns = 'abc'"
copy_clean empty-rank && : >"$tree/empty-rank/rank-99.db"
copy_clean sparse  # 300 MB that occupy nothing, with a journal of junk beside
truncate -s 300M "$tree/sparse/rank-1.db"
head -c 4096 /dev/urandom >"$tree/sparse/rank-1.db-journal"
copy_clean sparse-hot  # the same with a journal that starts as a real one: no 300 MB copy
truncate -s 300M "$tree/sparse-hot/rank-1.db"
{ printf '\xd9\xd5\x05\xf9\x20\xa1\x63\xd7'; head -c 4088 /dev/urandom; } \
  >"$tree/sparse-hot/rank-1.db-journal"
copy_clean hard-links  # one rank file under 2,000 names
for i in $(seq 2 2001); do ln "$tree/hard-links/rank-1.db" "$tree/hard-links/rank-$i.db"; done
copy_clean trigger && sqlite3 "$tree/trigger/rank-0.db" \
  "CREATE TRIGGER t AFTER INSERT ON meta BEGIN SELECT 1; END"
cp -a jobs/slow "$tree/far-future"  # a last write dated near the end of time (plausible: < 4e18)
sqlite3 "$tree/far-future/rank-1.db" "UPDATE aggregates SET wall_ns = 3900000000000000000
  WHERE wall_ns = (SELECT max(wall_ns) FROM heartbeats);
  UPDATE heartbeats SET wall_ns = 3900000000000000000 WHERE wall_ns = (SELECT max(wall_ns)
  FROM heartbeats)"

if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  chown -hR nobody "$tree" elsewhere  # the jobs' owner is not the one who analyzes them
  owner=nobody
else
  owner=$(id -un)
fi
tree_state() { find "$tree" \( -type d -printf '%p %m %U\n' \) -o -printf '%p %s %m %U\n' | sort; }
tree_state >tree.before

out=$WORK/out
mkdir -m 0700 "$out"
bounded "analyze over the hand-made tree" "$CLI" analyze "$tree" "${ANALYZE_OPTIONS[@]}" --json \
  --store "$out/findings.db" --prometheus "$out/commtap.prom" >"$out/analyze.json" \
  2>"$out/analyze.err"
expect_equal 1 "$last_status" "exit status with a slow job among hostile ones (a finding wins)"
grep -q '"kind": "slow_rank"' "$out/analyze.json" || fail "the slow job's finding is lost"
[ "$(sqlite3 "$out/findings.db" "SELECT count(*) FROM findings WHERE kind = 'slow_rank' AND active")" -ge 1 ] ||
  fail "the slow job's finding is not stored"
grep -q 'commtap_finding{.*kind="slow_rank"' "$out/commtap.prom" || fail "no slow_rank metric"
grep -q '^commtap_job_unreadable{path=".*view-hang"} 1$' "$out/commtap.prom" ||
  fail "no unreadable metric for the view job: $(grep unreadable "$out/commtap.prom")"
if command -v promtool >/dev/null; then
  promtool check metrics <"$out/commtap.prom" >promtool.txt 2>&1 || fail "promtool: $(cat promtool.txt)"
fi
for f in analyze.json analyze.err commtap.prom; do no_control_bytes "$out/$f" "$f"; done
grep -q "view-hang.*is a view" "$out/analyze.err" || fail "view job not named: $(cat "$out/analyze.err")"
grep -q "fifo-only.*FIFO" "$out/analyze.err" || fail "FIFO job not named"
grep -q "linked-job: skipped: a symbolic link" "$out/analyze.err" || fail "linked job not skipped"
grep -q "huge-times.*holds a time" "$out/analyze.err" || fail "huge times not refused"
grep -q "text-times.*holds a time" "$out/analyze.err" || fail "text times not refused"
grep -q "trigger.*holds a trigger" "$out/analyze.err" || fail "trigger not refused"
grep -q "sparse-hot.*hot journal" "$out/analyze.err" || fail "sparse hot file copied?"
grep -q 'hard-links.*2 ranks' <("$CLI" analyze "$tree/hard-links" 2>/dev/null) ||
  fail "hard links not read once"
grep -q '"path": ".*/fifo"' "$out/analyze.json" || fail "the job beside a FIFO is not analyzed"
grep -q 'ssh-ed25519 AAAAC3Nz attacker@evil\\\\x0A' "$out/analyze.json" ||
  fail "the job id's newline is not escaped: $(grep -a ssh "$out/analyze.json")"
! grep -rq "victim-job-id" "$out" || fail "the victim's trace was read"
[ -z "$(ls -A "$TMPDIR")" ] || fail "left in TMPDIR: $(ls -A "$TMPDIR")"
[ "$(stat -c %a "$out/findings.db")" == 600 ] || fail "the store is not 0600"
[ "$(stat -c %a "$out/commtap.prom")" == 644 ] || fail "the textfile is not 0644"
pass "analyze: every hostile job costs its own line, the slow job's finding is printed, stored and exported"

# --follow-symlinks as root still never reads another owner's file.
if [ "$owner" == nobody ]; then
  bounded "follow" "$CLI" analyze "$tree/link-to-victim" --follow-symlinks >follow.txt 2>&1
  grep -q "another owner" follow.txt || fail "a link to root's file was followed: $(cat follow.txt)"
  ! grep -q victim-job-id follow.txt || fail "the victim's trace was read"
  pass "--follow-symlinks as root: a link to another owner's file is refused"
fi

# Every other command on every hand-made job, each output path a planted link to root's file.
for job in "$tree"/*; do
  name=$(basename "$job")
  [ -d "$job" ] && [ ! -L "$job" ] || continue  # a named link is followed: the user named it
  for output in report.html trace.json job.db; do
    ln -sfn "$WORK/victim/authorized_keys" "$job/$output"
    ln -sfn "$WORK/victim/authorized_keys" "$job/$output.tmp"  # the names of old
  done
  bounded "report $name" "$CLI" report "$job" -o "$job/report.html" "${ANALYZE_OPTIONS[@]}" \
    2>>other.err
  bounded "export $name" "$CLI" export "$job" -o "$job/trace.json" 2>>other.err
  bounded "merge $name" "$CLI" merge "$job" 2>>other.err
  bounded "query $name" "$CLI" query "$job" heartbeats >>query.out 2>>other.err
  bounded "query --json $name" "$CLI" query "$job" ranks --json >>query.out 2>>other.err
  for output in report.html trace.json job.db; do
    if [ -L "$job/$output" ]; then
      rm "$job/$output"  # the command refused the job: the link stays, untouched
    else
      [ "$(stat -c %a "$job/$output")" == 600 ] ||
        fail "$name/$output: mode $(stat -c %a "$job/$output") from 0600 inputs"
      rm "$job/$output"
    fi
    rm "$job/$output.tmp"
  done
done
no_control_bytes query.out "query output"
no_control_bytes other.err "error lines"
diff <(victim_state) victim.before >&2 || fail "root's files changed"
diff <(tree_state) tree.before >&2 || fail "the job directories changed"
[ -z "$(ls -A "$TMPDIR")" ] || fail "left in TMPDIR: $(ls -A "$TMPDIR")"
pass "report, export, merge and query on every hand-made job: bounded, no link followed, 0600 outputs"

# The report as the job stood at 2 s: the far-future write lies past the analysis' "now", and must
# not give the call-site chart billions of windows (memory capped so that it fails, not swaps).
(
  ulimit -v 4000000
  bounded "report --at far-future" "$CLI" report "$tree/far-future" --at 2 -o far.html \
    "${ANALYZE_OPTIONS[@]}" 2>far.err
  [ "$last_status" -le 1 ] || fail "report --at on a far-future write: exit $last_status: $(cat far.err)"
)
! grep -q "left out of the report" far.err || fail "report --at on a far-future write: $(cat far.err)"
[ -s far.html ] && [ "$(stat -c %s far.html)" -lt 50000000 ] ||
  fail "report --at on a far-future write: no page, or an unbounded one"
pass "report --at with a write near the end of time: a bounded page"

# query --sql: no ATTACH, no pointers, a time and a memory limit.
status=0
"$CLI" query jobs/clean --sql "ATTACH DATABASE '$WORK/created.db' AS x" >/dev/null 2>err.txt || status=$?
expect_equal 2 "$status" "ATTACH's exit status"
[ ! -e "$WORK/created.db" ] || fail "ATTACH created a file"
status=0
"$CLI" query jobs/clean --sql "SELECT fts3_tokenizer('simple')" >/dev/null 2>&1 || status=$?
expect_equal 2 "$status" "fts3_tokenizer's exit status"
status=0
timeout 60 "$CLI" query jobs/clean --timeout 2 --sql \
  "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r" \
  >/dev/null 2>err.txt || status=$?
expect_equal 2 "$status" "an endless query's exit status"
grep -q -- "--timeout" err.txt || fail "the time limit is not named: $(cat err.txt)"
status=0
timeout 60 "$CLI" query jobs/clean --memory-limit 32 --sql \
  "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x, printf('%.100c', 'x') FROM r" \
  >/dev/null 2>err.txt || status=$?
expect_equal 2 "$status" "an endless result's exit status"
pass "query --sql: ATTACH and fts3_tokenizer refused, time and memory limited"

# From cron, as root over the tree: the alert still fires, the state is private.
status=0
timeout 300 "$SOURCE/scripts/commtap-cron" --jobs "$tree" --state "$WORK/state" \
  --alert "cat >'$WORK/alert.json'" --commtap "$CLI" -- "${ANALYZE_OPTIONS[@]}" || status=$?
expect_equal 1 "$status" "commtap-cron's exit status"
grep -q '"kind": "slow_rank"' alert.json || fail "no alert for the slow job"
[ "$(stat -c %a state)" == 700 ] || fail "the state directory is $(stat -c %a state)"
no_control_bytes state/commtap-cron.log "the cron log"
ln -s "$WORK/victim" linked-state
status=0
"$SOURCE/scripts/commtap-cron" --jobs "$tree" --state linked-state --commtap "$CLI" \
  2>/dev/null || status=$?
expect_equal 2 "$status" "commtap-cron with a linked state directory"
diff <(victim_state) victim.before >&2 || fail "root's files changed"
pass "commtap-cron: alerted despite unreadable jobs, state 0700, a linked state refused"

# ---- 1,000 seeded corruptions of a real rank file, in batches of 250 ---------------------------
sample=0
for batch in 0 1 2 3; do
  rm -rf "$tree"
  mkdir "$tree"
  cp -a jobs/slow "$tree/slow"
  "$HOSTILE" jobs/slow/rank-1.db "$tree" $((batch * 250)) 250 20261125 ||
    fail "hostile_traces failed"
  [ "$owner" == nobody ] && chown -R nobody "$tree"
  tree_state >tree.before
  bounded "analyze batch $batch" "$CLI" analyze "$tree" "${ANALYZE_OPTIONS[@]}" --json \
    --job-timeout 20 --store "$out/findings.db" --prometheus "$out/commtap.prom" \
    >"$out/analyze.json" 2>"$out/analyze.err"
  grep -q '"kind": "slow_rank"' "$out/analyze.json" || fail "batch $batch: the slow finding is lost"
  seen=$(($(grep -c '"job_id":' "$out/analyze.json") + $(grep -c '"error":' "$out/analyze.json")))
  expect_equal 251 "$seen" "batch $batch: jobs analyzed or named unreadable"
  no_control_bytes "$out/analyze.json" "batch $batch JSON"
  no_control_bytes "$out/analyze.err" "batch $batch errors"
  if command -v promtool >/dev/null; then
    promtool check metrics <"$out/commtap.prom" >promtool.txt 2>&1 || fail "promtool: $(cat promtool.txt)"
  fi
  # Every other command on one case in ten.
  for case_dir in $(ls -d "$tree"/case-* | sort -t- -k2 -n | awk 'NR % 10 == 1'); do
    bounded "report $case_dir" "$CLI" report "$case_dir" -o "$out/r.html" --job-timeout 20 2>/dev/null
    bounded "export $case_dir" "$CLI" export "$case_dir" -o "$out/t.json" --job-timeout 20 2>/dev/null
    bounded "merge $case_dir" "$CLI" merge "$case_dir" -o "$out/m.db" --job-timeout 20 2>/dev/null
    bounded "query $case_dir" "$CLI" query "$case_dir" collectives --json >/dev/null 2>&1
    sample=$((sample + 1))
  done
  diff <(tree_state) tree.before >&2 || fail "batch $batch: the job directories changed"
  [ -z "$(ls -A "$TMPDIR")" ] || fail "left in TMPDIR: $(ls -A "$TMPDIR")"
done
diff <(victim_state) victim.before >&2 || fail "root's files changed"
pass "1000 corrupted rank files: analyze bounded and isolated each time; $sample sampled through report, export, merge and query"
