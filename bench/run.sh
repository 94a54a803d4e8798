#!/usr/bin/env bash
# Builds wfgen (-O3) and the benchmark suite (-O3 -march=native), runs it at
# 1 and 2 threads, and writes bench/results/latest.md and latest.csv.
#
#   bench/run.sh                 # everything (a few minutes on 2 cores)
#   BENCH_PASSES=5 bench/run.sh  # fewer passes per implementation
#   WFGEN_EXE=/path/to/wfgen bench/run.sh   # use a prebuilt wfgen
#   BENCH_COMPILE_ALL=1 bench/run.sh        # compile-time of every stdlib file, not a subset
#   BENCH_ONLY=relu,gemm bench/run.sh       # some sections only (relu, softmax, layernorm, call, gemm, mlp, cnn, gen);
#                                           # it still writes latest.md/latest.csv (restore them from git)
#   BENCH_OPENBLAS_ENV=keep bench/run.sh    # keep OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE from the environment (below)
#
# Installs nothing beyond what scripts/setup.sh installs.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tool_build="${WFGEN_BENCH_TOOL_BUILD:-$root/build-bench-tool}"
bench_build="${WFGEN_BENCH_BUILD:-$root/build-bench}"
results="$root/bench/results"
start=$(date +%s)

bash "$root/scripts/setup.sh"

if [ -z "${WFGEN_EXE:-}" ]; then
  echo "run.sh: building wfgen (-O3) in $tool_build"
  cmake -S "$root" -B "$tool_build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG" \
    -DWFGEN_WITH_CLANG=OFF -DWFGEN_BUILD_TESTS=OFF >/dev/null
  ninja -C "$tool_build" wfgen >/dev/null
  WFGEN_EXE="$tool_build/wfgen/wfgen"
fi
"$WFGEN_EXE" --version >/dev/null

echo "run.sh: building the benchmarks (-O3 -march=native) in $bench_build"
cmake -S "$root/bench" -B "$bench_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWFGEN_ROOT="$root" \
  -DWFGEN_EXECUTABLE="$WFGEN_EXE" -UBENCH_WFGEN_VERSION >/dev/null
ninja -C "$bench_build" wfgen_bench >/dev/null

# Some of these machines set OPENBLAS_CORETYPE=Haswell (and
# OPENBLAS_L2_SIZE) for every process, since older OpenBLAS builds misbehave
# on their CPUs; the AVX2 kernels then run at half the AVX-512 ones' speed and
# the GEMM rows would compare wfgen with a baseline at half strength. The
# benchmark runs without both, so OpenBLAS picks its kernels from the CPU
# (the report names the core it ran; every GEMM result is checked against a
# reference, so a wrong kernel fails the run). BENCH_OPENBLAS_ENV=keep keeps them.
openblas_env=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
[ "${BENCH_OPENBLAS_ENV:-}" = keep ] && openblas_env=()

mkdir -p "$results"
only=()
[ -n "${BENCH_ONLY:-}" ] && only=(--only "$BENCH_ONLY")
"${openblas_env[@]}" "$bench_build/wfgen_bench" --csv "$results/latest.csv" --md "$results/latest.md" "${only[@]}"

# Vectorisation of the generated relu(a*b+c) kernel: count the vector
# registers in its object file and keep the contiguous inner loop.
obj="$(find "$bench_build" -name 'relu_fma.cpp.o' | head -n 1)"
if [ -n "$obj" ] && command -v objdump >/dev/null; then
  asm="$(objdump -d --no-show-raw-insn "$obj")"
  zmm=$(grep -c 'zmm' <<<"$asm" || true)
  ymm=$(grep -c 'ymm' <<<"$asm" || true)
  # The first loop whose body has a packed FMA: from its vmovups to its jne.
  # (awk reads to the end: exiting early would kill grep with SIGPIPE.)
  loop="$(grep -E '^\s+[0-9a-f]+:' <<<"$asm" | awk '
    done { next }
    /vmovups .*\(.*\),%zmm/ && !inloop { buf = ""; inloop = 1 }
    inloop { buf = buf $0 "\n"; if (/vfmadd...ps.*zmm/) seen = 1; if (/\tj(ne|b|l) /) { if (seen) { printf "%s", buf; done = 1 } inloop = 0; seen = 0 } }')"
  {
    echo
    echo "### Vectorisation of the generated relu_fma kernel"
    echo
    echo "\`objdump -d\` of relu_fma.cpp.o (-O3 -march=native): $zmm instructions use zmm (AVX-512) registers, $ymm use ymm (AVX2)."
    if [ -n "$loop" ]; then
      echo "The contiguous inner loop (16 floats per iteration):"
      echo
      echo '```'
      sed -E 's/<[^>]*>//; s/[[:space:]]+$//' <<<"$loop"
      echo '```'
    fi
  } >>"$results/latest.md"
fi

echo "run.sh: wrote $results/latest.md and latest.csv in $(( $(date +%s) - start )) s"
