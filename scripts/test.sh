#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: install what is missing,
# build, run every test with ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh"
ctest --test-dir "${WFGEN_BUILD_DIR:-$root/build}" -j "$(nproc)" --output-on-failure "$@"
