#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: install what is missing,
# build, run every test with ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
start=$(date +%s)
# Without -g unless asked (WFGEN_DEBUG_INFO=1): the same code, a third
# less to compile; scripts/build.sh keeps -g for debugging a failing test.
# WFGEN_FAST_COLD_BUILD: wfgen's shared headers precompiled, the runtime one
# translation unit (scripts/build.sh).
# WFGEN_OPT: wfgen and its runtime at -O1 rather than -O2: the suite checks
# what they do, not how fast (bench/ builds its own), and -O1 compiles
# wfgen's files in ~3/4 of -O2's CPU (docs/contributing.md); the generated
# code is the same bytes (ctest -R golden). CI (.ci/run) sets -O2: the
# product as users build it is tested there.
WFGEN_DEBUG_INFO="${WFGEN_DEBUG_INFO:-0}" WFGEN_FAST_COLD_BUILD="${WFGEN_FAST_COLD_BUILD:-1}" WFGEN_OPT="${WFGEN_OPT:--O1}" \
  bash "$root/scripts/build.sh"
built=$(date +%s)
ctest --test-dir "${WFGEN_BUILD_DIR:-$root/build}" -j "$(nproc)" --output-on-failure "$@"
echo "test: built in $((built - start))s, tests ran in $(($(date +%s) - built))s"
