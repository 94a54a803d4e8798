#!/usr/bin/env bash
# Seeds tests/fuzz/corpus/onnx/: every model of ONNX's backend node tests
# (Debian's libonnx-testdata, node-<test>.onnx), the crafted bad models of
# tests/onnx/bad/ (bad-<case>.onnx) and the hostile ones of
# tests/onnx/hostile_models.py (hostile-<test>.onnx). Inputs the fuzzer
# finds are added beside them by hand (regress-*), and are kept on reseeding.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
corpus="$root/tests/fuzz/corpus/onnx"
data=/usr/share/libonnx-testdata/data/node
mkdir -p "$corpus"
rm -f "$corpus"/node-*.onnx "$corpus"/bad-*.onnx "$corpus"/hostile-*.onnx
for d in "$data"/test_*; do cp "$d/model.onnx" "$corpus/node-$(basename "$d").onnx"; done
for f in "$root"/tests/onnx/bad/*.onnx; do cp "$f" "$corpus/bad-$(basename "$f")"; done
tmp="$(mktemp -d)"
/usr/bin/python3 "$root/tests/onnx/hostile_models.py" "$tmp"
for d in "$tmp"/test_*; do cp "$d/model.onnx" "$corpus/hostile-$(basename "$d").onnx"; done
rm -rf "$tmp"
echo "seed_onnx_corpus: $(ls "$corpus" | wc -l) files in $corpus"
