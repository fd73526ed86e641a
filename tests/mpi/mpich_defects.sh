#!/usr/bin/env bash
# The MPICH 4.0.2 defects commtap works around (docs/architecture.md), each reproduced natively
# by its program in tests/mpich_defects/. Every one must still be there: if a library fixes one,
# this test says which, so that its workaround is revisited.
source "$(dirname "$0")/common.sh"

present() {  # name ranks -> 0 if the reproducer shows its defect
  local name=$1 ranks=$2 rc=0
  timeout "$LIMIT" mpiexec -n "$ranks" "$PROGRAMS/mpich_defect_$name" >"$name.out" 2>&1 || rc=$?
  case $name in
    isendrecv_derived_type) [ "$rc" -ne 0 ] ;;  # crashes
    persistent_collective_restart) grep -q "DEFECT PRESENT" "$name.out" ;;  # errors, then hangs
    *) [ "$rc" -eq 1 ] && grep -q "DEFECT PRESENT" "$name.out" ;;
  esac
}

gone=""
for spec in isendrecv_status:2 isendrecv_derived_type:2 irecv_proc_null_status:1 \
  shared_send_handles:2 large_count_envelope:1 testall_persistent_collective:2; do
  if present "${spec%:*}" "${spec#*:}"; then pass "${spec%:*}: present"; else gone="$gone ${spec%:*}"; fi
done
# The restart defect hangs after printing: the job is stopped once it has printed (or after the
# test's limit), not after a fixed time that a loaded machine's start-up could take.
timeout "$LIMIT" mpiexec -n 3 "$PROGRAMS/mpich_defect_persistent_collective_restart" \
  >persistent_collective_restart.out 2>&1 &
restart=$!
for ((i = 0; i < 10 * LIMIT; i++)); do
  grep -q "DEFECT PRESENT" persistent_collective_restart.out && break
  kill -0 $restart 2>/dev/null || break
  sleep 0.1
done
kill -TERM $restart 2>/dev/null || true
wait $restart 2>/dev/null || true
if grep -q "DEFECT PRESENT" persistent_collective_restart.out; then
  pass "persistent_collective_restart: present"
else
  gone="$gone persistent_collective_restart"
fi
[ -z "$gone" ] || fail "defects no longer reproduced by this MPI library:$gone (revisit their workarounds)"
