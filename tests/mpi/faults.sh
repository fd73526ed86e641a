#!/usr/bin/env bash
# The short fault-injection subset on the emulated cluster (scripts/faults, analyzer defaults): a
# clean run must produce no finding at all; a delayed directed link, a frozen rank and, in jobs
# of collectives only, a rate-limited host (found by link probes alone) and a directed link that
# drops packets (found by the kernel's TCP counters) must be named first by the live analysis.
# Skipped where network namespaces, iptables or netdelay are missing.
source "$(dirname "$0")/common.sh"

require_emulated_cluster
if [ ! -x "$BUILD/cluster/netdelay" ]; then
  echo "skipped: no cluster/netdelay (libnetfilter-queue missing at build time)"
  exit 77
fi

# Detection is statistical and this CI machine runs 4 ranks, the delay tool and the analyzer on
# 2 cores: a scenario that misses is run once more, and both tables are printed. A detector that
# is wrong misses twice.
run_faults() {  # out-dir scenario...
  local dir=$1
  shift
  COMMTAP_BUILD_DIR=$BUILD FAULTS_OUT=$dir FAULTS_TIME=30 \
    timeout 240 "$SOURCE/scripts/faults" "$@" >"$dir.md" 2>&1
}
met() {  # scenario[/workload] table
  local name=${1%%/*} workload=halo
  [[ "$1" == */* ]] && workload=${1#*/}
  grep -q "^| $name | $workload |.*| yes |\$" "$2"
}
scenarios=(clean link hang rate_host/collectives loss_link/collectives)
run_faults "$WORK/first" "${scenarios[@]}" || true
cat "$WORK/first.md"
missed=()
for scenario in "${scenarios[@]}"; do met "$scenario" "$WORK/first.md" || missed+=("$scenario"); done
if [ ${#missed[@]} -gt 0 ]; then
  echo "again: ${missed[*]}"
  run_faults "$WORK/second" "${missed[@]}" || true
  cat "$WORK/second.md"
  for scenario in "${missed[@]}"; do
    met "$scenario" "$WORK/second.md" || fail "$scenario did not meet its expectation twice"
  done
fi
[ -z "$(ip netns list | grep '^ctap' || true)" ] || fail "namespaces left behind"
pass "clean: no finding; delayed link, frozen rank, rate-limited host and lossy link named first"
