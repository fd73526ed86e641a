#!/usr/bin/env bash
# `cmake --install` lays out the library, the CLI, the schema and examples, a CMake package and
# a pkg-config file; the installed CLI finds the installed library by itself, and a CMake
# project can find_package(commtap).
source "$(dirname "$0")/common.sh"

cmake --install "$BUILD" --prefix "$WORK/prefix" >install.log
libdir=$(ls -d "$WORK"/prefix/lib* | head -1)
for file in "$libdir/libcommtap.so" bin/commtap share/commtap/schema.sql \
  share/commtap/examples/toy_train.cpp include/commtap.h; do
  case $file in /*) path=$file ;; *) path=$WORK/prefix/$file ;; esac
  [ -e "$path" ] || fail "missing after install: $file"
done
[ -f "$libdir/cmake/commtap/commtapConfig.cmake" ] || fail "no CMake package"
[ -f "$libdir/pkgconfig/commtap.pc" ] || fail "no pkg-config file"
PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --libs commtap | grep -q -- "-lcommtap" ||
  fail "pkg-config does not describe the library"
# Captured first: `grep -q` would close the pipe at the first match (COMMTAP_YIELD is the
# second setting) and pipefail would count the CLI's SIGPIPE as a failure.
env -u COMMTAP_LIBRARY "$WORK/prefix/bin/commtap" settings >settings.txt ||
  fail "installed CLI cannot list the settings"
grep -q "^COMMTAP_YIELD" settings.txt || fail "installed CLI's settings lack COMMTAP_YIELD"
pass "install layout"

mkdir consumer
cat >consumer/CMakeLists.txt <<'END'
cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES C)
find_package(commtap REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE commtap::commtap)
END
cat >consumer/main.c <<'END'
#include <commtap.h>
#include <stdio.h>
int main(void) { printf("%s\n", commtap_version()); return 0; }
END
cmake -S consumer -B consumer/build -DCMAKE_PREFIX_PATH="$WORK/prefix" >consumer.log 2>&1 ||
  { cat consumer.log >&2; fail "find_package(commtap) failed"; }
cmake --build consumer/build >>consumer.log 2>&1 || { cat consumer.log >&2; fail "consumer build"; }
expect_equal "0.1.0" "$(LD_LIBRARY_PATH=$libdir consumer/build/consumer)" "linked version"
pass "find_package(commtap) and link"
