#!/usr/bin/env bash
# The test suite under AddressSanitizer + UndefinedBehaviorSanitizer: a
# second build dir (build-asan/, or $WFGEN_ASAN_BUILD_DIR) configured with
# -DWFGEN_SANITIZE=ON, so wfgen, the runtime, every test and the generated
# code of the test models and kernels (compiled in the same build) carry the
# same flags; wfgen itself runs under the sanitizers when it generates them.
#
#   bash scripts/sanitize.sh                 # the whole suite
#   WFGEN_SANITIZE_SCOPE=core bash scripts/sanitize.sh
#       # only the inputs-facing stages and the runtime: spec, subscript, body,
#       # expr, runtime, models, no-exceptions models, custom kernels, as_node, fuzz corpus replays
#   WFGEN_SKIP_SANITIZE=1 ...                # (CI) skip this step
# Extra arguments go to ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${WFGEN_SKIP_SANITIZE:-}" ]; then
  echo "sanitize: skipped (WFGEN_SKIP_SANITIZE is set)"
  exit 0
fi
build="${WFGEN_ASAN_BUILD_DIR:-$root/build-asan}"
scope="${WFGEN_SANITIZE_SCOPE:-full}"

# Leaks of the LLVM/Clang libraries wfgen reads C++ kernels with are theirs.
export LSAN_OPTIONS="suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

case "$scope" in
  full)
    targets=""
    include=""
    ;;
  core)
    targets="wfgen test_spec test_subscript test_body test_expr test_runtime test_models test_noexcept test_custom_kernels
             test_as_node fuzz_subscript_replay fuzz_expr_replay fuzz_body_replay fuzz_spec_replay fuzz_trace_replay
             fuzz_params_replay"
    # Left out (they run in the full scope): test_cppkernel (Clang
    # libTooling), test_kernels (every standard kernel; the models' kernels
    # are compiled and run in test_models), test_autodiff (70 more generated
    # files to compile under ASan) and the cmake.* tests (they install and build the
    # examples: a build-system test, not a memory one).
    include="^(test_spec|test_subscript|test_body|test_expr|test_runtime|test_models|test_custom_kernels|test_as_node|fuzz_replay)[:_]|^test_noexcept$"
    ;;
  *)
    echo "sanitize: WFGEN_SANITIZE_SCOPE must be full or core, not '$scope'" >&2
    exit 2
    ;;
esac

start=$(date +%s)
# -O1 -g1, as the sanitizers' docs advise: reports keep file:line stacks,
# and the build takes about half the time of RelWithDebInfo's -O2 -g.
WFGEN_BUILD_DIR="$build" WFGEN_TARGETS="$targets" bash "$root/scripts/build.sh" -DWFGEN_SANITIZE=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
built=$(date +%s)
if [ -n "$include" ]; then
  ctest --test-dir "$build" -j "$(nproc)" --output-on-failure -R "$include" "$@"
else
  ctest --test-dir "$build" -j "$(nproc)" --output-on-failure "$@"
fi
echo "sanitize ($scope): built in $((built - start))s, tests ran in $(($(date +%s) - built))s"
