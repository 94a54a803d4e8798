#!/usr/bin/env bash
# Configures and builds wfgen with Ninja (and ccache) into build/ (or
# $WFGEN_BUILD_DIR), on every core. Arguments are passed to cmake's
# configure step (they come last, so they override the flags below);
# WFGEN_TARGETS="a b" builds only those targets.
#
# WFGEN_DEBUG_INFO=0 (.ci/run sets it) builds the same -O2 code without -g:
# about a third less compile time and much smaller objects to link. The
# default keeps RelWithDebInfo's -g for debugging a failing test.
#
# WFGEN_FAST_COLD_BUILD=1 (scripts/test.sh and scripts/sanitize.sh set it)
# precompiles the headers wfgen's files share and compiles the runtime as one
# translation unit: a build from scratch compiles less; the default compiles
# each file as written (the top-level CMakeLists.txt says why).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WFGEN_BUILD_DIR:-$root/build}"
# WFGEN_OPT: the optimisation of wfgen and its runtime, -O2 (what users
# build) unless set; scripts/test.sh sets -O1 (it says why).
opt="${WFGEN_OPT:--O2}"
if [ "${WFGEN_DEBUG_INFO:-1}" = 0 ]; then flags="$opt -DNDEBUG"; else flags="$opt -g -DNDEBUG"; fi
if [ "${WFGEN_FAST_COLD_BUILD:-0}" = 1 ]; then fast=ON; else fast=OFF; fi
# lld (or else gold) links: ld.bfd spent ~2 s of CPU on each of the ~50
# executables (test_spec: 1.94 s; gold 0.42 s, lld 0.22 s). The same objects
# and libraries; only how they are put together is faster.
link=()
for ld in lld gold; do
  if command -v "ld.$ld" >/dev/null; then
    link=("-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=$ld")
    break
  fi
done
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" \
  "-DWFGEN_FAST_COLD_BUILD=$fast" "${link[@]}" "$@" >/dev/null
if [ -n "${WFGEN_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$(nproc)" --target $WFGEN_TARGETS
else
  cmake --build "$build" -j "$(nproc)"
fi
