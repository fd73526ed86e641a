#!/usr/bin/env bash
# Host MPI_Pack throughput, commtap's packer vs MPICH's PMPI_Pack in the same process
# (docs/benchmarks.md).
#
#   bench/pack.sh [build dir] [max object MiB]
set -euo pipefail
build=${1:-build}
lib=$(realpath "$build/interpose/libcommtap.so")
COMMTAP_DIR=$(mktemp -d) timeout 600 mpiexec -bind-to core -n 1 -genv LD_PRELOAD "$lib" \
  "$build/bench/pack" "${2:-64}"
