#!/usr/bin/env bash
# NCCL loaded as PyTorch loads it: Python dlopens a library RTLD_LOCAL whose dependency is
# libnccl.so.2 (the fake), so NCCL's symbols are not in the global scope. Under `commtap run`
# the job's results equal the native run's and every rank records; the world communicator's
# 4 collectives a step (3 all-reduce buckets and an AllGather, as DDP) are all sampled at the
# default one in 16; a one-rank job records its collectives through the wrappers (NCCL raises
# no profiler event for them); and on a node where libmpich, libunwind and libdw cannot be
# loaded the library still loads and records.
source "$(dirname "$0")/common.sh"

if [ "${COMMTAP_TEST_HAVE_NCCL:-0}" != 1 ]; then
  echo "skipped: built without nccl.h"
  exit 77
fi
python=$(command -v python3) || { echo "skipped: no python3"; exit 77; }
script=$(dirname "$0")/../programs/ctypes_train.py
lib=$PROGRAMS/libnccl_train_lib.so
port=$((20000 + $$ % 20000))
train=("$python" "$script" "$lib" --ddp --steps 300 --compute-us 0)
launch=("$PROGRAMS/launch_ranks" -n 4 --master-port "$port" --)

timeout "$LIMIT" "${launch[@]}" "${train[@]}" >native.out 2>&1 || {
  cat native.out >&2
  fail "native run"
}
grep -q "result checks passed" native.out || fail "the native run's results"
timeout "$LIMIT" "$CLI" run --dir four -- "${launch[@]}" "${train[@]}" >four.out 2>four.err || {
  cat four.out four.err >&2
  fail "run under commtap"
}
grep -q "result checks passed" four.out || { cat four.out four.err >&2; fail "results under commtap"; }
grep -q "trace database: four (4 rank files)" four.err || { cat four.err >&2; fail "4 rank files"; }
pass "NCCL loaded RTLD_LOCAL under Python: the job runs under commtap with the native results"

world="SELECT comm_id FROM communicators WHERE created_by = 'ncclCommInitRank' LIMIT 1"
kinds=$(db_query four "SELECT function, count(*) / 4 FROM collectives WHERE comm_id = ($world)
  GROUP BY function ORDER BY function" | tr '\n' ';')
reduce=$(db_query four "SELECT count(*) / 4 FROM collectives WHERE comm_id = ($world) AND
  function = 'ncclAllReduce'")
gather=$(db_query four "SELECT count(*) / 4 FROM collectives WHERE comm_id = ($world) AND
  function = 'ncclAllGather'")
# 900 all-reduces and 300 AllGathers, one in 16 sampled: about 56 and 19.
[ "$reduce" -ge 20 ] && [ "$gather" -ge 5 ] ||
  fail "the world communicator's kinds are not all sampled in proportion: $kinds"
pass "a loop of 4 collectives a step: every kind sampled ($kinds)"

# One rank (no launcher): NCCL's one-rank path raises no profiler event; the wrappers record.
MASTER_PORT=$((port + 1)) timeout "$LIMIT" "$CLI" run --dir one -- "${train[@]}" >one.out \
  2>one.err || {
  cat one.out one.err >&2
  fail "one-rank run under commtap"
}
grep -q "result checks passed" one.out || fail "the one-rank run's results"
got=$(db_query one "SELECT count(DISTINCT function) FROM collectives WHERE function IN
  ('ncclAllReduce', 'ncclAllGather')")
expect_equal 2 "$got" "collective kinds recorded on a one-rank communicator"
pass "a one-rank communicator's collectives are recorded"

# A node without MPICH, libunwind and libdw (a stock CUDA/PyTorch image): they are hidden behind
# /dev/null in a private mount namespace. Needs root and unshare.
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
  echo "skipped: the node without MPICH (needs root and unshare -m)"
  exit 0
fi
hide=""
for name in libmpich.so.12 libunwind.so.8 libdw.so.1; do
  # awk reads the whole listing: leaving early would end ldconfig with SIGPIPE, which pipefail
  # and set -e turn into a silent exit of this script.
  path=$(ldconfig -p | awk -v n="$name" '!found && $1 == n && /x86-64/ { print $NF; found = 1 }')
  [ -n "$path" ] && hide+="mount --bind /dev/null $(readlink -f "$path"); "
done
unshare -m bash -c "$hide
  LD_PRELOAD='$LIB' '$python' -c 'import sys; sys.exit(0)' >probe.out 2>&1
  echo \$? >probe.rc
  timeout '$LIMIT' '$CLI' run --dir bare -- ${launch[*]} ${train[*]} >bare.out 2>bare.err" ||
  { cat probe.out bare.out bare.err >&2; fail "the job on a node without MPICH"; }
expect_equal 0 "$(cat probe.rc)" "Python with libcommtap.so preloaded and no MPICH"
[ ! -s probe.out ] || { cat probe.out >&2; fail "the preload said something without MPICH"; }
grep -q "result checks passed" bare.out || fail "results on a node without MPICH"
expect_equal 4 "$(db_query bare "SELECT count(DISTINCT rank) FROM collectives")" \
  "ranks recording on a node without MPICH"
pass "libcommtap.so loads and records where libmpich, libunwind and libdw cannot be loaded"
