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
#   WFGEN_SKIP_FUZZ=1 ...                          # (CI) skip this step
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${WFGEN_FUZZ_BUILD_DIR:-$root/build-fuzz}"
seconds="${FUZZ_SECONDS:-30}"
targets="${FUZZ_TARGETS:-subscript expr body spec trace params}"
if [ -n "${WFGEN_SKIP_FUZZ:-}" ]; then
  echo "fuzz: skipped (WFGEN_SKIP_FUZZ is set)"
  exit 0
fi
if ! command -v clang++-14 >/dev/null; then
  echo "fuzz: clang++-14 is missing (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi

# Every stage is instrumented for coverage and built with ASan + UBSan; the
# C++ kernel reader (Clang libTooling) is left out: no target needs it.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -O1 -g"
CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS="$flags" -DWFGEN_FUZZ=ON -DWFGEN_WITH_CLANG=OFF >/dev/null
fuzzers=""
for t in $targets; do fuzzers="$fuzzers fuzz_$t"; done
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" --target $fuzzers

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=""
for t in $targets; do
  work="$build/corpus/$t"
  findings="$build/findings/$t"
  mkdir -p "$work" "$findings"
  echo "fuzz: $t for ${seconds}s"
  # The first folder receives new inputs; the committed corpus is only read.
  if ! (cd "$findings" && "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
          -print_final_stats=1 "$work" "$root/tests/fuzz/corpus/$t" 2>"$build/fuzz_$t.log"); then
    echo "fuzz: $t FOUND A PROBLEM; see $build/fuzz_$t.log and $findings" >&2
    tail -n 40 "$build/fuzz_$t.log" >&2
    failed="$failed $t"
  else
    grep -E "^stat::number_of_executed_units|^#[0-9]+.*DONE" "$build/fuzz_$t.log" | tail -n 2 || true
  fi
done
if [ -n "$failed" ]; then
  echo "fuzz: findings in:$failed" >&2
  exit 1
fi
echo "fuzz: no findings (${seconds}s per target)"
