#!/usr/bin/env bash
# Where the time of a generated kernel goes: runs sections of the benchmark
# under `perf record` (timer sampling; no hardware counters needed, so it
# works in a virtual machine) and prints, for each kernel named, the share of
# its samples in each of its innermost loops with their main instructions
# (bench/profile_loops.py). docs/performance-history.md quotes its output.
#
#   bench/profile.sh softmax,layernorm fused_softmax fused_layernorm
#   BENCH_PROFILE_THREADS=2 bench/profile.sh relu fused_mul_add_relu
#
# Needs a built bench (bench/run.sh) and perf (apt-get install linux-perf).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bench_build="${WFGEN_BENCH_BUILD:-$root/build-bench}"
sections="${1:?usage: bench/profile.sh SECTIONS KERNEL...}"
shift
command -v perf >/dev/null || { echo "profile.sh: perf is missing (apt-get install linux-perf)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
perf record -q -o "$work/perf.data" "$bench_build/wfgen_bench" --only "$sections" \
  --threads "${BENCH_PROFILE_THREADS:-1}" --csv "$work/out.csv" --md "$work/out.md" >/dev/null 2>&1
echo "## Symbols (share of all samples)"
perf report -i "$work/perf.data" --no-children --sort symbol 2>/dev/null | grep -v '^#' | grep '%' | head -n 15 | cut -c1-140 || true
for kernel in "$@"; do
  # The hottest symbol that holds the kernel's loops: the kernel, the lambda
  # its LoopNest runs, or the LoopNest::chunk that lambda was inlined into.
  symbol="$(perf report -i "$work/perf.data" --no-children --sort symbol 2>/dev/null | grep -F "::${kernel}_" |
    sed -E 's/^.*\[\.\] //; s/[[:space:]]+-[[:space:]]+-[[:space:]]*$//; s/[[:space:]]*$//' | head -n 1 || true)"  # (head closes the pipe early)
  echo
  echo "## $kernel: share of its samples per innermost loop"
  if [ -z "$symbol" ]; then echo "(no samples)"; continue; fi
  echo "$symbol" | cut -c1-140
  python3 "$root/bench/profile_loops.py" "$work/perf.data" "$symbol"
done
