#!/usr/bin/env bash
# Bad settings: one clear line each, from one rank, naming the variable, the value and what is
# accepted; the default is used and the job's output is unchanged. An unwritable trace directory
# turns recording off everywhere with one line, and the job still succeeds.
source "$(dirname "$0")/common.sh"

run_native 2 "$PROGRAMS/toy_train" 10 512 >native.out

COMMTAP_YIELD=maybe COMMTAP_VERBOSE=7 COMMTAP_DIR=trace \
  run_preloaded 2 "$PROGRAMS/toy_train" 10 512 >bad.out 2>bad.err || fail "job failed"
expect_same_files native.out bad.out "output with bad settings"
cat >expected.err <<'END'
commtap: ignoring COMMTAP_YIELD='maybe': expected 0, 1 or auto; using auto.
commtap: ignoring COMMTAP_VERBOSE='7': expected an integer from 0 to 2; using 0.
END
expect_same_files expected.err bad.err "messages for bad settings"
# auto's choice (tests/mpi/yield_auto.sh): yield where 2 ranks have 1 CPU between them.
got=$(db_query trace "SELECT value FROM settings WHERE rank = 1 AND name = 'COMMTAP_YIELD'")
expect_equal "$([ "$(nproc)" -ge 2 ] && echo 0 || echo 1)" "$got" "COMMTAP_YIELD in force"
pass "bad values: one line each from rank 0, defaults used"

COMMTAP_DIR=/proc/commtap-cannot-write run_preloaded 2 "$PROGRAMS/toy_train" 10 512 \
  >unwritable.out 2>unwritable.err || fail "job failed with an unwritable directory"
expect_same_files native.out unwritable.out "output with an unwritable directory"
[ "$(wc -l <unwritable.err)" -eq 1 ] || fail "expected one line, got: $(cat unwritable.err)"
grep -q "^commtap: rank 0 cannot write the trace directory (cannot create /proc/commtap-cannot-write" \
  unwritable.err || fail "unclear message: $(cat unwritable.err)"
grep -q "recording is off on all ranks, the job goes on" unwritable.err || fail "no fallback said"
pass "unwritable directory: one line, job unchanged"

# A trace directory that is a file.
touch not-a-directory
COMMTAP_DIR=not-a-directory run_preloaded 2 "$PROGRAMS/toy_train" 10 512 >file.out 2>file.err ||
  fail "job failed when the directory is a file"
expect_same_files native.out file.out "output when the directory is a file"
[ "$(wc -l <file.err)" -eq 1 ] || fail "expected one line, got: $(cat file.err)"
pass "directory that is a file: one line, job unchanged"

# The shared-filesystem layout forced on a local directory (docs/schema.md): snapshots published,
# working copies removed. With an unwritable local directory: one line, the trace written in
# place. An unknown COMMTAP_SHARED_FS: one line, auto (local here: in place).
mkdir -p local
COMMTAP_SHARED_FS=on COMMTAP_LOCAL_DIR=local COMMTAP_DIR=forced \
  run_preloaded 2 "$PROGRAMS/toy_train" 10 512 >forced.out 2>forced.err || fail "job failed"
expect_same_files native.out forced.out "output with the snapshot layout"
[ ! -s forced.err ] || fail "messages with the snapshot layout: $(cat forced.err)"
expect_equal snapshot \
  "$(db_query forced/rank-1.db "SELECT value FROM meta WHERE key = 'layout'")" \
  "layout of rank 1's file"
expect_equal "finalize finalize" \
  "$(db_query forced "SELECT group_concat(ended_by, ' ') FROM ranks")" "how the ranks ended"
[ -z "$(ls local)" ] || fail "working copies left: $(ls local)"
pass "snapshot layout forced on: published files, no working copies left"

COMMTAP_SHARED_FS=on COMMTAP_LOCAL_DIR=/proc/commtap-no-local COMMTAP_DIR=nolocal \
  run_preloaded 2 "$PROGRAMS/toy_train" 10 512 >nolocal.out 2>nolocal.err || fail "job failed"
expect_same_files native.out nolocal.out "output without a local directory"
[ "$(wc -l <nolocal.err)" -eq 1 ] || fail "expected one line, got: $(cat nolocal.err)"
expected="^commtap: rank 0 cannot keep a local working copy of its trace (cannot create "
expected+="/proc/commtap-no-local.*write nolocal in place"
grep -q "$expected" nolocal.err || fail "unclear message: $(cat nolocal.err)"
expect_equal "2" "$(db_query nolocal "SELECT count(*) FROM ranks WHERE ended_by = 'finalize'")" \
  "ranks recorded in place"
pass "unwritable local directory: one line, the trace written in place"

COMMTAP_SHARED_FS=nfs COMMTAP_DIR=badlayout \
  run_preloaded 2 "$PROGRAMS/toy_train" 10 512 >badlayout.out 2>badlayout.err || fail "job failed"
expect_same_files native.out badlayout.out "output with a bad COMMTAP_SHARED_FS"
expect_equal "commtap: COMMTAP_SHARED_FS=nfs is not one of auto, on, off; using auto" \
  "$(cat badlayout.err)" "message for a bad COMMTAP_SHARED_FS"
pass "unknown COMMTAP_SHARED_FS: one line, auto"
