#!/usr/bin/env bash
# Per-peer transfers, per-window aggregates, communicator progress and clock re-estimation,
# checked against what the program itself knows it did: the transfers program writes every
# message it sent and received (peer, tag, number of the pair's message, bytes).
source "$(dirname "$0")/common.sh"

ROUNDS=6
mkdir truth3 truth-sampled truth-native
COMMTAP_DIR=trace3 COMMTAP_SAMPLE=1 COMMTAP_CLOCK_SYNC=2 \
  run_preloaded 3 "$PROGRAMS/transfers" truth3 $ROUNDS >preloaded.txt
run_native 3 "$PROGRAMS/transfers" truth-native $ROUNDS >native.txt
expect_same_files native.txt preloaded.txt "native and preloaded results"

# 1. Every numbered message, on both sides, with the program's own numbering and sizes.
for r in 0 1 2; do
  sort truth3/truth-rank-$r.txt >expected
  db_query trace3 "SELECT direction, peer, tag, msg, bytes FROM transfers WHERE rank = $r" |
    tr '|' ' ' | sort >recorded
  expect_same_files expected recorded "rank $r: transfers and the program's truth"
done
pass "every message recorded on both sides with the program's numbering (3 ranks, sample 1)"

# 2. The two sides join: each message received by its number was sent with the same bytes.
messages=$(cat truth3/truth-rank-*.txt | grep -c '^send')
joined=$(db_query trace3 "SELECT count(*) FROM transfers_joined")
expect_equal "$messages" "$joined" "messages joined sender to receiver"
mismatched=$(db_query trace3 "SELECT count(*) FROM transfers s JOIN transfers r
  ON s.direction = 'send' AND r.direction = 'recv' AND r.rank = s.peer AND r.peer = s.rank
  AND r.comm_id = s.comm_id AND r.tag = s.tag AND r.msg = s.msg WHERE s.bytes != r.bytes")
expect_equal 0 "$mismatched" "joined messages whose sizes differ"
pass "$joined messages joined sender to receiver, sizes equal"

# 2b. MPI_Waitall's receives are stamped when each is seen done (interpose/hooks_requests.hpp),
# not all at the call's end: of step 4's two receives from one sender in one MPI_Waitall, the
# first (delivered first: MPI's order) completes no later than the second, and before it where
# they arrived apart. Without the stamps both read the Waitall's end; two that one progress step
# completed together share a stamp, which machine load makes more likely (so: no pair reversed,
# and at least one apart).
read -r pairs reversed apart < <(db_query trace3 "SELECT count(*), sum(a.end_ns > b.end_ns),
  sum(a.end_ns < b.end_ns)
  FROM transfers a JOIN transfers b ON a.rank = b.rank AND a.comm_id = b.comm_id
  AND a.peer = b.peer AND a.tag = b.tag AND b.msg = a.msg + 1
  WHERE a.direction = 'recv' AND b.direction = 'recv' AND a.tag = 5 AND a.msg % 2 = 1" | tr '|' ' ')
[ "${pairs:-0}" -gt 0 ] || fail "no pair of receives completed by one MPI_Waitall"
expect_equal 0 "$reversed" "MPI_Waitall receive pairs whose second completes before the first"
[ "${apart:-0}" -gt 0 ] || fail "MPI_Waitall receive pairs stamped apart: none of $pairs"
pass "$pairs MPI_Waitall receive pairs in MPI's order, $apart of them stamped apart"

# 2c. A receive is stamped when seen done while the rank waits for another (RequestTable::watch):
# step 4b waits for its second receive before its first, so without the stamps the first would
# complete after the second.
read -r pairs ordered < <(db_query trace3 "SELECT count(*), sum(a.end_ns <= b.end_ns)
  FROM transfers a JOIN transfers b ON a.rank = b.rank AND a.comm_id = b.comm_id
  AND a.peer = b.peer AND a.tag = b.tag AND b.msg = a.msg + 1
  WHERE a.direction = 'recv' AND b.direction = 'recv' AND a.tag = 8 AND a.msg % 2 = 1" | tr '|' ' ')
[ "${pairs:-0}" -gt 0 ] || fail "no pair of receives waited for in reverse order"
expect_equal "$pairs" "$ordered" "receives waited for in reverse whose first completes no later"
pass "$pairs receive pairs waited for in reverse, stamped in arrival order"

# 2d. What a receive's seen_pending_ns says (monitor/schema.sql): its message arrived in
# (seen_pending_ns, end_ns]. Every recorded one lies within the receive's life. Step 4c's receive
# arrived during the barrier before its MPI_Wait, which found it done at its first look: its
# window spans that barrier, so it reads as censored, not as a transit as long as the barrier.
outside=$(db_query trace3 "SELECT count(*) FROM transfers WHERE seen_pending_ns IS NOT NULL
  AND (direction = 'send' OR seen_pending_ns < start_ns OR seen_pending_ns > end_ns)")
expect_equal 0 "$outside" "seen_pending_ns outside its receive's post and completion"
read -r censored spanning < <(db_query trace3 "SELECT count(*), sum(EXISTS (SELECT 1 FROM
  collectives c WHERE c.rank = t.rank AND c.function = 'MPI_Barrier'
  AND c.enter_ns >= t.seen_pending_ns AND c.exit_ns <= t.end_ns))
  FROM transfers t WHERE t.direction = 'recv' AND t.tag = 9" | tr '|' ' ')
[ "${censored:-0}" -gt 0 ] || fail "no receive of step 4c recorded"
expect_equal "$censored" "$spanning" "step 4c receives whose pending-to-done window spans the barrier"
pass "$censored receives found done at the first look after a barrier: window spans it"

# 2e. A blocking receive that commtap polls for (COMMTAP_YIELD=1: MPI_Iprobe, then MPI_Recv)
# and finds a gap after its last miss (the rank was off the CPU between its looks) keeps that
# miss as its seen_pending_ns: its message came somewhere in between. tests/tools/iprobe_gap,
# preloaded after commtap, puts a 500 us gap before every look that can find a message, so every
# recorded MPI_Recv has one, whatever the machine's load; the program's results are unchanged.
mkdir truth-gap
COMMTAP_DIR=trace-gap COMMTAP_SAMPLE=1 COMMTAP_YIELD=1 IPROBE_GAP_US=500 \
  timeout "$LIMIT" mpiexec -n 3 -genv LD_PRELOAD "$LIB:$PROGRAMS/libiprobe_gap.so" \
  "$PROGRAMS/transfers" truth-gap $ROUNDS >gap.txt
expect_same_files native.txt gap.txt "native results and preloaded with gaps between looks"
read -r blocking windowed < <(db_query trace-gap "SELECT count(*), sum(seen_pending_ns IS NOT NULL
  AND seen_pending_ns >= start_ns AND end_ns - seen_pending_ns >= 500000) FROM transfers
  WHERE direction = 'recv' AND function = 'MPI_Recv'" | tr '|' ' ')
[ "${blocking:-0}" -gt 0 ] || fail "no blocking receive recorded with gaps between looks"
expect_equal "$blocking" "$windowed" "blocking receives found a gap after their last miss, windowed"
pass "$blocking blocking receives found 500 us after their last miss: arrival window from the miss"

# 3. Sampling picks the same messages on both sides (by a hash of the message's name, so about
# one in four here).
COMMTAP_DIR=trace-sampled COMMTAP_SAMPLE=4 \
  run_preloaded 3 "$PROGRAMS/transfers" truth-sampled $ROUNDS >/dev/null
db_query trace-sampled "SELECT direction, rank, peer, tag, msg FROM transfers" |
  awk -F'|' '{ print ($1 == "send" ? $2 "|" $3 : $3 "|" $2) "|" $4 "|" $5 }' |
  sort | uniq -c | awk '{print $1}' | sort -u >counts
expect_equal 2 "$(cat counts)" "sides recording each sampled message (send and recv)"
sampled=$(db_query trace-sampled "SELECT count(*) FROM transfers_joined")
[ "$sampled" -gt 0 ] && [ "$sampled" -lt "$messages" ] ||
  fail "sample 4 recorded $sampled of $messages messages"
pass "sample 4: $sampled of $messages messages, each recorded by both sides"

# 4. Aggregates count every call: blocking ones per call, nonblocking ones per completion.
for function in MPI_Send MPI_Recv MPI_Sendrecv MPI_Sendrecv_replace MPI_Allreduce; do
  got=$(db_query trace3 "SELECT (SELECT sum(calls) FROM aggregates WHERE function = '$function')
                               || ' ' || (SELECT sum(calls) FROM call_totals
                                          WHERE function = '$function')")
  read -r aggregated counted <<<"$got"
  expect_equal "$counted" "$aggregated" "$function in aggregates and call_totals"
done
for function in MPI_Isend MPI_Irecv; do
  got=$(db_query trace3 "SELECT (SELECT sum(calls) FROM aggregates WHERE function = '$function')
                               || ' ' || (SELECT sum(completions) FROM call_totals
                                          WHERE function = '$function')")
  read -r aggregated completed <<<"$got"
  expect_equal "$completed" "$aggregated" "$function in aggregates and completions"
done
bad=$(db_query trace3 "SELECT count(*) FROM aggregates WHERE min_ns > max_ns OR calls < 1
                       OR total_ns < min_ns OR site = 0")
expect_equal 0 "$bad" "aggregate rows with impossible extremes or no call site"
pass "aggregates: every call counted once, with call sites"

# 5. Progress on MPI_COMM_WORLD: the last row of each rank says all collectives entered and
# completed (ROUNDS allreduces + the final reduce).
progress=$(db_query trace3 "SELECT group_concat(entered || '/' || completed, ' ') FROM
  (SELECT rank, entered, completed FROM comm_progress WHERE comm_id = 1
   AND wall_ns = (SELECT max(wall_ns) FROM comm_progress p WHERE p.rank = comm_progress.rank
                  AND p.comm_id = 1) ORDER BY rank)")
expect_equal "7/7 7/7 7/7" "$progress" "entered/completed on MPI_COMM_WORLD"
pass "comm_progress: every rank entered and completed 7 collectives on MPI_COMM_WORLD"

# 6. Clock offsets: at MPI_Init, after world collectives 2, 4, 6 (COMMTAP_CLOCK_SYNC=2), and at
# MPI_Finalize: five estimates per rank.
estimates=$(db_query trace3 "SELECT group_concat(n, ' ') FROM
  (SELECT count(*) AS n FROM clock_offsets GROUP BY rank ORDER BY rank)")
expect_equal "5 5 5" "$estimates" "clock estimates per rank"
pass "clock offsets re-estimated periodically and at MPI_Finalize"

# Sends that share one request handle (MPICH completes small sends at once and hands back one
# handle for all of them): every completion counted, every send recorded and joined.
COMMTAP_DIR=trace-shared COMMTAP_SAMPLE=1 run_preloaded 2 "$PROGRAMS/shared_handles" 10 >shared.txt
grep -q "^sends 80," shared.txt || fail "shared_handles: $(cat shared.txt)"
expect_equal "80|80" "$(db_query trace-shared/rank-0.db \
  "SELECT calls, completions FROM call_totals WHERE function = 'MPI_Isend'")" \
  "MPI_Isend calls and completions"
expect_equal 80 "$(db_query trace-shared "SELECT count(*) FROM transfers WHERE direction = 'send'")" \
  "send rows"
expect_equal 80 "$(db_query trace-shared "SELECT count(*) FROM transfers_joined")" \
  "joined messages"
pass "80 sends sharing one handle: 80 completions, 80 send rows, 80 joined"
