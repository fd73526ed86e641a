#!/usr/bin/env bash
# Call sites name the application function that made each collective call, through the C
# binding and through Fortran's binding inside the MPI library; one site per calling location.
source "$(dirname "$0")/common.sh"

COMMTAP_DIR=trace COMMTAP_SAMPLE=1 run_preloaded 2 "$PROGRAMS/call_sites" >/dev/null
got=$(db_query trace "SELECT DISTINCT c.function, s.symbol FROM collectives c JOIN call_sites s
        ON s.rank = c.rank AND s.site = c.site AND s.frame = 0 ORDER BY c.function")
expect_equal "$(printf 'MPI_Allreduce|exchange_gradients\nMPI_Barrier|synchronize_step\nMPI_Iallreduce|overlap_gradients')" \
  "$got" "functions named by the call sites"
got=$(db_query trace "SELECT count(DISTINCT site) FROM collectives WHERE rank = 0")
expect_equal 3 "$got" "distinct call sites on rank 0"
got=$(db_query trace "SELECT s.symbol FROM call_sites s WHERE rank = 0 AND frame = 1
        GROUP BY s.symbol")
expect_equal main "$got" "the callers' caller"
# file:line, resolved by the writer from the program's DWARF line table: the line of each call.
source_file="$SOURCE/tests/programs/call_sites.c"
expected=""
for function in MPI_Allreduce MPI_Barrier MPI_Iallreduce; do
  expected+="$function|call_sites.c|$(grep -n "^ *$function(" "$source_file" | cut -d: -f1)"$'\n'
done
got=$(db_query trace "SELECT DISTINCT c.function, replace(s.file, rtrim(s.file,
        replace(s.file, '/', '')), ''), s.line FROM collectives c JOIN call_sites s
        ON s.rank = c.rank AND s.site = c.site AND s.frame = 0 ORDER BY c.function")
expect_equal "${expected%$'\n'}" "$got" "file and line of each call site"
got=$("$CLI" query trace sites --raw | grep -c "call_sites.c:" || true)
expect_equal 3 "$got" "the sites query shows file:line"
pass "C call sites"

COMMTAP_DIR=fortran COMMTAP_SAMPLE=1 run_preloaded 2 "$PROGRAMS/fortran_use_mpi" >/dev/null
got=$(db_query fortran "SELECT c.function, count(DISTINCT c.site), group_concat(DISTINCT s.symbol)
        FROM collectives c JOIN call_sites s ON s.rank = c.rank AND s.site = c.site AND s.frame = 0
        WHERE c.rank = 0 GROUP BY c.function ORDER BY c.function" | tr '\n' ' ')
expect_equal "MPI_Allreduce|1|MAIN__ MPI_Bcast|1|MAIN__ " "$got" "Fortran call sites"
pass "Fortran call sites: the program unit, one site per call statement"
