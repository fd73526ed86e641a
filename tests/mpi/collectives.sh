#!/usr/bin/env bash
# Collective instances line up across ranks: every blocking, nonblocking and persistent
# collective of call_families gets the next sequence number of its communicator, every member
# records the same (communicator, sequence) with the same function, the number of instances per
# rank equals the program's own tally, nonblocking ones span post to completion, and
# COMMTAP_SAMPLE keeps one in N instances, chosen alike on every rank by a hash.
source "$(dirname "$0")/common.sh"

reps=2
mkdir tallies
COMMTAP_DIR=trace COMMTAP_SAMPLE=1 run_preloaded 4 "$PROGRAMS/call_families" tallies $reps \
  >/dev/null

# Instances per rank = calls of blocking and nonblocking collectives + completed persistent starts.
for rank in 0 1 2 3; do
  expected=$(awk '{ f = tolower($1) }
    f ~ /^mpi_i?(allreduce|reduce|bcast|barrier|allgatherv?|gatherv?|scatterv?|alltoall[vw]?|reduce_scatter(_block)?|scan|exscan)(_c)?$/ { n += $2 }
    f ~ /_init$/ && f !~ /^mpi_[a-z]*(send|recv)_init$/ { n += $3 }
    END { print n }' "tallies/expected-rank-$rank.txt")
  got=$(db_query trace "SELECT count(*) FROM collectives WHERE rank = $rank")
  expect_equal "$expected" "$got" "collective instances of rank $rank"
done
pass "one instance per collective call and per persistent start"

# Alignment: each (comm, seq) is recorded by every member, as the same function.
bad=$(db_query trace "SELECT c.comm_id, c.seq, count(*), count(DISTINCT c.function), m.size
        FROM collectives c JOIN (SELECT comm_id, max(size) AS size, max(inter) AS inter
        FROM communicators GROUP BY comm_id) m ON m.comm_id = c.comm_id
        GROUP BY c.comm_id, c.seq
        HAVING count(DISTINCT c.function) != 1 OR (m.inter = 0 AND count(*) != m.size)")
expect_equal "" "$bad" "instances not recorded alike by all members"
gaps=$(db_query trace "SELECT rank, comm_id FROM collectives GROUP BY rank, comm_id
         HAVING max(seq) != count(*) OR min(seq) != 1")
expect_equal "" "$gaps" "sequence numbers with gaps (sampling is off)"
world=$(db_query trace "SELECT count(*) FROM collectives WHERE rank = 0 AND comm_id = 1")
[ "$world" -gt 50 ] || fail "too few instances on MPI_COMM_WORLD: $world"
pass "every (communicator, seq) recorded by all members as the same collective"

# Nonblocking instances run from the post to the completing call; blocking ones are positive.
bad=$(db_query trace "SELECT count(*) FROM collectives WHERE exit_ns < enter_ns")
expect_equal 0 "$bad" "instances ending before they start"
got=$(db_query trace "SELECT count(*) FROM collectives WHERE function = 'MPI_Iallreduce'")
expect_equal $((reps * 4)) "$got" "MPI_Iallreduce instances"
pass "nonblocking and persistent instances recorded at completion"

# Sampling: one in 3 by a hash of (communicator, seq), the same instances on every rank, a
# subset of the full run's, and every collective function of the program's loop among them (a
# period of the program never hides a position from the sampling).
COMMTAP_DIR=sampled COMMTAP_SAMPLE=3 run_preloaded 4 "$PROGRAMS/call_families" tallies $reps \
  >/dev/null
instances="SELECT rank, comm_id, seq, function FROM collectives ORDER BY 1, 2, 3"
db_query sampled "$instances" >sampled.txt
db_query trace "$instances" >full.txt
extra=$(comm -23 <(sort sampled.txt) <(sort full.txt) | head -3)
expect_equal "" "$extra" "sampled instances the full run does not have"
bad=$(db_query sampled "SELECT c.comm_id, c.seq FROM collectives c JOIN (SELECT comm_id,
        max(size) AS size, max(inter) AS inter FROM communicators GROUP BY comm_id) m
        ON m.comm_id = c.comm_id GROUP BY c.comm_id, c.seq
        HAVING m.inter = 0 AND count(*) != m.size")
expect_equal "" "$bad" "sampled instances not recorded by every member"
full=$(wc -l <full.txt)
got=$(wc -l <sampled.txt)
[ "$got" -ge $((full / 6)) ] && [ "$got" -le $((full / 2)) ] ||
  fail "sampled $got of $full instances at COMMTAP_SAMPLE=3"
missing=$(db_query trace "SELECT function FROM collectives GROUP BY function HAVING count(*) >= 48" |
  sort | comm -23 - <(db_query sampled "SELECT DISTINCT function FROM collectives" | sort))
expect_equal "" "$missing" "collective functions never sampled"
pass "COMMTAP_SAMPLE=3 keeps the same instances on every rank"
