#!/usr/bin/env bash
# Link probes (COMMTAP_PROBE_INTERVAL) on pretend hosts (COMMTAP_TEST_NODES): every directed host
# pair is measured in every routine probe round, by its sender's leader; a job with receives in flight
# across the probe points gives the native run's output, in both wait modes; probes are off with
# the setting at 0 and on a single host.
source "$(dirname "$0")/common.sh"

program=$PROGRAMS/probe_workload
steps=300 work_us=4000  # about 1.2 s of compute: the first probe at step 16, then every second
run_native 4 "$program" $steps $work_us >native.out
[ -s native.out ] || fail "native run printed nothing"

probed() {  # dir nodes [more -genv pairs]
  local dir=$1 nodes=$2
  shift 2
  run_preloaded 4 -genv COMMTAP_DIR "$dir" -genv COMMTAP_TEST_NODES "$nodes" \
    -genv COMMTAP_PROBE_INTERVAL 1 "$@" "$program" $steps $work_us
}

for mode in 0 1; do
  probed trace-$mode 4 -genv COMMTAP_YIELD $mode >probed.out || fail "probed run (yield $mode)"
  expect_same_files native.out probed.out "native and probed outputs (yield $mode)"
  # Every directed pair of the 4 pretend hosts, latency and throughput, in every round.
  pairs=$(db_query trace-$mode "SELECT count(DISTINCT from_node || '>' || to_node || ':' || bytes)
            FROM probes WHERE ns > 0 AND from_node <> to_node AND from_node = rank
            AND method = 'round'")
  expect_equal 24 "$pairs" "directed pairs x sizes probed in rounds (yield $mode)"
  # Rounds after the first come when the last rounds and decisions took at most 0.5% of the time
  # since (on a loaded machine a round of 4 pretend hosts takes more than the 5 ms that allows in
  # this job's second): every pair has a round.
  rounds=$(db_query trace-$mode "SELECT min(n) FROM (SELECT count(DISTINCT at_ns) AS n FROM probes
             GROUP BY from_node, to_node, bytes)")
  [ "$rounds" -ge 1 ] || fail "expected a probe round per pair, got $rounds (yield $mode)"
  # Routine rounds measure each of the leader's 3 peers; a round that confirms a change (a loaded
  # machine's noise) only the changed pairs' tournament rounds: a peer or two, both sizes.
  partial=$(db_query trace-$mode "SELECT count(*) FROM (SELECT count(*) AS n FROM probes
              GROUP BY rank, at_ns) WHERE n NOT IN (2, 4, 6)")
  expect_equal 0 "$partial" "probe rounds with a peer measured at one size only (yield $mode)"
  routine=$(db_query trace-$mode "SELECT count(DISTINCT rank) FROM (SELECT rank, count(*) AS n
              FROM probes GROUP BY rank, at_ns) WHERE n = 6")
  expect_equal 4 "$routine" "leaders with a round of every peer (yield $mode)"
  # The rows of the rounds: where the rounds were overdue (two intervals without one, as the cost
  # bound may space them on a loaded machine) the asynchronous probes measure too, whose times
  # mean what they mean there (tests/mpi/probes_async.sh).
  # Each latency row's four times (NTP's): on one machine the pretend hosts' clocks are one, so
  # ping sent <= received by the peer <= reply sent <= reply received (1 ms of slack for two
  # processes' counter calibrations), and the round trip is twice the latency.
  disordered=$(db_query trace-$mode "SELECT count(*) FROM probes WHERE bytes = 1 AND
                 method = 'round' AND (sent_ns IS NULL OR peer_received_ns IS NULL OR peer_replied_ns IS NULL OR
                 received_ns IS NULL OR sent_ns > peer_received_ns + 1000000 OR
                 peer_received_ns > peer_replied_ns OR peer_replied_ns > received_ns + 1000000 OR
                 received_ns - sent_ns NOT BETWEEN 2 * ns AND 2 * ns + 1)")
  expect_equal 0 "$disordered" "latency rows whose four times are missing or out of order (yield $mode)"
  # The longest one-way leg of every row (schema 9): recorded, and a transfer's data leg is part of
  # its slowest transfer. That is recorded less half the fastest round trip (the pair's latency in
  # the same round), and the leg is split from its transfer with a clock offset off by at most as
  # much again: on a busy machine in yield mode the fastest of 5 round trips can take milliseconds,
  # so the bound adds the pair's latency twice (and 1 ms of slack), not a fixed slack alone.
  legs=$(db_query trace-$mode "SELECT count(*) FROM probes t WHERE t.method = 'round' AND
           (t.slowest_oneway_ns IS NULL OR t.bytes > 1 AND t.slowest_oneway_ns > t.slowest_ns +
             1000000 + 2 * (SELECT max(l.ns) FROM probes l WHERE l.bytes = 1 AND l.rank = t.rank AND l.at_ns = t.at_ns AND
             l.from_node = t.from_node AND l.to_node = t.to_node))")
  expect_equal 0 "$legs" "rows without a one-way leg, or a data leg longer than its transfer (yield $mode)"
  # Each row says how long its messages may have waited off the CPU for either leader (schema
  # 13); the measuring leader's wait for a reply is part of its round trip.
  held=$(db_query trace-$mode "SELECT count(*) FROM probes WHERE method = 'round' AND (
           from_held_ns IS NULL OR to_held_ns IS NULL OR (bytes = 1 AND from_held_ns > 2 * ns + 1))")
  expect_equal 0 "$held" "rows without held times, or a reply held longer than its round trip (yield $mode)"
  pass "4 pretend hosts, yield $mode: 12 directed pairs x 2 sizes in each of $rounds rounds"
done

# An odd number of hosts (a bye every round): 3 hosts, 6 directed pairs.
probed trace-odd 3 >probed.out || fail "probed run on 3 hosts"
expect_same_files native.out probed.out "native and probed outputs (3 hosts)"
pairs=$(db_query trace-odd "SELECT count(DISTINCT from_node || '>' || to_node) FROM probes")
expect_equal 6 "$pairs" "directed pairs probed on 3 hosts"
pass "3 pretend hosts: 6 directed pairs"
# The report draws the probes as two host-by-host matrices, latency and throughput: 6 measured
# cells in each.
"$CLI" report trace-odd -o probes.html 2>/dev/null || fail "commtap report failed"
cells=$(grep -o "<title>[^<]*probe rounds[^<]*</title>" probes.html | wc -l)
expect_equal 12 "$cells" "probe matrix cells in the report (latency and throughput)"
grep -q "MB/s</text>" probes.html || fail "probe matrix without throughput"
pass "report: the probe matrix has every directed pair of the 3 hosts"

# A program whose pace drops (a parameter server whose workers' compute takes four times as long
# from step 2200 on, as a fault would slow it) earns a round of every pair, however far the next
# routine round is (the interval at 60 s: none after the first). The workers sleep, so the
# machine's noise finds few changes of its own to confirm. The decision that sees the drop comes
# a second of the old pace's collectives after the one before, up to 4 s after the drop.
run_preloaded 4 -genv COMMTAP_DIR trace-slower -genv COMMTAP_TEST_NODES 4 \
  -genv COMMTAP_PROBE_INTERVAL 60 "$PROGRAMS/param_server" 3000 64 2000 2200 >/dev/null ||
  fail "run whose pace drops"
# The first sampled collective of the slower steps: step 2200's Scatter is its communicator's
# collective 4577 (a Scatter and a Gather a step, a Reduce and a Bcast every 25).
slower_ns=$(db_query trace-slower "SELECT min(enter_ns) FROM collectives WHERE rank = 0
              AND function IN ('MPI_Scatter', 'MPI_Gather') AND seq >= 4577")
every=$(db_query trace-slower "SELECT count(*) FROM (SELECT at_ns FROM probes WHERE rank = 0
          AND at_ns > ${slower_ns:-0} AND method = 'round' GROUP BY at_ns HAVING count(*) = 6)")
[ -n "$slower_ns" ] && [ "$every" -ge 1 ] ||
  fail "no round of every pair after the pace dropped: rank 0's rounds (at, rows) $(db_query \
    trace-slower "SELECT at_ns, count(*) FROM probes WHERE rank = 0 GROUP BY at_ns"), slower from $slower_ns"
pass "a program whose pace drops earns a round of every pair: $every after the drop"

run_preloaded 4 -genv COMMTAP_DIR trace-off -genv COMMTAP_TEST_NODES 4 \
  -genv COMMTAP_PROBE_INTERVAL 0 "$program" 40 100 >/dev/null || fail "run with probes off"
expect_equal 0 "$(db_query trace-off "SELECT count(*) FROM probes")" "probe rows with interval 0"
run_preloaded 4 -genv COMMTAP_DIR trace-one "$program" 40 100 >/dev/null ||
  fail "run on one host"
expect_equal 0 "$(db_query trace-one "SELECT count(*) FROM probes")" "probe rows on one host"
pass "no probes with COMMTAP_PROBE_INTERVAL=0 or on one host"

# Ranks launched with different settings (an MPMD launch: each part its own environment) must
# not wait for each other forever: probes and clock estimates are collective, so rank 0's
# settings are used everywhere, with one line saying so.
timeout "$LIMIT" mpiexec -genv LD_PRELOAD "$LIB" -genv COMMTAP_DIR trace-mixed \
  -genv COMMTAP_TEST_NODES 4 \
  -n 2 -env COMMTAP_PROBE_INTERVAL 1 "$program" $steps $work_us : \
  -n 2 -env COMMTAP_PROBE_INTERVAL 0 -env COMMTAP_CLOCK_SYNC 10 "$program" $steps $work_us \
  >mixed.out 2>mixed.err || fail "run with settings differing between ranks (exit $?)"
expect_same_files native.out mixed.out "native and mixed-settings outputs"
expect_equal 1 "$(grep -c "settings differ from rank 0's" mixed.err)" "lines about the difference"
expect_equal 12 "$(db_query trace-mixed "SELECT count(DISTINCT from_node || '>' || to_node)
                   FROM probes")" "directed pairs probed with rank 0's interval"
pass "settings that differ between ranks: rank 0's are used, one line says so"
