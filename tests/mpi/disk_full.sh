#!/usr/bin/env bash
# A full disk (here a file size limit, which makes the writer's writes fail with EFBIG): each rank
# says once that it stopped writing, the job finishes with the native result, and every file
# written so far is an intact SQLite database.
source "$(dirname "$0")/common.sh"

run_native 2 "$PROGRAMS/file_size_limit" 300 20000 >native.txt
COMMTAP_DIR=trace COMMTAP_SAMPLE=1 COMMTAP_INTERVAL=20 \
  run_preloaded 2 "$PROGRAMS/file_size_limit" 300 20000 >preloaded.txt 2>stderr.txt ||
  fail "the job failed under a file size limit: $(cat stderr.txt)"
expect_same_files native.txt preloaded.txt "native and preloaded results"
for r in 0 1; do
  said=$(grep -c "commtap: rank $r stopped writing .*rank-$r.db: .*the job goes on" \
    stderr.txt || true)
  expect_equal 1 "$said" "rank $r's messages about the full disk"
  expect_equal ok "$(sqlite3 trace/rank-$r.db 'PRAGMA integrity_check')" "rank $r integrity"
done
expect_equal 2 "$(grep -c commtap stderr.txt)" "commtap's lines on stderr"
expect_equal "0 1" "$(db_query trace "SELECT group_concat(rank, ' ') FROM ranks")" "rank rows kept"
pass "file size limit: one message per rank, native result, intact files"
