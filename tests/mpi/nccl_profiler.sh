#!/usr/bin/env bash
# libcommtap.so as NCCL's profiler plugin (docs/nccl.md): profiler_loader opens it as NCCL does
# (dlopen RTLD_NOW|RTLD_LOCAL, dlsym of ncclProfiler_vN), calls init and sends NCCL's events for
# a few ring all-reduces and one point-to-point message, as two ranks of a job without MPI.
# The trace has the communicator, its collective instances with exits, progress, and transfers
# whose sends meet their receives; every interface version records.
source "$(dirname "$0")/common.sh"

LOADER=$PROGRAMS/profiler_loader
HASH=0x5eed1234
# loader DIR VERSION RANK NRANKS COLLECTIVES [env...]: one rank, as a launcher would start it.
loader() {
  local dir=$1 version=$2 rank=$3 nranks=$4 collectives=$5
  shift 5
  env "$@" RANK="$rank" WORLD_SIZE="$nranks" COMMTAP_DIR="$dir" COMMTAP_SAMPLE=1 \
    timeout "$LIMIT" "$LOADER" "$LIB" "$version" "$rank" "$nranks" "$HASH" "$collectives"
}

# Exported symbols: the six tables (data objects), nothing else of the plugin.
got=$(nm -D --defined-only "$LIB" | awk '$3 ~ /^ncclProfiler/ {print $2 $3}' | sort | tr '\n' ' ')
expect_equal "DncclProfiler_v1 DncclProfiler_v2 DncclProfiler_v3 DncclProfiler_v4 DncclProfiler_v5 DncclProfiler_v6 " \
  "$got" "exported profiler tables"

# Two ranks, v5 (NCCL 2.28), with the library preloaded as `commtap run` does: NCCL's dlopen
# finds the preloaded copy, so one runtime records the wrappers and the plugin.
for rank in 0 1; do
  loader trace 5 "$rank" 2 4 LD_PRELOAD="$LIB" >"rank$rank.out" 2>&1 || {
    cat "rank$rank.out" >&2
    fail "profiler_loader rank $rank"
  }
done
grep -q "ncclProfiler_v5: commtap" rank0.out || fail "ncclProfiler_v5 not found by dlsym"
grep -q "init v5: result 0, mask 94, context set" rank0.out || {
  cat rank0.out >&2
  fail "init: mask (Coll, P2p, ProxyOp, ProxyStep, KernelCh) or context"
}
expect_equal "0|2|none;1|2|none;" \
  "$(db_query trace "SELECT rank, world_size, mpi_library FROM ranks ORDER BY rank" | tr '\n' ';')" \
  "two ranks recorded without MPI"
expect_equal "1|2|2" "$(db_query trace "SELECT count(DISTINCT comm_id), count(*), max(size)
  FROM communicators WHERE created_by = 'ncclProfiler'")" "the plugin's communicator, equal ids"
got=$(db_query trace "SELECT rank, group_concat(function || '#' || seq, ' ') FROM (SELECT * FROM
        collectives WHERE exit_ns >= enter_ns ORDER BY rank, seq) GROUP BY rank" | tr '\n' ';')
instances="ncclAllReduce#1 ncclAllReduce#2 ncclAllReduce#3 ncclAllReduce#4"
expect_equal "0|$instances;1|$instances;" "$got" "collective instances with their exits"
expect_equal "0|4|4;1|4|4;" "$(db_query trace "SELECT rank, entered, completed FROM comm_progress p
  WHERE wall_ns = (SELECT max(wall_ns) FROM comm_progress q WHERE q.rank = p.rank)
  ORDER BY rank" | tr '\n' ';')" "collectives entered and completed"
# Every send meets its receive: 4 all-reduces x 2 directions on channel 0, and the message.
expect_equal "8|1|9" "$(db_query trace "SELECT sum(tag = 0), sum(tag = 257), count(*)
  FROM transfers_joined")" "joined transfers (collectives' channel 0, point-to-point channel 1)"
expect_equal "2048|128" "$(db_query trace "SELECT max(bytes), min(bytes) FROM transfers")" \
  "transfer sizes: each operation's last step"
pass "v5: instances, progress and joined transfers from the plugin's events"

# Every older interface: instances on all; exits and progress where NCCL reports kernels (v3+).
for version in 1 2 3 4 6; do
  loader "v$version" "$version" 0 2 3 LD_PRELOAD="$LIB" >"v$version.out" 2>&1 || {
    cat "v$version.out" >&2
    fail "profiler_loader v$version"
  }
  exits=$([ "$version" -ge 3 ] && echo 3 || echo 0)
  expect_equal "3|$exits|7" "$(db_query "v$version" "SELECT count(*), count(exit_ns),
    (SELECT count(*) FROM transfers) FROM collectives")" "v$version instances, exits, transfers"
done
pass "v1-v4 and v6 record"

# Without LD_PRELOAD NCCL's dlopen is the only load: the library has no static TLS (which
# dlopen in a running process cannot give a block as large as the CUDA runtime's), starts
# recording at the plugin's init, and survives NCCL's dlclose.
readelf -dW "$LIB" | grep -q STATIC_TLS && fail "libcommtap.so has static TLS: dlopen may fail"
loader plugin_only 5 0 1 2 >plugin_only.out 2>&1 || {
  cat plugin_only.out >&2
  fail "plugin-only run"
}
grep -q "events sent" plugin_only.out || {
  cat plugin_only.out >&2
  fail "plugin-only run"
}
expect_equal "2|2" "$(db_query plugin_only "SELECT count(*), count(exit_ns) FROM collectives")" \
  "plugin-only instances"
pass "loaded by dlopen alone, the plugin starts recording and survives dlclose"
