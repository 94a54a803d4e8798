#!/usr/bin/env bash
# Golden generated files: the C++ that wfgen writes for a fixed set of specs,
# committed, so that a change to the generator shows what it changes in
# generated code (tests/golden/README.md).
#
#   golden.sh check WFGEN OUT   regenerate every case into OUT, diff with the committed files (ctest `golden`)
#   golden.sh update WFGEN      regenerate into the committed folders (scripts/update-golden.sh)
#
# Each case runs wfgen from the spec's folder with the spec's file name, as
# the examples' CMake projects do, so no path of this machine enters a file.
set -euo pipefail
mode=${1:-} wfgen=${2:-} out=${3:-}
case "$mode" in
  check) [ -n "$out" ] || { echo "usage: golden.sh check WFGEN OUT" >&2; exit 2; } ;;
  update) ;;
  *) echo "usage: golden.sh check WFGEN OUT | golden.sh update WFGEN" >&2; exit 2 ;;
esac
[ -x "$wfgen" ] || { echo "golden.sh: no wfgen executable at '$wfgen'" >&2; exit 2; }
wfgen=$(cd "$(dirname "$wfgen")" && pwd)/$(basename "$wfgen")
if [ "$mode" = check ]; then mkdir -p "$out" && out=$(cd "$out" && pwd); fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
golden="$root/tests/golden"
# Imported ONNX models: node tests of ONNX's own test data (Debian's
# libonnx-testdata), no Python needed.
onnx_tests=/usr/share/libonnx-testdata/data/node

failed=()
# The folder a case's files are committed in.
committed_dir() {
  if [ "$1" = committed-kernels ]; then echo "$root/examples/committed-kernels/generated"; else echo "$golden/$1"; fi
}

# gen_case NAME SPEC_DIR SPEC NAMESPACE [KEEP...]: `wfgen gen` into the
# case's folder; KEEP: files of SPEC_DIR kept beside the generated ones.
gen_case() {
  local name=$1 dir=$2 spec=$3 ns=$4 dest
  shift 4
  if [ "$mode" = update ]; then dest=$(committed_dir "$name"); else dest="$out/$name"; fi
  rm -rf "$dest.tmp"
  (cd "$dir" && "$wfgen" -q gen "$spec" -o "$dest.tmp" --namespace "$ns")
  for f in "$@"; do cp "$dir/$f" "$dest.tmp/$f"; done
  rm -rf "$dest"
  mv "$dest.tmp" "$dest"
  [ "$mode" = check ] || return 0
  if ! diff -ruN "$(committed_dir "$name")" "$dest"; then failed+=("$name"); fi
}

# import_case NAME TEST: `wfgen import` of the ONNX node test TEST writes
# the spec, committed with the C++ (a change to the importer shows too),
# then `wfgen gen` as above.
import_case() {
  local name=$1 model="$onnx_tests/$2/model.onnx" work
  if ! "$wfgen" import --help >/dev/null 2>&1 || [ ! -f "$model" ]; then
    echo "golden: skipped $name (wfgen built without ONNX import, or no $model)"
    return 0
  fi
  work=$(mktemp -d)
  cp "$model" "$work/$name.onnx"
  (cd "$work" && "$wfgen" -q import "$name.onnx" -o "$name.yaml" --params "$name.wfparams")
  gen_case "$name" "$work" "$name.yaml" imported "$name.yaml"
  rm -rf "$work"
}

gen_case mlp-training "$root/examples/mlp-training" mlp.yaml fashion
gen_case cnn-training "$root/examples/cnn-training" cnn.yaml fashion_cnn
gen_case tiny-lm "$root/examples/tiny-lm" tiny_lm.yaml lm_example
gen_case committed-kernels "$root/examples/committed-kernels" model.yaml committed
# Mean-variance normalisation as a graph of 7 operator types (constants,
# reductions, broadcasts: fused), and a strided, padded convolution.
import_case onnx-mvn test_mvn_expanded
import_case onnx-conv test_conv_with_strides_padding

if [ "$mode" = update ]; then
  echo "golden: regenerated; review with git diff -- tests/golden examples/committed-kernels/generated, commit with your change"
elif [ ${#failed[@]} -gt 0 ]; then
  echo "golden: generated code differs from the committed files in: ${failed[*]}"
  echo "golden: if the change is intended, accept it with scripts/update-golden.sh and commit the diff"
  exit 1
else
  echo "golden: every case byte-identical"
fi
