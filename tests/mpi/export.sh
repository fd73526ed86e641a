#!/usr/bin/env bash
# commtap export --format perfetto on a real job: a 4-rank training loop (all-reduce and a
# nonblocking halo exchange per step) whose ranks' clocks are shifted by rank x 7 ms, as if
# each were a host whose clock disagrees. The timeline (checked by perfetto_check, which parses
# it with nlohmann-json) has the host's process and a track per rank, the collectives and
# messages as slices that never overlap on a track, every message a flow from its send to its
# receive, and, on rank 0's clock, nobody leaves an all-reduce or barrier before the last rank
# entered it (without the offsets rank 3 would be 21 ms off). The size bound and the cut hold.
source "$(dirname "$0")/common.sh"
CHECK=$PROGRAMS/perfetto_check

COMMTAP_DIR=job COMMTAP_SAMPLE=1 COMMTAP_YIELD=1 COMMTAP_TEST_CLOCK_SKEW=7000000 \
  run_preloaded 4 "$PROGRAMS/toy_train" 200 1024 >/dev/null

"$CLI" export --format perfetto job -o job.json 2>export.err ||
  fail "export failed: $(cat export.err)"
grep -q "wrote job.json: [0-9,]* slices, [0-9,]* messages" export.err ||
  fail "no summary line: $(cat export.err)"
# The clocks are aligned within their estimates' error bounds (a loaded machine's exchanges are
# slower, and so are the bounds): a rank may seem to leave a collective before the last one
# entered it by two ranks' errors at most: allowed that, at least 1 ms and at most 5 ms, well
# under the 7 ms of skew the unaligned export below must show.
worst_error_us=$(db_query job "SELECT coalesce(max(clock_error_ns), 0) / 1000 FROM ranks")
tolerance_us=$((2 * worst_error_us + 100))
tolerance_us=$((tolerance_us < 1000 ? 1000 : tolerance_us > 5000 ? 5000 : tolerance_us))
PERFETTO_ALIGNMENT_US=$tolerance_us "$CHECK" job.json 1 4 >check.txt 2>&1 ||
  fail "the timeline: $(cat check.txt)"
read -r _ slices _ flows _ instants _ aligned _ worst _ keep _ first _ last <check.txt
# 200 all-reduces, 20 barriers; 200 steps x 4 halo messages.
[ "$aligned" -ge 220 ] || fail "only $aligned all-reduces and barriers on every rank: $(cat check.txt)"
[ "$flows" -ge 800 ] || fail "only $flows message flows: $(cat check.txt)"
[ "$keep" == 1 ] || fail "a small job was sampled: $(cat check.txt)"
pass "one process, 4 rank tracks, $slices slices, $flows flows; clocks aligned (worst ${worst} us)"

# The same clocks without the offsets: the check must see it (the test can fail).
cp -r job raw
for f in raw/rank-*.db; do
  sqlite3 "$f" "UPDATE ranks SET clock_offset_ns = 0; UPDATE clock_offsets SET offset_ns = 0"
done
"$CLI" export raw -o raw.json 2>/dev/null || fail "export of the unaligned copy failed"
if "$CHECK" raw.json 1 4 >raw.txt 2>&1; then fail "unaligned clocks passed: $(cat raw.txt)"; fi
grep -q "clocks not aligned" raw.txt || fail "unaligned clocks: $(cat raw.txt)"
pass "without the offsets the check fails"

"$CLI" export job -o small.json --max-events 300 2>small.err || fail "export failed"
"$CHECK" small.json 1 4 0 1e300 300 >small.txt 2>&1 || fail "bounded: $(cat small.txt)"
read -r _ _ _ small_flows _ _ _ _ _ _ _ small_keep _ <small.txt
[ "$small_keep" -gt 1 ] || fail "not sampled under --max-events 300: $(cat small.txt)"
[ "$(stat -c %s small.json)" -lt "$(stat -c %s job.json)" ] || fail "not smaller"
pass "--max-events 300: one in $small_keep kept, $small_flows whole flows"

# The middle third of the slices' span, in seconds on the timeline.
since=$(awk -v a="$first" -v b="$last" 'BEGIN { print (a + (b - a) / 3) / 1e6 }')
until=$(awk -v a="$first" -v b="$last" 'BEGIN { print (a + 2 * (b - a) / 3) / 1e6 }')
"$CLI" export job -o cut.json --since "$since" --until "$until" 2>/dev/null || fail "cut failed"
"$CHECK" cut.json 1 4 "$(awk -v s="$since" 'BEGIN { print s * 1e6 }')" \
  "$(awk -v u="$until" 'BEGIN { print u * 1e6 }')" >cut.txt 2>&1 || fail "cut: $(cat cut.txt)"
read -r _ cut_slices _ <cut.txt
[ "$cut_slices" -lt "$slices" ] && [ "$cut_slices" -gt 0 ] ||
  fail "the cut [$since, $until] s kept $cut_slices of $slices slices: $(cat cut.txt)"
pass "--since $since --until $until keeps $cut_slices slices, all inside"

status=0
"$CLI" export no-such-dir -o x.json 2>err.txt || status=$?
expect_equal 2 "$status" "exit status on a missing job"
[ ! -e x.json ] || fail "a file was written for a missing job"
"$CLI" export job --format otf2 -o y.json >/dev/null 2>&1 && fail "an unknown format was accepted"
pass "bad input: exit 2, no file"

# transfers_joined says how far its latencies can be off: the two ranks' clock errors added.
rows=$(db_query job "SELECT count(*), sum(clock_error_ns > 0) FROM transfers_joined")
[ "${rows%|*}" -ge 800 ] && [ "${rows#*|}" -gt 0 ] || fail "transfers_joined clock errors: $rows"
expect_equal 0 "$(db_query job "SELECT count(*) FROM transfers_joined
  WHERE latency_ns < -clock_error_ns - 10000")" "latencies below minus their clock error"
pass "transfers_joined.clock_error_ns bounds its negative latencies"
