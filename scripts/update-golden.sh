#!/usr/bin/env bash
# Accepts an intended change to generated code: regenerates the golden files
# (tests/golden/, examples/committed-kernels/generated/) with the wfgen of
# build/ (or $WFGEN_BUILD_DIR), built first. Review `git diff` and commit it
# with the change. tests/golden/README.md says more.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WFGEN_BUILD_DIR:-$root/build}"
WFGEN_TARGETS=wfgen bash "$root/scripts/build.sh"
bash "$root/tests/golden/golden.sh" update "$build/wfgen/wfgen"
