#!/usr/bin/env bash
# Configures, builds and runs one example project against the installed wfgen,
# from a clean build directory; with --ctest also runs the example's own tests.
#   example.sh PREFIX SRC BUILD EXE [--ctest] [-- ARGS for EXE...]
source "$(dirname "$0")/common.sh"
WFGEN_PREFIX=$1 src=$2 build=$3 exe=$4
shift 4
run_ctest=0
if [ "${1:-}" = --ctest ]; then run_ctest=1; shift; fi
if [ "${1:-}" = -- ]; then shift; fi
# shellcheck disable=SC2086
configure "$src" "$build" ${EXTRA_CMAKE_ARGS:-}
if [ -n "${EXPECT_CROSSCOMPILING:-}" ]; then
  grep -q 'set(CMAKE_CROSSCOMPILING "TRUE")' "$build"/CMakeFiles/*/CMakeSystem.cmake || fail "$build is not a cross build"
fi
cmake --build "$build" || fail "building $src"
"$build/$exe" "$@" || fail "$build/$exe exited with $?"
if [ $run_ctest = 1 ]; then
  ctest --test-dir "$build" --output-on-failure || fail "the tests of $src"
fi
echo "ok: $src"
