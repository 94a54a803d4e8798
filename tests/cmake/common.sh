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
  cmake -S "$src" -B "$build" -G "${GENERATOR:-Ninja}" -DCMAKE_PREFIX_PATH="$WFGEN_PREFIX" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF "${launcher[@]}" "$@" >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; echo "FAIL: configuring $src"; exit 1; }
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
