#!/usr/bin/env bash
# COMMTAP_DIR on a network filesystem, read while the job writes it, as a cron analyzer on another
# host does. The server is sshd in a network namespace of this test's own (ctsfs<pid>, a veth pair
# on 10.77.219.0/30), exporting a directory over SFTP; the root namespace mounts it twice with
# sshfs: the job writes through one mount, the reader reads through the other. Two mounts are two
# clients, like two hosts: each has its own page cache, its own (local) locks and its own mapping
# of any -shm file. Checked on every read during the job: `commtap analyze` and `commtap query`
# succeed, PRAGMA integrity_check is ok on every published file, no rank's window count goes
# backwards, no -wal/-shm beside the published files; at the end: every window is there (no gap
# between consecutive heartbeats beyond a few intervals), every step's all-reduce is counted, no
# working copy or temporary file is left.
#
# COMMTAP_TEST_SHARED_FS=off runs the job with the snapshot layout turned off (WAL in place on the
# network filesystem): the checks above must then fail, which shows that they can.
source "$(dirname "$0")/common.sh"

# ---- What this needs, or skip -------------------------------------------------------------------
for tool in ip sshfs fusermount ssh ssh-keygen sqlite3; do
  command -v "$tool" >/dev/null || {
    echo "skipped: $tool is not installed (scripts/install-deps installs sshfs and openssh)"
    exit 77
  }
done
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
if [ "$(id -u)" -ne 0 ] || [ ! -x "$SSHD" ] || [ ! -c /dev/fuse ]; then
  echo "skipped: needs root, sshd and /dev/fuse"
  exit 77
fi

NS=ctsfs$$
HOST_IF=ctsfsh$$ # veth names stay under 16 characters for any pid
PEER_IF=ctsfsn$$
SERVER=10.77.219.2
MADE_RUN_SSHD=0
SSHD_PID=
MOUNTS=()
cleanup() {
  local status=$?
  set +e
  [ -n "${JOB_PID:-}" ] && kill "$JOB_PID" 2>/dev/null && wait "$JOB_PID" 2>/dev/null
  local mount
  for mount in "${MOUNTS[@]}"; do
    fusermount -u "$mount" 2>/dev/null || fusermount -uz "$mount" 2>/dev/null
  done
  if [ -n "$SSHD_PID" ]; then
    kill "$SSHD_PID" 2>/dev/null
    wait "$SSHD_PID" 2>/dev/null
  fi
  ip netns delete "$NS" 2>/dev/null
  ip link delete "$HOST_IF" 2>/dev/null
  [ "$MADE_RUN_SSHD" == 1 ] && rmdir /run/sshd 2>/dev/null
  # Only once nothing is mounted under it: removing through a mount would reach the server side.
  mountpoint -q "$WORK/writer" || mountpoint -q "$WORK/reader" || rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT

if ! ip netns add "$NS" 2>/dev/null; then
  echo "skipped: cannot create network namespaces here"
  exit 77
fi
ip link add "$HOST_IF" type veth peer name "$PEER_IF"
ip link set "$PEER_IF" netns "$NS"
ip addr add 10.77.219.1/30 dev "$HOST_IF"
ip link set "$HOST_IF" up
ip netns exec "$NS" ip addr add "$SERVER/30" dev "$PEER_IF"
ip netns exec "$NS" ip link set "$PEER_IF" up

# ---- The server: sshd with keys of this test only, SFTP inside sshd -----------------------------
mkdir -p ssh export writer reader local
ssh-keygen -q -t ed25519 -N '' -f ssh/host_key
ssh-keygen -q -t ed25519 -N '' -f ssh/client_key
cp ssh/client_key.pub ssh/authorized_keys
cat >ssh/sshd_config <<EOF
ListenAddress $SERVER
HostKey $WORK/ssh/host_key
PidFile $WORK/ssh/sshd.pid
AuthorizedKeysFile $WORK/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
EOF
# sshd refuses to start without its privilege separation directory.
if [ ! -d /run/sshd ]; then
  mkdir -p /run/sshd
  MADE_RUN_SSHD=1
fi
ip netns exec "$NS" "$SSHD" -D -e -f "$WORK/ssh/sshd_config" 2>ssh/sshd.log &
SSHD_PID=$!
SSH_OPTIONS="IdentityFile=$WORK/ssh/client_key,StrictHostKeyChecking=no"
SSH_OPTIONS+=",UserKnownHostsFile=/dev/null,BatchMode=yes,ConnectTimeout=5,LogLevel=ERROR"
deadline=$((SECONDS + 20))
until ssh -i ssh/client_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
  -o BatchMode=yes -o ConnectTimeout=2 -o LogLevel=ERROR root@$SERVER true 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "sshd in $NS did not answer: $(cat ssh/sshd.log)"
  kill -0 "$SSHD_PID" 2>/dev/null || fail "sshd in $NS exited: $(cat ssh/sshd.log)"
  sleep 0.2
done

# The writer's mount as a user would make it; the reader's without sshfs's own cache of names and
# attributes (20 s by default, docs/schema.md): through it a snapshot replaced since would show
# the old file's size for longer than readers wait. The kernel's FUSE attribute cache (1 s) stays
# on: readers must cope with it (before they did, 1 run in 3 here read a file as malformed).
sshfs -o "$SSH_OPTIONS" "root@$SERVER:$WORK/export" writer || fail "sshfs mount (writer)"
MOUNTS+=("$WORK/writer")
sshfs -o "$SSH_OPTIONS,dir_cache=no" "root@$SERVER:$WORK/export" reader ||
  fail "sshfs mount (reader)"
MOUNTS+=("$WORK/reader")
expect_equal 65735546 "$(stat -f -c %t writer)" "filesystem type of the mount (FUSE)"

# ---- The job, and reads while it runs -----------------------------------------------------------
STEPS=${COMMTAP_TEST_STEPS:-300}
INTERVAL_MS=100
STALE_MS=3000 # 30 intervals
LAYOUT=${COMMTAP_TEST_SHARED_FS:-auto}
COMMTAP_DIR=$WORK/writer/job COMMTAP_LOCAL_DIR=$WORK/local COMMTAP_SHARED_FS=$LAYOUT \
  COMMTAP_INTERVAL=$INTERVAL_MS COMMTAP_SAMPLE=1 COMMTAP_VERBOSE=1 \
  run_preloaded 2 "$PROGRAMS/toy_train" $STEPS 4096 -1 0 "${COMMTAP_TEST_STEP_US:-20000}" \
  >job.out 2>job.err &
JOB_PID=$!

declare -A seen_windows=([0]=0 [1]=0)
reads=0
grew=0
problems=0
problem() {
  echo "read $reads: $*" >&2
  problems=$((problems + 1))
}
# One read of the job directory through the reader's mount, as a cron analyzer makes it.
read_once() {
  local files=() f
  for f in reader/job/rank-*.db; do [ -e "$f" ] && files+=("$f"); done
  [ ${#files[@]} -eq 2 ] || return 1 # until both ranks have published
  reads=$((reads + 1))
  local began_ns
  began_ns=$(date +%s%N)
  local status=0
  "$CLI" analyze reader/job --json >analyze.json 2>analyze.err || status=$?
  [ "$status" -le 1 ] || problem "commtap analyze exited $status: $(cat analyze.err)"
  local counts
  if counts=$("$CLI" query reader/job --raw --sql "SELECT rank, count(*), max(wall_ns) FROM
    heartbeats GROUP BY rank ORDER BY rank" 2>query.err); then
    local rank count newest
    while IFS='|' read -r rank count newest; do
      [ -n "$rank" ] || continue # no heartbeat yet
      # A cron analyzer finds hangs by heartbeats that stop: what it reads must be recent (a
      # snapshot is published every interval while copies are cheap, as here).
      [ $(((began_ns - newest) / 1000000)) -le $((STALE_MS)) ] ||
        problem "rank $rank's newest heartbeat is $(((began_ns - newest) / 1000000)) ms old"
      [ "$count" -ge "${seen_windows[$rank]}" ] ||
        problem "rank $rank's windows went back from ${seen_windows[$rank]} to $count"
      [ "$count" -gt "${seen_windows[$rank]}" ] && grew=$((grew + 1))
      seen_windows[$rank]=$count
    done <<<"$counts"
  else
    problem "commtap query failed: $(cat query.err)"
  fi
  for f in "${files[@]}"; do
    local check
    check=$(sqlite3 "file:$f?mode=ro" 'PRAGMA integrity_check' 2>&1) || true
    [ "$check" == ok ] || problem "integrity_check of $f: $check"
  done
  if [ "$LAYOUT" != off ]; then
    for f in reader/job/*-wal reader/job/*-shm; do
      [ -e "$f" ] && problem "$f beside the published files"
    done
  fi
  return 0
}
# The first read as soon as both files are there (a young file is where a reader without the
# writer's memory goes wrong first), then one read every 0.1 s: pacing, not synchronization, the
# loop ends with the job.
while kill -0 "$JOB_PID" 2>/dev/null; do
  if read_once; then sleep 0.1; else sleep 0.01; fi
done
job_status=0
wait "$JOB_PID" || job_status=$?
JOB_PID=
[ "$job_status" -eq 0 ] || fail "the job failed ($job_status): $(cat job.err)"
echo "reads during the job: $reads, window counts grew $grew times, problems: $problems"
cat job.err

# ---- After the job ------------------------------------------------------------------------------
[ "$reads" -ge 5 ] || fail "only $reads reads while the job ran: it did not read while writing"
[ "$grew" -ge 4 ] || fail "window counts grew only $grew times: reads did not see windows come"
[ "$problems" -eq 0 ] || fail "$problems problems reading while the job wrote (above)"

for r in 0 1; do
  f=reader/job/rank-$r.db
  expect_equal ok "$(sqlite3 "file:$f?mode=ro" 'PRAGMA integrity_check')" "rank $r integrity"
done
# No window lost: every step's all-reduce is in some window's aggregates (a lost window loses its
# calls), and each rank ended by MPI_Finalize and counted every step's all-reduce. Not the wall
# time between heartbeats: on a loaded machine a writer that waits for the CPU or for sshfs writes
# late, which loses nothing (a 585 ms gap at 100 ms windows, beside a full suite).
expect_equal "0|$STEPS
1|$STEPS" "$(db_query reader/job "SELECT rank, sum(calls) FROM aggregates
  WHERE function = 'MPI_Allreduce' GROUP BY rank ORDER BY rank")" \
  "all-reduces in the windows' aggregates, per rank"
expect_equal "0|finalize|$STEPS
1|finalize|$STEPS" "$(db_query reader/job "SELECT r.rank, r.ended_by, c.calls FROM ranks r
  JOIN call_totals c ON c.rank = r.rank AND c.function = 'MPI_Allreduce' ORDER BY r.rank")" \
  "how each rank ended and its all-reduce count"
for r in 0 1; do
  final=$(db_query reader/job "SELECT count(*) FROM heartbeats WHERE rank = $r")
  [ "$final" -ge "${seen_windows[$r]}" ] ||
    fail "rank $r ends with $final windows, fewer than the ${seen_windows[$r]} read during the job"
done
if [ "$LAYOUT" != off ]; then
  for r in 0 1; do
    expect_equal snapshot \
      "$(db_query reader/job/rank-$r.db "SELECT value FROM meta WHERE key = 'layout'")" \
      "rank $r's layout"
  done
  [ -z "$(ls local)" ] || fail "working copies left in the local directory: $(ls local)"
  grep -q "fuse: snapshots of $WORK/local/" job.err || fail "no snapshot layout in: $(cat job.err)"
fi
[ -z "$(ls reader/job | grep -v '^rank-[01].db$')" ] ||
  fail "files left beside the rank files: $(ls reader/job)"
echo "publish cost per rank (ns), file size (bytes):"
for r in 0 1; do
  echo "  rank $r: $(db_query reader/job/rank-$r.db \
    "SELECT value FROM meta WHERE key = 'publish_ns'") $(stat -c %s reader/job/rank-$r.db)"
done
pass "a job on sshfs read while it wrote through another mount: $reads reads, all consistent"
