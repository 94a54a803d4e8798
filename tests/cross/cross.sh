#!/usr/bin/env bash
# The cross-build tests (issue 40; docs/cross-compiling.md), one step each:
#   cross.sh STEP PREFIX SOURCE_DIR WORK [ARGS...]
# PREFIX: wfgen installed for the host (cmake.install); WORK: this suite's
# build folders. Projects use the toolchain files of cmake/toolchains/ as
# installed with the package, and ccache when present.
source "$(dirname "$0")/common.sh"
step=$1 WFGEN_PREFIX=$2 src=$3 work=$4
shift 4
examples=$src/examples
toolchains=$WFGEN_PREFIX/share/wfgen/toolchains
weights=$examples/onnx-mnist/cnn_weights.wfparams
data=$work/fashion-mnist
# The classifier's test images under qemu: a tenth of the set (qemu runs the
# CNN at about a twentieth of native speed); all 10000 natively and in wasm.
qemu_images=1000

build() {  # build SRC BUILD [cmake args...]: configure, build, or fail with the log
  local s=$1 b=$2
  shift 2
  configure "$s" "$b" "$@"
  cmake --build "$b" >"$b.build.log" 2>&1 || { tail -n 60 "$b.build.log"; fail "building $s in $b"; }
}
aarch64_tools() {
  need aarch64-linux-gnu-g++ g++-aarch64-linux-gnu
  need qemu-aarch64 qemu-user
}
wasm_tools() {
  need em++ emscripten
  need node nodejs
}
qemu() { qemu-aarch64 -L /usr/aarch64-linux-gnu "$@"; }
# The aarch64 projects link the runtime the fixture cross.aarch64.runtime
# compiled (tests/cross/runtime), with the headers of the package they use.
# aarch64_runtime: its cmake arguments, in the array rt.
aarch64_runtime() {
  rt=("-DCMAKE_PROJECT_INCLUDE=$work/aarch64-runtime/wfgen_runtime_import.cmake"
    "-DWFGEN_TEST_RUNTIME_INCLUDE=$WFGEN_PREFIX/include")
}
# The projects that compile a runtime (aarch64's once, tests/cross/runtime;
# each wasm project its own, see aarch64-committed-kernels below for why)
# compile it as one translation unit (tests/cross/unity_runtime.cmake).
unity_runtime=("-DCMAKE_PROJECT_INCLUDE=$(cd "$(dirname "$0")" && pwd)/unity_runtime.cmake")
unity_built() {  # unity_built BUILD: the project in BUILD compiled its runtime so
  grep -q "wfgen::runtime as one translation unit" "$1.configure.log" || fail "$1 did not compile its runtime as one unit"
}
shared_runtime() {  # shared_runtime BUILD: the project in BUILD linked it rather than compiling its own
  grep -q "wfgen::runtime for Linux-aarch64 is the suite's" "$1.configure.log" ||
    fail "$1 did not use the runtime of cross.aarch64.runtime"
}
stripped_size() {  # stripped_size STRIP FILE: bytes of FILE without its symbols
  "$1" -o "$2.stripped" "$2" && stat -c %s "$2.stripped"
}

case $step in
  native-classifier)  # the reference the other targets are compared with
    test_set "$data"
    build "$examples/web-classifier" "$work/native"
    "$work/native/fashion_classify" --params "$weights" --data "$data" --classes "$work/classes-native.txt" |
      tee "$work/native.out"
    ;;
  aarch64-runtime)  # wfgen::runtime for aarch64 from the runtime component's sources, once
    aarch64_tools
    WFGEN_PREFIX=$WFGEN_PREFIX-runtime build "$src/tests/cross/runtime" "$work/aarch64-runtime" \
      "-DCMAKE_TOOLCHAIN_FILE=$toolchains/aarch64-linux-gnu.cmake" "${unity_runtime[@]}"
    grep -q 'wfgen: compiling wfgen::runtime for Linux-aarch64' "$work/aarch64-runtime.configure.log" ||
      fail "find_package(wfgen) did not compile the runtime from its sources"
    unity_built "$work/aarch64-runtime"
    file "$work/aarch64-runtime/libwfgen_runtime.a" | grep -q 'ar archive' || fail "no libwfgen_runtime.a"
    aarch64-linux-gnu-objdump -f "$work/aarch64-runtime/libwfgen_runtime.a" | grep -q 'aarch64' ||
      fail "libwfgen_runtime.a is not aarch64 code"
    ;;
  aarch64-kernels)
    aarch64_tools
    aarch64_runtime
    catch_dir=$1 catch_include=$2
    build "$src/tests/cross/kernels" "$work/aarch64-kernels" "-DCMAKE_TOOLCHAIN_FILE=$toolchains/aarch64-linux-gnu.cmake" "${rt[@]}" \
      "-DWFGEN_SOURCE_DIR=$src" "-DCATCH2_CMAKE_DIR=$catch_dir" "-DCATCH2_INCLUDE_DIR=$catch_include"
    shared_runtime "$work/aarch64-kernels"
    file "$work/aarch64-kernels/test_kernels" | grep -q 'ARM aarch64' || fail "test_kernels is not an aarch64 program"
    ctest --test-dir "$work/aarch64-kernels" -j "$(nproc)" --output-on-failure --timeout 600
    ;;
  aarch64-mlp-inference)  # against the host's run of the same example (cmake.example.mlp-inference)
    aarch64_tools
    aarch64_runtime
    host_exe=$1 params=$2
    build "$examples/mlp-inference" "$work/aarch64-mlp" "-DCMAKE_TOOLCHAIN_FILE=$toolchains/aarch64-linux-gnu.cmake" "${rt[@]}"
    shared_runtime "$work/aarch64-mlp"
    grep -q 'no BLAS for Linux-aarch64' "$work/aarch64-mlp.configure.log" ||
      fail "the aarch64 build did not fall back from the blas device to wfgen's GEMM"
    host=$("$host_exe" --params "$params" --limit 2000 | grep accuracy)
    target=$(qemu "$work/aarch64-mlp/mlp_inference" --params "$params" --limit 2000 | grep accuracy)
    echo "host (OpenBLAS):     $host"
    echo "aarch64 (std GEMM):  $target"
    [ "$host" = "$target" ] || fail "the aarch64 build's accuracy differs from the host's"
    echo "aarch64 mlp_inference stripped: $(stripped_size aarch64-linux-gnu-strip "$work/aarch64-mlp/mlp_inference") bytes"
    ;;
  aarch64-classifier)
    aarch64_tools
    aarch64_runtime
    build "$examples/web-classifier" "$work/aarch64-classifier" "-DCMAKE_TOOLCHAIN_FILE=$toolchains/aarch64-linux-gnu.cmake" "${rt[@]}"
    shared_runtime "$work/aarch64-classifier"
    exe=$work/aarch64-classifier/fashion_classify
    qemu "$exe" --params "$weights" --data "$data" --limit $qemu_images --classes "$work/classes-aarch64.txt"
    same_classes "$work/classes-native.txt" "$work/classes-aarch64.txt" $qemu_images
    echo "aarch64 fashion_classify stripped: $(stripped_size aarch64-linux-gnu-strip "$exe") bytes"
    ;;
  aarch64-committed-kernels | wasm-committed-kernels)  # the committed sources, against the runtime component alone
    # wasm compiles its own runtime: the classifier's needs -fexceptions
    # (examples/web-classifier), this one Emscripten's default.
    WFGEN_PREFIX=$WFGEN_PREFIX-runtime
    if [ "$step" = aarch64-committed-kernels ]; then
      aarch64_tools; tc=aarch64-linux-gnu; aarch64_runtime
    else
      wasm_tools; tc=wasm32-emscripten; rt=("${unity_runtime[@]}")
    fi
    build "$examples/committed-kernels" "$work/$step" "-DCMAKE_TOOLCHAIN_FILE=$WFGEN_PREFIX/share/wfgen/toolchains/$tc.cmake" "${rt[@]}"
    if [ "$step" = aarch64-committed-kernels ]; then shared_runtime "$work/$step"; else
      unity_built "$work/$step"
    fi
    ctest --test-dir "$work/$step" --output-on-failure  # committed_kernels_runs, under the emulator
    ;;
  wasm-classifier)
    wasm_tools
    build "$examples/web-classifier" "$work/wasm" "-DCMAKE_TOOLCHAIN_FILE=$toolchains/wasm32-emscripten.cmake" "${unity_runtime[@]}"
    unity_built "$work/wasm"
    node --no-experimental-fetch "$work/wasm/fashion_classify.js" --params "$weights" --data "$data" \
      --classes "$work/classes-wasm.txt" | tee "$work/wasm.out"
    same_classes "$work/classes-native.txt" "$work/classes-wasm.txt"
    native=$(grep -o 'accuracy [0-9.]*' "$work/native.out") wasm=$(grep -o 'accuracy [0-9.]*' "$work/wasm.out")
    [ "$native" = "$wasm" ] || fail "native $native, wasm $wasm"
    echo "ok: $wasm, as natively"
    echo "fashion_classifier.wasm (the page's module, no weights): $(stat -c %s "$work/wasm/fashion_classifier.wasm") bytes"
    ;;
  web-page)
    need chromium chromium
    test_set "$data"
    /usr/bin/python3 "$(dirname "$0")/web_page.py" --site "$work/wasm/web" --data "$data" --images 60 \
      --expect "$work/classes-native.txt" --screenshot "$work/web-classifier.png" --profile "$work/chromium-profile"
    ;;
  *) fail "unknown step $step" ;;
esac
echo "ok: $step"
