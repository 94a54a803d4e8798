# Helpers of the tests in tests/cmake (sourced). Every project is configured
# from a clean build directory against the wfgen installed in $WFGEN_PREFIX
# by the install fixture, never against the build tree.
set -euo pipefail

# configure SRC BUILD [cmake args...]: a clean configure with Ninja (ccache
# when present, so reruns of the suite are quick).
configure() {
  local src=$1 build=$2
  shift 2
  local launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  # The sanitizer build's compiler (tests/cmake/CMakeLists.txt sets it there).
  if [ -n "${WFGEN_TEST_CXX:-}" ]; then launcher+=("-DCMAKE_CXX_COMPILER=$WFGEN_TEST_CXX"); fi
  rm -rf "$build"
  mkdir -p "$(dirname "$build")"
  # Release (the examples' default) at -O1 rather than -O3: the tests check
  # what the projects build and compute, bench/ how fast; -O3 took ~40% of
  # the suite's CPU in these builds (the tiny LM's lm_train.cpp alone 80 s).
  # WFGEN_TEST_EXAMPLE_FLAGS="-O3 -DNDEBUG" ctest -L 'cmake|cross' builds them as shipped.
  cmake -S "$src" -B "$build" -G "${GENERATOR:-Ninja}" -DCMAKE_PREFIX_PATH="$WFGEN_PREFIX" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=${WFGEN_TEST_EXAMPLE_FLAGS:--O1 -DNDEBUG}" "${launcher[@]}" "$@" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; echo "FAIL: configuring $src"; exit 1; }
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
