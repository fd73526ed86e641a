#!/usr/bin/env bash
# Trust, third round (issue 46): another local user (nobody) attacks the library's files in a
# shared directory and root's analysis of their job, and hands the library bad input files.
#  - the library: a trace directory another user made first (1777, with a symbolic link, a FIFO
#    or a 0666 file planted at rank-0.db) is refused with one line, the job goes on and nothing
#    of the victim's is touched; a directory the job makes is 0700; a shared --local-dir's
#    working copies live in a private mkdtemp directory;
#  - root's analysis of a WAL-mode rank file with frames in its -wal creates nothing beside it and
#    nothing in a directory swapped in for the job's while analyses run;
#  - COMMTAP_MODEL and COMMTAP_AVOID_HOSTS=@store naming a FIFO, a directory, /dev/zero or a huge
#    file: one line each, the built-in values, the job never hangs or dies; host names with ','
#    or '>' in a store add no link.
# Verdicts do not depend on timing: every run is bounded by `timeout`, and the race's verdict is
# what exists afterwards.
source "$(dirname "$0")/common.sh"

[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (a second user attacks)"; exit 0; }
attacker() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
chmod 0755 "$WORK"
shared=$WORK/shared  # a group scratch directory, as /tmp is
mkdir -m 1777 "$shared"
echo "precious" >"$WORK/precious"
chmod 0600 "$WORK/precious"
precious_sum=$(md5sum <"$WORK/precious")

job() {  # job id, in $shared, 2 ranks; extra env before; stderr to $1.err
  local id=$1
  shift
  (cd "$shared" && env COMMTAP_JOB_ID="$id" COMMTAP_YIELD=1 "$@" \
    timeout "$LIMIT" mpiexec -n 2 -genv LD_PRELOAD "$LIB" "$PROGRAMS/toy_train" 20 64 -1 0) \
    >"$WORK/$id.out" 2>"$WORK/$id.err" || fail "job $id: exit $? ($(head -3 "$WORK/$id.err"))"
}

# ---- 1. The library's files: created, never adopted ---------------------------------------------
for plant in symlink fifo open-file; do
  dir=$shared/commtap-attacked-$plant
  attacker mkdir -m 1777 "$dir"
  case $plant in
    symlink) attacker ln -s "$WORK/precious" "$dir/rank-0.db" ;;
    fifo) attacker mkfifo -m 0666 "$dir/rank-0.db" ;;
    open-file) attacker sh -c "umask 0; : >'$dir/rank-0.db'; chmod 0666 '$dir/rank-0.db'" ;;
  esac
  job "attacked-$plant"
  grep -q "belongs to uid $(id -u nobody)" "$WORK/attacked-$plant.err" ||
    fail "$plant: no message refusing another user's directory: $(cat "$WORK/attacked-$plant.err")"
  [ "$(grep -c "recording is off\|records nothing" "$WORK/attacked-$plant.err")" -le 2 ] ||
    fail "$plant: more than one line per rank"
  [ "$(md5sum <"$WORK/precious")" = "$precious_sum" ] || fail "$plant: the victim's file changed"
  [ -z "$(find "$dir" -user root)" ] || fail "$plant: the victim wrote into the attacker's dir"
  [ -z "$(find "$dir" -type f -size +0)" ] || fail "$plant: the trace leaked into $dir"
done
pass "a trace directory another user made first is refused, the job goes on, nothing leaks"

job private
[ "$(stat -c %a "$shared/commtap-private")" = 700 ] ||
  fail "the job's trace directory is $(stat -c %a "$shared/commtap-private"), not 700"
[ "$(stat -c %a "$shared/commtap-private/rank-0.db")" = 600 ] || fail "rank file not 0600"
ln -s "$shared/commtap-private" "$WORK/link-dir"
job via-link COMMTAP_DIR="$WORK/link-dir"
grep -q "symbolic link" "$WORK/via-link.err" || fail "COMMTAP_DIR as a symbolic link accepted"
pass "the job's own directory is 0700, a symbolic link as COMMTAP_DIR is refused"

# Working copies on a shared --local-dir: in a private mkdtemp directory, whatever was planted.
local_dir=$shared/local
mkdir -m 1777 "$local_dir"
for pid in $(seq 1 400); do
  attacker ln -s "$WORK/precious" "$local_dir/commtap-snap-rank-0.$pid.db"
done
job snap COMMTAP_SHARED_FS=on COMMTAP_LOCAL_DIR="$local_dir" COMMTAP_DIR="$WORK/snap-dir" \
  unshare --pid --fork --mount-proc
[ "$(md5sum <"$WORK/precious")" = "$precious_sum" ] || fail "a planted working copy was followed"
[ -z "$(find "$local_dir" -mindepth 1 -user root)" ] || fail "working copies left behind"
"$CLI" query "$WORK/snap-dir" --sql "SELECT count(*) FROM ranks" --raw | grep -qx 2 ||
  fail "the snapshot layout's trace is incomplete"
pass "working copies live in private directories (planted names for pids 1-400 not followed)"

# ---- 2. Root's analysis creates nothing beside a user's WAL file -------------------------------
attacker mkdir -m 0755 "$shared/user-jobs" "$shared/user-jobs/live"
cp "$shared/commtap-private/rank-0.db" "$shared/commtap-private/rank-1.db" "$shared/user-jobs/live/"
# A live rank's state: WAL mode, committed frames not yet checkpointed, no -shm.
python3 - "$shared/user-jobs/live/rank-0.db" <<'EOF'
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("BEGIN")
c.execute("UPDATE meta SET value = 'live-job' WHERE key = 'job_id'")
c.execute("COMMIT")
os._exit(0)  # no checkpoint, the -wal stays
EOF
rm -f "$shared/user-jobs/live/rank-0.db-shm"
chown -R nobody:nogroup "$shared/user-jobs/live"
[ -s "$shared/user-jobs/live/rank-0.db-wal" ] || fail "setup: no -wal with frames"
before=$(ls -la "$shared/user-jobs/live")
"$CLI" query "$shared/user-jobs/live" --sql "SELECT value FROM meta WHERE key = 'job_id' AND rank = 0" --raw \
  >"$WORK/live.out" 2>&1 || true
"$CLI" analyze "$shared/user-jobs" >/dev/null 2>&1 || true
[ "$(ls -la "$shared/user-jobs/live")" = "$before" ] ||
  fail "root's analysis changed the user's job directory: $(ls -la "$shared/user-jobs/live")"
pass "root's analysis of a live WAL file creates nothing beside it"

# The directory swap: the user replaces the job directory by a link to root's directory, back and
# forth, while root analyzes; nothing may appear in root's directory.
target=$WORK/root-target
mkdir -m 0755 "$target"
attacker bash -c '
  cd "$1"; end=$((SECONDS + 60))
  while [ ! -e "$2" ] && [ $SECONDS -lt $end ]; do
    mv live real; ln -s "$3" live; rm live; mv real live
  done' swap "$shared/user-jobs" "$WORK/swap.done" "$target" &
swapper=$!
for i in $(seq 1 40); do
  timeout 60 "$CLI" analyze "$shared/user-jobs" >/dev/null 2>&1 || true
  timeout 60 "$CLI" query "$shared/user-jobs/live" --sql "SELECT count(*) FROM ranks" --raw \
    >/dev/null 2>&1 || true
done
touch "$WORK/swap.done"
wait "$swapper" || true
[ -z "$(ls -A "$target")" ] || fail "root created files in a swapped-in directory: $(ls -la "$target")"
pass "a job directory swapped for a link during 80 analyses: nothing created outside it"

# ---- 4. The library's input files ---------------------------------------------------------------
mkfifo "$WORK/fifo"
mkdir "$WORK/a-dir"
truncate -s 700M "$WORK/huge"
for input in "$WORK/fifo" "$WORK/a-dir" /dev/zero "$WORK/huge"; do
  name=$(basename "$input")
  job "model-$name" COMMTAP_MODEL="$input" COMMTAP_ALLREDUCE=auto COMMTAP_TEST_NODES=2
  grep -q "COMMTAP_MODEL=.*using the built-in cost model" "$WORK/model-$name.err" ||
    fail "model $input: no message: $(head -3 "$WORK/model-$name.err")"
  job "store-$name" COMMTAP_AVOID_HOSTS="@$input" COMMTAP_ALLREDUCE=auto COMMTAP_TEST_NODES=2
  grep -q "COMMTAP_AVOID_HOSTS: cannot read findings" "$WORK/store-$name.err" ||
    fail "store $input: no message: $(head -3 "$WORK/store-$name.err")"
done
pass "a FIFO, a directory, /dev/zero or a huge file as model or store: one line, built-in values"

# A store whose host names carry the one-line form's separators adds no link and no host.
store=$WORK/store.db
sqlite3 "$store" "CREATE TABLE avoid_list (format_version INTEGER NOT NULL, job_id TEXT NOT NULL,
  finding_kind TEXT NOT NULL, subject TEXT NOT NULL, from_host TEXT NOT NULL, to_host TEXT,
  extra_latency_s REAL NOT NULL DEFAULT 0, extra_s_per_byte REAL NOT NULL DEFAULT 0,
  last_seen_ns INTEGER NOT NULL);
  INSERT INTO avoid_list VALUES (1, 'j', 'slow_host', 'x', 'a,b>c>1>1', NULL, 0, 0, $(date +%s)000000000);
  INSERT INTO avoid_list VALUES (1, 'j', 'slow_host', 'x', printf('%.300c', 'h'), NULL, 0, 0, $(date +%s)000000000);"
job store-injected COMMTAP_AVOID_HOSTS="@$store" COMMTAP_ALLREDUCE=auto COMMTAP_TEST_NODES=2
grep -q "b>c\|, b\b" "$WORK/store-injected.err" && fail "an injected link was read: $(cat "$WORK/store-injected.err")"
"$CLI" query "$shared/commtap-store-injected" --sql \
  "SELECT value FROM settings WHERE name = 'COMMTAP_AVOID_HOSTS'" --raw >/dev/null
pass "host names with ',' or '>' or of 300 bytes in a store are left out"
