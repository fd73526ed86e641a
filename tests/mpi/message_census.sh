#!/usr/bin/env bash
# No step of commtap's sends O(p) messages from one rank: the point-to-point calls commtap makes
# on any rank (counted by tests/tools/pmpi_census, preloaded after it) through MPI_Init (the
# all-reduce cost model's measurement included), clock re-estimations every 10 world collectives
# and MPI_Finalize stay within the clock tree's bound plus the measurement's constant, whatever
# the number of ranks; and its collective calls per rank do not grow with it either.
# Counts, not times: a star of exchanges with rank 0 (p-1 partners) breaks the bound at 16 ranks.
source "$(dirname "$0")/common.sh"

barriers=40 every=10
# Clock estimates: MPI_Init's and MPI_Finalize's (12 exchanges), one every `every` world
# collectives (2). Per estimate a rank has one parent and at most 4 children (2 in its node's tree,
# 2 in the leaders'), each edge 2 x exchanges + 1 messages at each end.
tree=$((5 * (2 * (2 * 12 + 1) + (barriers / every) * (2 * 2 + 1))))
# The all-reduce cost model measured at MPI_Init (COMMTAP_ALLREDUCE=auto, the default, across
# nodes): a rank measures at most both levels with one peer each, whatever the number of ranks:
# 21 + 9 x 6 round trips (2 calls each) and 11 bursts of 16 messages and an answer per level.
calibration=$((2 * (2 * (21 + 9 * 6) + 11 * 17)))
bound=$((tree + calibration))

census() {  # ranks nodes -> "max point-to-point calls on a rank, max collective calls"
  local dir=census-$1-$2
  mkdir -p "$dir"
  CENSUS_DIR=$PWD/$dir COMMTAP_DIR=trace-$1-$2 COMMTAP_YIELD=1 COMMTAP_TEST_NODES=$2 \
    COMMTAP_CLOCK_SYNC=$every COMMTAP_PROBE_INTERVAL=0 \
    timeout "$LIMIT" mpiexec -n "$1" -genv LD_PRELOAD "$LIB:$PROGRAMS/libpmpi_census.so" \
    "$PROGRAMS/world_barriers" "$barriers"
  [ "$(ls "$dir" | wc -l)" -eq "$1" ] || fail "$1 ranks: $(ls "$dir" | wc -l) censuses"
  cat "$dir"/rank-* | awk '{ if ($1 > p) p = $1; if ($2 > c) c = $2 } END { print p, c }'
}

read -r p4 c4 < <(census 4 2)
read -r p16 c16 < <(census 16 4)
read -r p32 c32 < <(census 32 8)
echo "point-to-point calls on the busiest rank: 4 ranks $p4, 16 ranks $p16, 32 ranks $p32 (bound $bound: the tree's $tree, the cost model's $calibration)"
echo "collective calls on the busiest rank: 4 ranks $c4, 16 ranks $c16, 32 ranks $c32"
[ "$p4" -gt 0 ] || fail "no clock exchange counted: is the census preloaded after commtap?"
for p in "$p4" "$p16" "$p32"; do
  [ "$p" -le "$bound" ] || fail "a rank made $p point-to-point calls, over the bound $bound"
done
pass "point-to-point calls per rank within the clock tree's and the cost model's bound at 4, 16 and 32 ranks"
expect_equal "$c4" "$c16" "collective calls on the busiest rank, 4 vs 16 ranks"
expect_equal "$c4" "$c32" "collective calls on the busiest rank, 4 vs 32 ranks"
pass "collective calls per rank independent of the number of ranks"

# The estimates are still right: with each rank's clock shifted by rank x 3 ms, every estimate
# (MPI_Init's, the re-estimations', MPI_Finalize's) recovers the shift within its error bound
# (plus 10 us for the per-process clock calibration), on pretend nodes of 4 ranks.
COMMTAP_DIR=skewed COMMTAP_YIELD=1 COMMTAP_TEST_NODES=4 COMMTAP_CLOCK_SYNC=$every \
  COMMTAP_TEST_CLOCK_SKEW=3000000 run_preloaded 16 "$PROGRAMS/world_barriers" "$barriers"
expect_equal "96" "$(db_query skewed "SELECT count(*) FROM clock_offsets")" \
  "clock estimates (16 ranks x (init + 4 re-estimations + finalize))"
expect_equal "" "$(db_query skewed "SELECT rank, at_ns, offset_ns, error_ns FROM clock_offsets
  WHERE error_ns < 0 OR abs(offset_ns + rank * 3000000) > error_ns + 10000")" \
  "estimates outside their error bound"
pass "every estimate along the tree recovers the skew within its bound"
