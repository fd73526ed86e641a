# Shared by the end-to-end tests: paths from CTest, a scratch directory, bounded MPI runs and
# small assertions. Every MPI launch goes through `timeout`, so a hang fails instead of blocking.
set -euo pipefail
export LC_ALL=C

LIB=${COMMTAP_TEST_LIBRARY:?set by CTest}
CLI=${COMMTAP_TEST_CLI:?set by CTest}
PROGRAMS=${COMMTAP_TEST_PROGRAMS:?set by CTest}
SOURCE=${COMMTAP_TEST_SOURCE:?set by CTest}
BUILD=${COMMTAP_TEST_BUILD:?set by CTest}
LIMIT=${COMMTAP_TEST_LIMIT:-90}

# Nothing from the caller's environment may change what these tests see.
unset LD_PRELOAD COMMTAP_DIR COMMTAP_JOB_ID COMMTAP_DISABLE COMMTAP_YIELD COMMTAP_VERBOSE

WORK=$(mktemp -d "${TMPDIR:-/tmp}/commtap-test.XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
cd "$WORK"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
pass() { echo "ok: $*"; }

# run_native N program args...      -> stdout of the job
run_native() {
  local n=$1
  shift
  timeout "$LIMIT" mpiexec -n "$n" "$@"
}

# run_preloaded N program args...   -> stdout; COMMTAP_* come from the caller's environment
run_preloaded() {
  local n=$1
  shift
  timeout "$LIMIT" mpiexec -n "$n" -genv LD_PRELOAD "$LIB" "$@"
}

# wait_then_stop pid stop_file command... -> the job's status, once `command` succeeded (polled
# every half second while job `pid` runs, for a minute at most) and stop_file was created: a job
# that takes a stop file runs until what a test waits for has happened, however loaded the
# machine.
wait_then_stop() {
  local job=$1 stop=$2 waited=0
  shift 2
  while kill -0 "$job" 2>/dev/null && [ $waited -lt 120 ] && ! "$@"; do
    sleep 0.5
    waited=$((waited + 1))
  done
  touch "$stop"
  wait "$job"
}

# db_query DIR-or-FILE SQL          -> rows, '|'-separated, through commtap's own reader
db_query() {
  "$CLI" query "$1" --sql "$2" --raw
}

expect_equal() {  # expected actual what
  [ "$1" == "$2" ] || fail "$3: expected [$1], got [$2]"
}

expect_same_files() {  # a b what
  diff -u "$1" "$2" >&2 || fail "$3 differ"
}

# Exits 77 (skipped, with the reason) unless an emulated cluster can be made here: root,
# iproute2, iptables, network namespaces that can really be created, and no other ctap* cluster.
require_emulated_cluster() {
  if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v iptables >/dev/null; then
    echo "skipped: needs root, iproute2 and iptables (network namespaces)"
    exit 77
  fi
  local probe=ctapprobe$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "skipped: cannot create network namespaces here"
    exit 77
  fi
  ip netns delete "$probe"
  if ip netns list | grep -q '^ctap'; then
    echo "skipped: another emulated cluster (ctap*) is up"
    exit 77
  fi
}

# Every all-reduce form the library has but native (auto included), from the library itself:
# its message for a name it does not know lists them all, so a new form is tested the day it
# exists.
allreduce_forms() {
  COMMTAP_ALLREDUCE=no-such-form COMMTAP_DIR=$WORK/trace-forms \
    run_preloaded 1 "$PROGRAMS/toy_train" 1 8 >/dev/null 2>"$WORK/forms.err" ||
    fail "run with an unknown all-reduce name failed"
  local forms
  forms=$(sed -n 's/.* is not one of \(.*\); using native$/\1/p' "$WORK/forms.err" | tr -d ',')
  [ -n "$forms" ] || fail "no list of all-reduce names in: $(cat "$WORK/forms.err")"
  local form
  for form in $forms; do [ "$form" == native ] || echo "$form"; done
}
