#!/usr/bin/env bash
# The commtap command: `run` preloads and passes settings and the exit status through, `query`
# reads jobs and refuses bad input with exit status 2 and the file's name, `settings` matches
# the documentation.
source "$(dirname "$0")/common.sh"

# run: flags become COMMTAP_* variables, the preload reaches the ranks, the status comes back.
"$CLI" run --dir traced --yield --job-id cli-test -- \
  timeout "$LIMIT" mpiexec -n 2 "$PROGRAMS/toy_train" 5 256 >run.out 2>run.err
grep -q "rank 1 checksum" run.out || fail "job output missing"
grep -q "^commtap: trace database: traced (2 rank files)$" run.err || fail "$(cat run.err)"
got=$(db_query traced "SELECT name, value FROM settings WHERE rank = 0 AND name IN
        ('COMMTAP_YIELD', 'COMMTAP_JOB_ID', 'COMMTAP_DIR') ORDER BY name" | tr '\n' ' ')
expect_equal "COMMTAP_DIR|traced COMMTAP_JOB_ID|cli-test COMMTAP_YIELD|1 " "$got" "settings"
expect_equal "cli-test" "$(db_query traced "SELECT value FROM meta WHERE key = 'job_id'")" "job id"
pass "run: settings and preload reach the job"

# Without --dir the job id names the directory.
"$CLI" run --job-id named -- timeout "$LIMIT" mpiexec -n 1 "$PROGRAMS/toy_train" 2 64 >/dev/null \
  2>named.err
[ -f commtap-named/rank-0.db ] || fail "no commtap-named/rank-0.db: $(cat named.err)"
pass "run: default directory commtap-<job id>"

# The command may also follow the settings without --.
"$CLI" run --job-id no-dashes timeout "$LIMIT" mpiexec -n 1 "$PROGRAMS/toy_train" 2 64 >/dev/null \
  2>&1
[ -f commtap-no-dashes/rank-0.db ] || fail "command without -- was not run preloaded"
pass "run: command without --"

set +e
"$CLI" run -- sh -c 'exit 3' 2>/dev/null
status=$?
"$CLI" run --yield >/dev/null 2>nocommand.err
nocommand_status=$?
"$CLI" run --verbose 9 -- true >/dev/null 2>range.err
range_status=$?
"$CLI" query traced --sql "DELETE FROM ranks" >/dev/null 2>write.err
write_status=$?
printf 'not a database, just text%.0s' {1..200} >corrupt.db
"$CLI" query corrupt.db >/dev/null 2>corrupt.err
corrupt_status=$?
"$CLI" query traced no-such-query >/dev/null 2>canned.err
canned_status=$?
set -e
expect_equal 3 "$status" "exit status passed through"
expect_equal 2 "$nocommand_status" "run without a command"
grep -q "no command given" nocommand.err || fail "$(cat nocommand.err)"
expect_equal 2 "$range_status" "out-of-range flag"
grep -q "verbose" range.err || fail "range error does not name the flag: $(cat range.err)"
expect_equal 2 "$write_status" "writing query"
grep -q "read-only" write.err || fail "$(cat write.err)"
expect_equal 2 "$corrupt_status" "corrupt database"
grep -q "corrupt.db" corrupt.err || fail "error does not name the file: $(cat corrupt.err)"
expect_equal 2 "$canned_status" "unknown canned query"
pass "exit statuses and messages for bad input"

# query: canned queries over all ranks.
"$CLI" query traced calls >calls.txt
grep -q "^MPI_Allreduce  *collective  *2  *10 " calls.txt || fail "calls query: $(cat calls.txt)"
"$CLI" query traced ranks --json | grep -q '"ended_by": "finalize"' || fail "ranks query"
pass "query: canned queries across ranks"

# query --list, and every canned query runs on a real job.
"$CLI" query --list >list.txt
for name in $(awk '{print $1}' list.txt); do
  "$CLI" query traced "$name" >/dev/null || fail "canned query $name failed"
done
[ "$(wc -l <list.txt)" -ge 7 ] || fail "too few canned queries: $(cat list.txt)"
pass "query --list and every canned query"

# merge: one job.db with every rank's rows, which query then prefers.
(umask 022 && "$CLI" merge traced 2>merge.err)
grep -q "merged 2 rank files into traced/job.db" merge.err || fail "$(cat merge.err)"
# As private as the rank files it merges, whatever the umask.
expect_equal "$(stat -c %a traced/rank-0.db)" "600" "mode of a rank file"
expect_equal "$(stat -c %a traced/job.db)" "600" "mode of the merged job.db"
for table in ranks call_totals collectives communicators heartbeats call_sites; do
  expect_equal "$(db_query traced/rank-0.db "SELECT count(*) FROM $table") + $(db_query traced/rank-1.db "SELECT count(*) FROM $table")" \
    "$(db_query traced/job.db "SELECT count(*) FROM $table WHERE rank = 0") + $(db_query traced/job.db "SELECT count(*) FROM $table WHERE rank = 1")" \
    "rows of $table in job.db"
done
"$CLI" query traced ranks --raw | grep -c . | grep -qx 2 || fail "query of the merged job"
pass "merge"

# settings: the documentation lists exactly what the library declares.
"$CLI" settings --markdown >settings.md
awk '/<!-- settings:begin -->/{on=1;next}/<!-- settings:end -->/{on=0}on' \
  "$SOURCE/docs/settings.md" >documented.md
expect_same_files settings.md documented.md "docs/settings.md and the library's settings"
pass "docs/settings.md is current"

# What a newcomer types: a misspelt command is named, with exit status 2.
"$CLI" analyse traced >/dev/null 2>misspelt.err && fail "commtap analyse succeeded"
[ $? -eq 2 ] || fail "commtap analyse: exit status not 2"
grep -q "did you mean analyze?" misspelt.err || fail "commtap analyse: no suggestion: $(cat misspelt.err)"
"$CLI" qeury traced 2>misspelt.err && fail "commtap qeury succeeded"
grep -q "did you mean query?" misspelt.err || fail "commtap qeury: no suggestion"
# A command that cannot start is said once, not followed by "no rank recorded anything".
status=0
"$CLI" run --dir none -- ./no-such-app 2>nosuch.err || status=$?
expect_equal 127 "$status" "exit status of a command that cannot start"
grep -q "cannot run ./no-such-app" nosuch.err || fail "no 'cannot run' line"
grep -q "no rank recorded" nosuch.err && fail "'no rank recorded' after 'cannot run'"
# Help fits a terminal: no line past 100 columns, two lines at most per option of run, the
# tests' own settings hidden, the command in the usage line, analyze's exit statuses.
COLUMNS=100 "$CLI" run --help >run-help.txt
COLUMNS=100 "$CLI" analyze --help >analyze-help.txt
COLUMNS=100 "$CLI" settings >settings.txt
for file in run-help.txt analyze-help.txt settings.txt; do
  awk 'length > 100 { exit 1 }' "$file" || fail "$file has lines past 100 columns"
done
awk '/^  -/ { if (lines > 1) exit 1; lines = 0; on = 1; next } /^$/ { on = 0 } on { lines++ }
     END { exit lines > 1 }' run-help.txt ||
  fail "an option of commtap run --help takes more than two lines"
grep -q -- "--test-" run-help.txt && fail "commtap run --help lists the tests' settings"
grep -q "^Usage: commtap run \[OPTIONS\] \[--\] <command>" run-help.txt || fail "run's usage line"
grep -q "0 healthy.*1 findings.*2 error" analyze-help.txt || fail "analyze --help: exit statuses"
pass "misspelt commands, a command that cannot start, help within 100 columns"

# A preload the dynamic loader refuses is said before the job starts, in the loader's words: a
# file that is not a library is skipped (the job runs, unrecorded); a library whose own
# dependency is missing would stop the program from starting, so it runs without the preload.
printf 'not a library\n' >not-a-library.so
status=0
"$CLI" run --library "$WORK/not-a-library.so" --dir refused -- /bin/echo ran >refused.out \
  2>refused.err || status=$?
expect_equal "0:ran" "$status:$(cat refused.out)" "the job with a refused preload"
grep -q "the dynamic loader will not preload $WORK/not-a-library.so into /bin/echo.*cannot be preloaded" \
  refused.err || { cat refused.err >&2; fail "commtap run did not say the preload was refused"; }
printf 'int missing_dependency(void);\nint f(void) { return missing_dependency(); }\n' >needs.c
printf 'int missing_dependency(void) { return 1; }\n' >dependency.c
cc -shared -fPIC dependency.c -o libcommtap-test-dependency.so &&
  cc -shared -fPIC needs.c -o needs-missing.so -L. -lcommtap-test-dependency &&
  rm libcommtap-test-dependency.so || fail "building a library with a missing dependency"
status=0
"$CLI" run --library "$WORK/needs-missing.so" --dir fatal -- /bin/echo ran >fatal.out \
  2>fatal.err || status=$?
expect_equal "0:ran" "$status:$(cat fatal.out)" "the job whose preload would stop it"
grep -q "/bin/echo cannot start with $WORK/needs-missing.so preloaded.*running it without commtap" \
  fatal.err || { cat fatal.err >&2; fail "commtap run did not say it dropped the preload"; }
pass "a preload the loader refuses is said, and one that would stop the job is dropped"
