#!/usr/bin/env bash
# commtap's public C API (interpose/include/commtap.h), called by a preloaded program that finds
# it with dlsym: commtap_active() says whether the library intercepts (only between MPI_Init and
# MPI_Finalize, never with COMMTAP_DISABLE=1), and commtap_settings_json() declares the same
# settings as `commtap settings --json`.
source "$(dirname "$0")/common.sh"

program=$PROGRAMS/public_api

run_native 2 "$program" >native.out || fail "native run"
expect_equal "rank 0: no commtap
rank 1: no commtap" "$(sort native.out)" "the program without commtap"
pass "without commtap: the API is absent and the program runs"

COMMTAP_DIR=trace run_preloaded 2 "$program" library.json >preloaded.out ||
  fail "preloaded run (exit $?)"
version=$(sed -n 's/^rank 0: commtap \([^,]*\),.*/\1/p' preloaded.out)
[ -n "$version" ] || fail "no version in: $(cat preloaded.out)"
expect_equal "rank 0: commtap $version, active 0 before MPI_Init, 1 after it, 0 after MPI_Finalize
rank 1: commtap $version, active 0 before MPI_Init, 1 after it, 0 after MPI_Finalize" \
  "$(sort preloaded.out)" "commtap_active() around MPI_Init and MPI_Finalize"
pass "commtap_active: 1 only between MPI_Init and MPI_Finalize"

COMMTAP_DISABLE=1 run_preloaded 2 "$program" >disabled.out || fail "disabled run (exit $?)"
expect_equal "rank 0: commtap $version, active 0 before MPI_Init, 0 after it, 0 after MPI_Finalize
rank 1: commtap $version, active 0 before MPI_Init, 0 after it, 0 after MPI_Finalize" \
  "$(sort disabled.out)" "commtap_active() with COMMTAP_DISABLE=1"
pass "commtap_active: 0 with COMMTAP_DISABLE=1"

"$CLI" settings --json >cli.json || fail "commtap settings --json"
expect_same_files cli.json library.json "commtap_settings_json() and commtap settings --json"
pass "commtap_settings_json: the settings the command lists"
