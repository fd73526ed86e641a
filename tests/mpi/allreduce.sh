#!/usr/bin/env bash
# commtap's all-reduce algorithms, each forced in turn, against the library's in the same run
# (tests/programs/allreduce_sweep.cpp: random seeded cases of op x type x count x MPI_IN_PLACE x
# communicator; integers exact, floating point within the reduction-order bound and identical
# on every rank; invalid calls fail with the library's error class), on three node shapes: 4
# ranks on 2 pretend nodes dealt round-robin (a non-block placement), 3 ranks on 2 nodes of
# unequal size, and 4 ranks on one node.
source "$(dirname "$0")/common.sh"

run_sweep() {  # algorithm ranks nodes seed
  COMMTAP_DIR=trace COMMTAP_SAMPLE=1 COMMTAP_ALLREDUCE=$1 COMMTAP_TEST_NODES=$3 COMMTAP_YIELD=1 \
    run_preloaded "$2" "$PROGRAMS/allreduce_sweep" 60 "$4"
}

forms=$(allreduce_forms)  # the library's own list (common.sh)
for algorithm in $forms; do
  for shape in "4 2" "3 2" "4 0"; do
    read -r ranks nodes <<<"$shape"
    out=$(run_sweep $algorithm "$ranks" "$nodes" $((ranks * 10 + nodes))) ||
      fail "$algorithm on $ranks ranks, $nodes nodes: $out"
    expect_equal "cases 60 mismatches 0" "$out" "$algorithm on $ranks ranks, $nodes nodes"
  done
  # The trace names the algorithm of every recorded all-reduce (the last shape's run): the
  # forced one for non-empty calls it took, the library's for empty ones; nothing else.
  if [ $algorithm != auto ]; then
    expect_equal "0|0" "$(db_query trace "SELECT
        SUM(algorithm NOT IN ('native', '$algorithm')),
        SUM(bytes = 0 AND algorithm != 'native')
        FROM collectives WHERE function = 'MPI_Allreduce'")" "$algorithm: recorded algorithms"
    [ "$(db_query trace "SELECT COUNT(*) FROM collectives WHERE algorithm = '$algorithm'")" -gt 0 ] ||
      fail "$algorithm: no all-reduce recorded as run by it"
  fi
  pass "$algorithm: 3 x 60 random cases equal the library's (4 ranks/2 nodes, 3/2, 4/1)"
done

# knomial with the radix forced, on more ranks: several rounds (7 ranks in radix 2, 9 in radix 3),
# ranks past the largest power of k folded in and sent the result (7, 5 and 6 ranks); and
# hier-knomial's leaders (4 nodes of 2 ranks in radix 3: one leader past the power of k).
for shape in "knomial 2 7 0" "knomial 3 9 3" "knomial 3 5 2" "knomial 4 6 2" "hier-knomial 3 8 4"; do
  read -r algorithm radix ranks nodes <<<"$shape"
  # A trace folder of its own: later checks read `trace`, which holds 4 ranks' files.
  out=$(COMMTAP_DIR=trace-knomial COMMTAP_SAMPLE=1 COMMTAP_ALLREDUCE=$algorithm \
    COMMTAP_KNOMIAL_RADIX=$radix COMMTAP_TEST_NODES=$nodes COMMTAP_YIELD=1 \
    run_preloaded "$ranks" "$PROGRAMS/allreduce_sweep" 60 $((radix * 100 + ranks))) ||
    fail "$algorithm radix $radix on $ranks ranks: $out"
  expect_equal "cases 60 mismatches 0" "$out" "$algorithm radix $radix on $ranks ranks, $nodes nodes"
done
pass "knomial in radix 2, 3 and 4 on 5-9 ranks and hier-knomial in radix 3 on 4 nodes equal the library's"

# The sweep can fail: one rank folding the exchanged buffers in the other order gets floating-point
# sums that differ from the other ranks' in the last bits, which the sweep must report.
for shape in "direct 0 4" "knomial 3 3"; do
  read -r algorithm radix ranks <<<"$shape"
  out=$(COMMTAP_DIR=trace-reversed COMMTAP_ALLREDUCE=$algorithm COMMTAP_KNOMIAL_RADIX=$radix \
    COMMTAP_TEST_REVERSED_FOLD=1 COMMTAP_YIELD=1 \
    run_preloaded "$ranks" "$PROGRAMS/allreduce_sweep" 60 7 2>&1) &&
    fail "$algorithm: rank 1 folding in the other order went unnoticed: $out"
  [[ "$out" =~ mismatches\ ([1-9][0-9]*) ]] ||
    fail "$algorithm: rank 1 folding in the other order: no mismatch counted: $out"
done
pass "a rank that folds in the other order fails the sweep (direct, knomial radix 3)"

# The messages of commtap's own algorithms are in the transfers table (tag -1) for the recorded
# instances (every 4th here): both sides of each, numbered alike, so that every send joins its
# receive with the same size, and every one has ended.
for algorithm in $forms; do
  [ "$algorithm" != auto ] || continue
  out=$(COMMTAP_DIR=trace COMMTAP_SAMPLE=4 COMMTAP_ALLREDUCE=$algorithm COMMTAP_TEST_NODES=2 \
    run_preloaded 4 "$PROGRAMS/allreduce_sweep" 40 5) || fail "$algorithm steps: $out"
  expect_equal "cases 40 mismatches 0" "$out" "$algorithm steps run"
  read -r sends receives joined bad <<<"$(db_query trace "SELECT
      (SELECT COUNT(*) FROM transfers WHERE tag = -1 AND direction = 'send'),
      (SELECT COUNT(*) FROM transfers WHERE tag = -1 AND direction = 'recv'),
      (SELECT COUNT(*) FROM transfers s JOIN transfers r ON r.direction = 'recv'
         AND r.rank = s.peer AND r.peer = s.rank AND r.comm_id = s.comm_id AND r.tag = s.tag
         AND r.msg = s.msg AND r.bytes = s.bytes WHERE s.direction = 'send' AND s.tag = -1),
      (SELECT COUNT(*) FROM transfers WHERE tag = -1 AND (end_ns < start_ns OR end_ns = 0
         OR function != 'MPI_Allreduce'))" | tr '|' ' ')"
  # hier-pipe sends nothing itself, but falls back to hier on communicators with one rank per
  # node (some of the sweep's).
  [ "$sends" -gt 0 ] || fail "$algorithm: no messages of its own recorded"
  expect_equal "$sends $sends $sends 0" "$sends $receives $joined $bad" \
    "$algorithm: sends, receives, joined pairs of equal size, bad rows"
done
pass "the messages of commtap's algorithms are recorded on both sides and join"

COMMTAP_DIR=trace COMMTAP_ALLREDUCE=fastest run_preloaded 2 "$PROGRAMS/allreduce_sweep" 20 \
  >out.txt 2>err.txt || fail "a bad COMMTAP_ALLREDUCE broke the job: $(cat err.txt)"
expect_equal "cases 20 mismatches 0" "$(cat out.txt)" "results with a bad setting"
expect_equal 1 "$(grep -c 'COMMTAP_ALLREDUCE=fastest is not one of' err.txt)" "messages"
pass "an unknown COMMTAP_ALLREDUCE: one message, the library's all-reduce"

# The cost model: measured at MPI_Init, written by `commtap calibrate`, read from a file; a bad
# file is one message and the built-in model. Results stay the library's in every case.
out=$(COMMTAP_DIR=trace COMMTAP_ALLREDUCE=auto COMMTAP_CALIBRATE=1 COMMTAP_TEST_NODES=2   run_preloaded 4 "$PROGRAMS/allreduce_sweep" 20 7 2>err.txt)
expect_equal "cases 20 mismatches 0" "$out" "auto with a model measured at MPI_Init"
expect_equal "" "$(cat err.txt)" "messages when calibrating at MPI_Init"
timeout "$LIMIT" "$CLI" calibrate -o model.json --choices-up-to 4096 --rounds 2 -- mpiexec -n 2 \
  >calibrate.out 2>&1 || fail "commtap calibrate: $(cat calibrate.out)"
grep -q '"format": "commtap-cost-model"' model.json || fail "no model file: $(cat calibrate.out)"
# Measured choices for this shape (2 ranks, 1 node) at 8, 32, 128, 512 and 2048 bytes.
expect_equal "5 1 1" "$(grep -c '"up_to_bytes"' model.json) $(grep -c '"up_to_bytes": 2048' \
  model.json) $(grep -c '"largest_node": 2' model.json)" "measured choices in the model file"
out=$(COMMTAP_DIR=trace COMMTAP_ALLREDUCE=auto COMMTAP_MODEL=$PWD/model.json   run_preloaded 2 "$PROGRAMS/allreduce_sweep" 20 8 2>err.txt)
expect_equal "cases 20 mismatches 0" "$out" "auto with the calibrated model file"
expect_equal "" "$(cat err.txt)" "messages with a good model file"
echo '{"format": "commtap-cost-model", "version": 1}' >bad.json
# (Two pretend nodes: on one node auto is the library's and reads no model.)
out=$(COMMTAP_DIR=trace COMMTAP_ALLREDUCE=auto COMMTAP_TEST_NODES=2 COMMTAP_MODEL=$PWD/bad.json \
  run_preloaded 2 "$PROGRAMS/allreduce_sweep" 20 9 2>err.txt)
expect_equal "cases 20 mismatches 0" "$out" "auto with a bad model file"
expect_equal 1 "$(grep -c 'bad.json: missing or wrong field' err.txt)" "messages for a bad file"
pass "cost model: measured at init, calibrated to a file, read back; a bad file is one message"

# COMMTAP_AVOID_HOSTS: a store that names this host (the only one) leaves rank 0 as the root and
# the job unchanged; an unreadable store is one message.
out=$(COMMTAP_DIR=trace COMMTAP_ALLREDUCE=star COMMTAP_AVOID_HOSTS=@$PWD/none.db   run_preloaded 2 "$PROGRAMS/allreduce_sweep" 10 3 2>err.txt)
expect_equal "cases 10 mismatches 0" "$out" "star with an unreadable findings store"
expect_equal 1 "$(grep -c 'COMMTAP_AVOID_HOSTS: cannot read findings' err.txt)" "messages"
out=$(COMMTAP_DIR=trace COMMTAP_ALLREDUCE=star COMMTAP_AVOID_HOSTS="$(hostname)"   run_preloaded 2 "$PROGRAMS/allreduce_sweep" 10 3 2>err.txt)
expect_equal "cases 10 mismatches 0" "$out" "star with every host avoided"
pass "COMMTAP_AVOID_HOSTS: a bad store is one message; results unchanged"

# Routing around a flagged link: 4 ranks on 4 pretend nodes (rank r on test-node-r), the link
# test-node-0 -> test-node-1 flagged, by name and then by a findings store's slow_link finding.
# The ring is ordered around it and a star's root is off both its ends, so none of their
# messages cross it; auto charges the forms that may cross it (the library's too) and takes one
# that does not. Results stay the library's: toy_train's integer checksums, and the sweep's
# random cases on every communicator with a round-robin placement.
toy=("$PROGRAMS/toy_train" 20 1000 -1 0 0 0)
native=$(timeout "$LIMIT" mpiexec -n 4 "${toy[@]}") || fail "native toy_train"
# The store's avoid list (avoid_list/avoid_list.hpp) as the analyzer writes it for a slow_link
# finding of the probes, one way, 3 ms against a 1 ms baseline: 2 ms more per message.
sqlite3 store.db "CREATE TABLE avoid_list (format_version INTEGER NOT NULL, job_id TEXT NOT NULL,
  finding_kind TEXT NOT NULL, subject TEXT NOT NULL, from_host TEXT NOT NULL, to_host TEXT,
  extra_latency_s REAL NOT NULL DEFAULT 0, extra_s_per_byte REAL NOT NULL DEFAULT 0,
  last_seen_ns INTEGER NOT NULL); INSERT INTO avoid_list VALUES (1, 'j', 'slow_link',
  'link test-node-0 -> test-node-1', 'test-node-0', 'test-node-1', 0.002, 0, $(date +%s%N));"
for avoid in "test-node-0->test-node-1" "@$PWD/store.db"; do
  for algorithm in ring star hier-star auto; do
    rm -rf trace
    out=$(COMMTAP_DIR=trace COMMTAP_SAMPLE=1 COMMTAP_ALLREDUCE=$algorithm COMMTAP_TEST_NODES=4 \
      COMMTAP_AVOID_HOSTS=$avoid run_preloaded 4 "${toy[@]}" 2>err.txt) ||
      fail "$algorithm, $avoid: $(cat err.txt)"
    expect_equal "$native" "$out" "$algorithm avoiding $avoid: toy_train's checksums"
    expect_equal "" "$(cat err.txt)" "$algorithm avoiding $avoid: messages"
    read -r sent crossing others <<<"$(db_query trace "SELECT
        (SELECT COUNT(*) FROM transfers WHERE tag = -1 AND direction = 'send'),
        (SELECT COUNT(*) FROM transfers WHERE tag = -1 AND direction = 'send' AND rank = 0
           AND peer = 1),
        (SELECT COUNT(*) FROM collectives WHERE function = 'MPI_Allreduce'
           AND algorithm NOT IN ('ring', 'star', 'hier-star'))" | tr '|' ' ')"
    [ "$sent" -gt 0 ] || fail "$algorithm avoiding $avoid: no messages of its own"
    expect_equal "0 0" "$crossing $others" \
      "$algorithm avoiding $avoid: messages over the flagged link, calls by other forms"
  done
  pass "ring, star, hier-star and auto keep off the flagged link ($avoid)"
done
for algorithm in ring star hier auto; do
  out=$(COMMTAP_DIR=trace COMMTAP_ALLREDUCE=$algorithm COMMTAP_TEST_NODES=2 COMMTAP_YIELD=1 \
    COMMTAP_AVOID_HOSTS="test-node-0->test-node-1" run_preloaded 4 "$PROGRAMS/allreduce_sweep" \
    60 17) || fail "$algorithm routed sweep: $out"
  expect_equal "cases 60 mismatches 0" "$out" "$algorithm routed, 4 ranks on 2 nodes"
done
out=$(COMMTAP_DIR=trace COMMTAP_ALLREDUCE=ring COMMTAP_AVOID_HOSTS="a->,<->b,c<->" \
  run_preloaded 2 "$PROGRAMS/allreduce_sweep" 10 3 2>err.txt)
expect_equal "cases 10 mismatches 0" "$out" "ring with malformed links"
expect_equal 3 "$(grep -c 'is neither a host nor a link' err.txt)" "messages for malformed links"
pass "routed forms equal the library's; malformed links are one message each"
