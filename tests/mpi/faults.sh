#!/usr/bin/env bash
# The short fault-injection subset on the emulated cluster (scripts/faults): a clean run must
# produce no finding at all, a delayed directed link and a frozen rank must be named first by
# the live analysis. Skipped where network namespaces, iptables or netdelay are missing.
source "$(dirname "$0")/common.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v iptables >/dev/null || [ ! -x "$BUILD/cluster/netdelay" ]; then
  echo "skipped: needs root, iptables and cluster/netdelay (libnetfilter-queue)"
  exit 77
fi
probe=ctapprobe$$
if ! ip netns add "$probe" 2>/dev/null; then
  echo "skipped: cannot create network namespaces here"
  exit 77
fi
ip netns delete "$probe"
if ip netns list | grep -q '^ctap'; then
  echo "skipped: another emulated cluster (ctap*) is up"
  exit 77
fi

COMMTAP_BUILD_DIR=$BUILD FAULTS_OUT=$WORK/faults FAULTS_TIME=24 \
  timeout 240 "$SOURCE/scripts/faults" clean link hang >table.md 2>&1 || {
  cat table.md >&2
  fail "a fault-injection run did not meet its expectation"
}
cat table.md
grep -q '^| clean |.*| none | yes |$' table.md || fail "clean run"
grep -q '^| link |.*| yes |$' table.md || fail "link run"
grep -q '^| hang |.*| yes |$' table.md || fail "hang run"
[ -z "$(ip netns list | grep '^ctap' || true)" ] || fail "namespaces left behind"
pass "clean: no finding; delayed link and frozen rank named first"
