#!/usr/bin/env bash
# Preloaded into programs that never call MPI_Init (a shell, coreutils, Python, mpiexec and its
# proxies running a non-MPI program), commtap prints nothing and creates no file, even with
# settings that would make an MPI job talk.
source "$(dirname "$0")/common.sh"

mkdir quiet && cd quiet
chatty=(COMMTAP_VERBOSE=2 COMMTAP_YIELD=bogus COMMTAP_DIR=should-not-exist)
compare() {  # what command...
  local what=$1
  shift
  "$@" >plain.out 2>plain.err
  env LD_PRELOAD="$LIB" "${chatty[@]}" "$@" >preloaded.out 2>preloaded.err
  expect_same_files plain.out preloaded.out "$what stdout"
  expect_same_files plain.err preloaded.err "$what stderr"
  rm -f plain.* preloaded.*
  [ -z "$(ls -A)" ] || fail "$what left files: $(ls -A)"
  pass "$what"
}
compare "true" /bin/true
compare "shell script" sh -c 'echo hello; for i in 1 2 3; do echo $i; done'
if command -v python3 >/dev/null; then
  compare "python" python3 -c 'print(sum(range(10)))'
fi
compare "mpiexec of a non-MPI program" timeout "$LIMIT" mpiexec -n 2 /bin/echo ranks
