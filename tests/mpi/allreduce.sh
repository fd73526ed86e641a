#!/usr/bin/env bash
# commtap's all-reduce algorithms, each forced in turn, against the library's in the same run
# (tests/programs/allreduce_sweep.cpp: random seeded cases of op x type x count x MPI_IN_PLACE x
# communicator; integers exact, floating point within the reduction-order bound and identical
# on every rank; invalid calls fail with the library's error class), on three node shapes: 4
# ranks on 2 pretend nodes dealt round-robin (a non-block placement), 3 ranks on 2 nodes of
# unequal size, and 4 ranks on one node.
source "$(dirname "$0")/common.sh"

run_sweep() {  # algorithm ranks nodes seed
  COMMTAP_DIR=trace COMMTAP_ALLREDUCE=$1 COMMTAP_TEST_NODES=$3 COMMTAP_YIELD=1 \
    run_preloaded "$2" "$PROGRAMS/allreduce_sweep" 60 "$4"
}

for algorithm in rd ring star hier hier-rs auto; do
  for shape in "4 2" "3 2" "4 0"; do
    read -r ranks nodes <<<"$shape"
    out=$(run_sweep $algorithm "$ranks" "$nodes" $((ranks * 10 + nodes))) ||
      fail "$algorithm on $ranks ranks, $nodes nodes: $out"
    expect_equal "cases 60 mismatches 0" "$out" "$algorithm on $ranks ranks, $nodes nodes"
  done
  pass "$algorithm: 3 x 60 random cases equal the library's (4 ranks/2 nodes, 3/2, 4/1)"
done

COMMTAP_DIR=trace COMMTAP_ALLREDUCE=fastest run_preloaded 2 "$PROGRAMS/allreduce_sweep" 20 \
  >out.txt 2>err.txt || fail "a bad COMMTAP_ALLREDUCE broke the job: $(cat err.txt)"
expect_equal "cases 20 mismatches 0" "$(cat out.txt)" "results with a bad setting"
expect_equal 1 "$(grep -c 'COMMTAP_ALLREDUCE=fastest is not one of' err.txt)" "messages"
pass "an unknown COMMTAP_ALLREDUCE: one message, the library's all-reduce"
