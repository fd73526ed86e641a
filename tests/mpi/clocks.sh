#!/usr/bin/env bash
# Clock offsets to rank 0: with each rank's clock shifted by rank x 7 ms (a test-only setting,
# as if the ranks were hosts whose clocks disagree), the offsets estimated at MPI_Init recover
# the shift within their error bound (plus 10 us for the per-process clock calibration); without
# a shift, ranks of one machine agree within the bound.
source "$(dirname "$0")/common.sh"

check() {  # trace skew_per_rank
  local bad
  bad=$(db_query "$1" "SELECT rank, clock_offset_ns, clock_error_ns FROM ranks
          WHERE clock_error_ns IS NULL OR clock_error_ns < 0 OR clock_error_ns > 5000000
             OR abs(clock_offset_ns + rank * $2) > clock_error_ns + 10000")
  expect_equal "" "$bad" "offsets outside their error bound (skew $2 ns per rank)"
}

COMMTAP_DIR=skewed COMMTAP_TEST_CLOCK_SKEW=7000000 run_preloaded 4 "$PROGRAMS/toy_train" 5 64 \
  >/dev/null
check skewed 7000000
pass "skews of 7, 14 and 21 ms recovered within the error bound"

COMMTAP_DIR=plain run_preloaded 4 "$PROGRAMS/toy_train" 5 64 >/dev/null
check plain 0
expect_equal "0|0" "$(db_query plain "SELECT clock_offset_ns, clock_error_ns FROM ranks WHERE rank = 0")" \
  "rank 0 is the reference"
pass "one machine, no skew: offsets within the bound"
