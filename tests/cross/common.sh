# Helpers of the cross-build tests (sourced): projects configured from clean
# build directories against the wfgen installed for the host by the
# cmake.install fixture, with a toolchain file of cmake/toolchains/.
set -euo pipefail
# shellcheck source=../cmake/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cmake/common.sh"

# ctest's SKIP_RETURN_CODE (tests/cross/CMakeLists.txt): only when a tool is
# absent from this machine; scripts/setup.sh installs them all.
skip() {
  echo "SKIP: $*"
  exit 77
}
need() {  # need PROGRAM PACKAGE
  command -v "$1" >/dev/null || skip "$1 is not installed (Debian's $2; scripts/setup.sh installs it)"
}

# The IDX files of Fashion-MNIST's test set, uncompressed, in DIR (a
# WebAssembly program cannot run gzip; under qemu it could, but reads them
# the same way).
test_set() {
  local dir=$1 src=/usr/share/datasets/fashion-mnist f
  mkdir -p "$dir"
  for f in t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [ ! -s "$dir/$f" ]; then
      if [ -e "$src/$f.gz" ]; then gzip -dc "$src/$f.gz" >"$dir/$f.tmp"; else cp "$src/$f" "$dir/$f.tmp"; fi
      mv "$dir/$f.tmp" "$dir/$f"
    fi
  done
}

# same_classes A B [N]: the first N (all) predicted classes of two runs agree.
same_classes() {
  local a b
  a=$(tr -d '\n' <"$1") b=$(tr -d '\n' <"$2")
  if [ -n "${3:-}" ]; then a=${a:0:$3} b=${b:0:$3}; fi
  [ -n "$a" ] && [ ${#a} = ${#b} ] || fail "$1 and $2 hold ${#a} and ${#b} classes"
  if [ "$a" != "$b" ]; then
    local i
    for ((i = 0; i < ${#a}; i++)); do
      [ "${a:i:1}" = "${b:i:1}" ] || fail "image $i: class ${a:i:1} in $1, ${b:i:1} in $2"
    done
  fi
  echo "ok: the same class for each of the ${#a} images in $1 and $2"
}
