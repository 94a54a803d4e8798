#!/usr/bin/env bash
# Configures and builds wfgen with Ninja (and ccache) into build/ (or
# $WFGEN_BUILD_DIR). Arguments are passed to cmake's configure step;
# WFGEN_TARGETS="a b" builds only those targets.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WFGEN_BUILD_DIR:-$root/build}"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
if [ -n "${WFGEN_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$(nproc)" --target $WFGEN_TARGETS
else
  cmake --build "$build" -j "$(nproc)"
fi
