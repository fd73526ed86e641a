#!/usr/bin/env bash
# commtap's own MPI_Pack/MPI_Unpack against the MPI library's, byte for byte, on 10,000 random
# derived datatypes per seed (tests/programs/pack_random.cpp); most of them must be packed by
# commtap's plans, the rest (darray, named types with holes) passed to the library.
source "$(dirname "$0")/common.sh"

for seed in 1 2; do
  out=$(run_preloaded 1 "$PROGRAMS/pack_random" 10000 $seed) || fail "seed $seed: $out"
  read -r _ types _ mismatches _ strided _ tree _ library <<<"$out"
  expect_equal 10000 "$types" "types compared"
  expect_equal 0 "$mismatches" "types packed differently from PMPI_Pack"
  [ $((strided + tree)) -ge 8000 ] || fail "seed $seed: only $((strided + tree)) types by commtap"
  [ "$strided" -ge 5000 ] || fail "seed $seed: only $strided strided plans"
  pass "seed $seed: 10,000 random types identical to PMPI_Pack/Unpack ($strided strided, $tree tree, $library by the library)"
done

out=$(COMMTAP_DATATYPES=0 run_preloaded 1 "$PROGRAMS/pack_random" 2000 3)
expect_equal "types 2000 mismatches 0 strided 0 tree 0 library 2000" "$out" "COMMTAP_DATATYPES=0"
pass "COMMTAP_DATATYPES=0 leaves every type to the library"
