#!/usr/bin/env bash
# Installs what wfgen needs from Debian 12's packages, only what is missing.
# Safe to run again; needs root (or sudo) only when something is missing.
#   bash scripts/setup.sh          everything the test suite needs (scripts/test.sh)
#   bash scripts/setup.sh --light  without the cross toolchains, emscripten,
#                                  Chromium and PyTorch (scripts/demo.sh: the main job needs none)
set -euo pipefail
light=0
if [ "${1:-}" = --light ]; then light=1; fi

packages=(
  cmake ninja-build ccache g++ clang-14 pkg-config
  libyaml-cpp-dev libcli11-dev catch2 libvalijson-dev nlohmann-json3-dev
  libopenblas-dev zlib1g-dev libonnx-dev libprotobuf-dev libonnx-testdata python3 python3-onnx
  libclang-cpp14-dev libclang-14-dev llvm-14-dev libclang-rt-14-dev lld-14
  dataset-fashion-mnist
)
# Cross builds (tests/cross, docs/cross-compiling.md): aarch64 under qemu,
# WebAssembly under node, the web page in headless Chromium driven through
# its DevTools protocol. About 300 MB to download, 1 min to install.
cross_packages=(g++-aarch64-linux-gnu qemu-user emscripten nodejs chromium python3-websocket)
if [ "$light" = 0 ]; then packages+=("${cross_packages[@]}"); fi
# Real PyTorch exports (tests/onnx/export_models.py, ctest onnx.exports):
# torch writes the models and their expected outputs. Not for the main job.
if [ "$light" = 0 ]; then packages+=(python3-torch python3-torchvision); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
