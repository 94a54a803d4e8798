#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build
# wfgen, generate the Fashion-MNIST MLP from examples/fashion-mnist/mlp.yaml,
# compile it, fit it and classify the test set.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WFGEN_BUILD_DIR:-$root/build}"
bash "$root/scripts/setup.sh"
WFGEN_BUILD_DIR="$build" WFGEN_TARGETS="wfgen" bash "$root/scripts/build.sh"
example="$build/example-fashion-mnist"
cmake -S "$root/examples/fashion-mnist" -B "$example" -G Ninja -DWFGEN_EXECUTABLE="$build/wfgen/wfgen" >/dev/null
cmake --build "$example"
"$example/fashion_mnist"
