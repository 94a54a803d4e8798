#!/usr/bin/env bash
# Configures and builds wfgen with Ninja (and ccache) into build/ (or
# $WFGEN_BUILD_DIR), on every core. Arguments are passed to cmake's
# configure step (they come last, so they override the flags below);
# WFGEN_TARGETS="a b" builds only those targets.
#
# WFGEN_DEBUG_INFO=0 (.ci/run sets it) builds the same -O2 code without -g:
# about a third less compile time and much smaller objects to link. The
# default keeps RelWithDebInfo's -g for debugging a failing test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WFGEN_BUILD_DIR:-$root/build}"
if [ "${WFGEN_DEBUG_INFO:-1}" = 0 ]; then flags="-O2 -DNDEBUG"; else flags="-O2 -g -DNDEBUG"; fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" "$@" >/dev/null
if [ -n "${WFGEN_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$(nproc)" --target $WFGEN_TARGETS
else
  cmake --build "$build" -j "$(nproc)"
fi
