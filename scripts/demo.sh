#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build
# wfgen, install it into build/install (the CMake package a user gets), then
# build examples/mlp-training against it — wfgen generates the Fashion-MNIST
# MLP's training and prediction classes from mlp.yaml at build time — and
# train it. Arguments go to the example (e.g. --epochs 3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WFGEN_BUILD_DIR:-$root/build}"
bash "$root/scripts/setup.sh" --light
WFGEN_BUILD_DIR="$build" WFGEN_TARGETS="wfgen wfgen_runtime" bash "$root/scripts/build.sh"
cmake --install "$build" --prefix "$build/install" >/dev/null
example="$build/example-mlp-training"
cmake -S "$root/examples/mlp-training" -B "$example" -G Ninja -DCMAKE_PREFIX_PATH="$build/install" >/dev/null
cmake --build "$example"
"$example/mlp_training" "$@"
