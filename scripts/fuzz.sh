#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with Clang into build-fuzz/ (or
# $WFGEN_FUZZ_BUILD_DIR) and runs each for FUZZ_SECONDS (default 30) on its
# committed corpus (tests/fuzz/corpus/<target>/). New inputs go to a scratch
# corpus under the build dir; a crash, hang, leak or sanitizer report is
# written as build-fuzz/findings/<target>/crash-* and fails the script: fix
# it and add the input to tests/fuzz/corpus/<target>/ as a regression (the
# normal build replays that folder in ctest: fuzz_replay:<target>).
#
#   FUZZ_SECONDS=300 bash scripts/fuzz.sh          # every target, 5 minutes each
#   FUZZ_TARGETS="spec expr" bash scripts/fuzz.sh  # some targets
#   FUZZ_JOBS=1 bash scripts/fuzz.sh               # one at a time (default: one per core)
#   WFGEN_FUZZ_BUILD_DIR=build-asan bash scripts/fuzz.sh
#       # the fuzzers of scripts/sanitize.sh's build dir (CI does this: no
#       # third build; that dir is -O0, this script's own one -O1)
#   WFGEN_SKIP_FUZZ=1 ...                          # (CI) skip this step
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WFGEN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${FUZZ_SECONDS:-30}"
targets="${FUZZ_TARGETS:-subscript expr body spec trace params onnx}"
if [ -n "${WFGEN_SKIP_FUZZ:-}" ]; then
  echo "fuzz: skipped (WFGEN_SKIP_FUZZ is set)"
  exit 0
fi
if ! command -v clang++-14 >/dev/null; then
  echo "fuzz: clang++-14 is missing (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi

if grep -q "^WFGEN_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null &&
   grep -q "^WFGEN_FUZZ:BOOL=ON" "$build/CMakeCache.txt"; then
  # scripts/sanitize.sh's build dir: its stages are instrumented for
  # coverage (tests/fuzz/CMakeLists.txt) and the fuzzers are built there.
  echo "fuzz: the fuzzers of the sanitizer build in $build"
else
  # Every stage is instrumented for coverage and built with ASan + UBSan; the
  # C++ kernel reader (Clang libTooling) is left out: no target needs it.
  # -g1: line tables only, enough for file:line in a finding's stack.
  flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g1"
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS="$flags" -DWFGEN_FUZZ=ON -DWFGEN_WITH_CLANG=OFF >/dev/null
fi
fuzzers=""
for t in $targets; do fuzzers="$fuzzers fuzz_$t"; done
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" --target $fuzzers

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# The sanitizer build links the LLVM/Clang libraries (unused by the fuzzers).
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0}"
# One fuzzer per core at a time (each is single-threaded and still gets its
# FUZZ_SECONDS); the results are printed in the order of $targets.
fuzz_one() {
  local t=$1 work="$build/corpus/$1" findings="$build/findings/$1"
  mkdir -p "$work" "$findings"
  touch "$build/findings/.start-$1"  # findings of earlier runs stay, but are not reported
  # Per-target options: ONNX models are binary and the seeds are at most 8 KiB;
  # longer inputs only make each run slower.
  local extra=()
  [ "$t" = onnx ] && extra=(-max_len=16384)
  # The first folder receives new inputs; the committed corpus is only read.
  (cd "$findings" && "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
     -print_final_stats=1 "${extra[@]}" "$work" "$root/tests/fuzz/corpus/$t" 2>"$build/fuzz_$t.log")
}
report() {  # report TARGET STATUS
  echo "fuzz: $1 for ${seconds}s"
  if [ "$2" != 0 ]; then
    echo "fuzz: $1 FOUND A PROBLEM; see $build/fuzz_$1.log and $build/findings/$1" >&2
    tail -n 40 "$build/fuzz_$1.log" >&2
    # The input itself, so that a CI log is enough to reproduce it.
    local f
    for f in "$build/findings/$1"/*; do
      [ -f "$f" ] && [ "$f" -nt "$build/findings/.start-$1" ] || continue
      echo "fuzz: input $(basename "$f") ($(wc -c <"$f") bytes), base64 (base64 -d >tests/fuzz/corpus/$1/NAME):" >&2
      base64 -w 76 "$f" | head -n 200 >&2
      echo "fuzz: reproduce with $build/tests/fuzz/fuzz_$1 $f" >&2
    done
    failed="$failed $1"
  else
    grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$build/fuzz_$1.log" | tail -n 2 || true
  fi
}
jobs="${FUZZ_JOBS:-$(nproc)}"
failed=""
# shellcheck disable=SC2086
set -- $targets
while [ $# -gt 0 ]; do
  batch=()
  pids=()
  while [ $# -gt 0 ] && [ ${#batch[@]} -lt "$jobs" ]; do
    fuzz_one "$1" &
    pids+=($!)
    batch+=("$1")
    shift
  done
  for i in "${!batch[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    report "${batch[$i]}" "$status"
  done
done
if [ -n "$failed" ]; then
  echo "fuzz: findings in:$failed" >&2
  exit 1
fi
echo "fuzz: no findings (${seconds}s per target)"
