#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (CI runs it: .ci/run). A second build dir (build-asan/, or
# $WFGEN_ASAN_BUILD_DIR) configured with Clang and -DWFGEN_SANITIZE=ON, so
# wfgen, the runtime, every test and the generated code of the test models
# and kernels carry the same flags; wfgen itself runs under the sanitizers
# when it generates them. The cmake.* tests install this build and build the
# example projects against it: the installed runtime passes the flags on, so
# the examples' generated code is compiled with them too. The same dir builds
# the libFuzzer targets (WFGEN_FUZZ=ON), which CI then runs with
# scripts/fuzz.sh.
#
#   bash scripts/sanitize.sh                 # the whole suite
#   WFGEN_SANITIZE_SCOPE=core bash scripts/sanitize.sh
#       # a quicker subset: the inputs-facing stages and the runtime (spec,
#       # subscript, body, expr, runtime, models, no-exceptions models,
#       # custom kernels, as_node, fuzz corpus replays)
#   WFGEN_SKIP_SANITIZE=1 ...                # (CI) skip this step
# Extra arguments go to ctest.
#
# Left out of every scope, as unfit for the sanitizers:
#   test_cppkernel:parse time of one kernel file  a timing check (under 2 s
#       per file, about 0.2 s normally): libclang, which does the work, runs
#       several times slower with the sanitizers' allocator. The same files
#       are read by the other test_cppkernel tests.
#   cmake.example.* but mlp-training, cmake.incremental*, cmake.init,
#   cmake.werror, cmake.drift, cmake.ldd  example projects built against
#       the installed package: what they check (packaging, find_package,
#       incremental rebuilds, the examples learning) does not depend on the
#       compiler's instrumentation, and the normal build runs them all. The
#       code they generate is compiled under the sanitizers in the tree: the
#       tiny LM, CNN and RNN specs of examples/ by tests/tiny-lm, tests/cnn
#       and tests/rnn, the IDX reader of examples/common by tests/cnn,
#       custom C++ kernels by tests/projects, ONNX imports by tests/onnx.
#       Rebuilding them here took ~600 of this step's ~810 s of CPU in
#       ctest. cmake.example.mlp-training (the main job's example, through
#       the installed package, its flags passed on) and cmake.cli (wfgen's
#       command line, bad input included) still run here.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${WFGEN_SKIP_SANITIZE:-}" ]; then
  echo "sanitize: skipped (WFGEN_SKIP_SANITIZE is set)"
  exit 0
fi
build="${WFGEN_ASAN_BUILD_DIR:-$root/build-asan}"
scope="${WFGEN_SANITIZE_SCOPE:-full}"
cxx="${WFGEN_SANITIZE_CXX:-clang++-14}"
if ! command -v "$cxx" >/dev/null; then
  echo "sanitize: $cxx is missing (apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 1
fi

# Leaks of the LLVM/Clang libraries wfgen reads C++ kernels with are theirs.
export LSAN_OPTIONS="suppressions=$root/tests/sanitize/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
# allocator_may_return_null: an allocation too large for ASan fails as it
# would without it (the runtime reports OutOfMemory) instead of aborting.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
exclude="^test_cppkernel:parse time of one kernel file$"
exclude+="|^cmake\.example\.(mlp-inference|cnn-training|rnn|tiny-lm|onnx-mnist|custom-kernel|committed-kernels)"
exclude+="|^cmake\.(incremental|init$|werror$|drift$|ldd$)"

case "$scope" in
  full)
    targets=""
    include=""
    ;;
  core)
    targets="wfgen test_spec test_subscript test_body test_expr test_runtime test_models test_noexcept test_custom_kernels
             test_as_node fuzz_subscript_replay fuzz_expr_replay fuzz_body_replay fuzz_spec_replay fuzz_trace_replay
             fuzz_params_replay"
    include="^(test_spec|test_subscript|test_body|test_expr|test_runtime|test_models|test_custom_kernels|test_as_node|fuzz_replay)[:_]|^test_noexcept$"
    ;;
  *)
    echo "sanitize: WFGEN_SANITIZE_SCOPE must be full or core, not '$scope'" >&2
    exit 2
    ;;
esac

# A build dir configured with another compiler is configured afresh.
if [ -f "$build/CMakeCache.txt" ] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=$(command -v "$cxx")$" "$build/CMakeCache.txt"; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
# Clang at -O0 with line tables: reports keep file:line stacks, and the
# whole tree compiles in 40% of the CPU time of GCC at -O1 -g1 (730 s
# against 1800 s); the tests run about as fast. WFGEN_TEST_CODE_OPT brings the
# generated test code to -O0 (as the normal build: tests/CMakeLists.txt). lld links the
# big -O0 binaries in a third of the time of ld.bfd, when it is installed.
link=()
if [ -x "$("$cxx" -print-prog-name=ld.lld)" ]; then link=("-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld"); fi
start=$(date +%s)
CXX="$cxx" WFGEN_BUILD_DIR="$build" WFGEN_TARGETS="$targets" WFGEN_FAST_COLD_BUILD="${WFGEN_FAST_COLD_BUILD:-1}" bash "$root/scripts/build.sh" \
  -DWFGEN_SANITIZE=ON -DWFGEN_FUZZ=ON -DCMAKE_CXX_COMPILER="$(command -v "$cxx")" \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only -DNDEBUG" -DWFGEN_TEST_CODE_OPT=-O0 "${link[@]}"
built=$(date +%s)
if [ -n "$include" ]; then
  ctest --test-dir "$build" -j "$(nproc)" --output-on-failure -R "$include" -E "$exclude" "$@"
else
  ctest --test-dir "$build" -j "$(nproc)" --output-on-failure -E "$exclude" "$@"
fi
echo "sanitize ($scope): built in $((built - start))s, tests ran in $(($(date +%s) - built))s"
