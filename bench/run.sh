#!/usr/bin/env bash
# Builds wfgen (-O3) and the benchmark suite (-O3 -march=native), runs it at
# 1 and 2 threads, and writes bench/results/latest.md and latest.csv.
#
#   bench/run.sh                 # everything (a few minutes on 2 cores)
#   BENCH_PASSES=5 bench/run.sh  # fewer passes per implementation
#   WFGEN_EXE=/path/to/wfgen bench/run.sh   # use a prebuilt wfgen
#   BENCH_COMPILE_ALL=1 bench/run.sh        # compile-time of every stdlib file, not a subset
#   BENCH_ONLY=relu,gemm bench/run.sh       # some sections only (relu, softmax, layernorm, call, gemm, mlp, cnn, gen,
#                                           # torch: the PyTorch peer section, when python3-torch is installed);
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

# BENCH_ONLY's section `torch` is this script's (below), not wfgen_bench's;
# BENCH_ONLY=torch alone builds and runs no wfgen_bench.
torch_section=1
run_bench=1
bench_only="${BENCH_ONLY:-}"
if [ -n "$bench_only" ]; then
  [[ ",$bench_only," == *,torch,* ]] || torch_section=0
  bench_only="$(tr ',' '\n' <<<"$bench_only" | grep -vx torch | paste -sd, || true)"
  [ -n "$bench_only" ] || run_bench=0
fi

echo "run.sh: building the benchmarks (-O3 -march=native) in $bench_build"
cmake -S "$root/bench" -B "$bench_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWFGEN_ROOT="$root" \
  -DWFGEN_EXECUTABLE="$WFGEN_EXE" -UBENCH_WFGEN_VERSION -DBENCH_PEER_DIR= >/dev/null
[ "$run_bench" = 0 ] || ninja -C "$bench_build" wfgen_bench >/dev/null

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
if [ "$run_bench" = 0 ]; then
  printf 'workload,impl,threads,median_s,p10_s,p90_s,baseline,ratio_to_baseline,throughput\n' >"$results/latest.csv"
  printf '# wfgen benchmarks\n\nRun %s by `BENCH_ONLY=%s bench/run.sh`.\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$BENCH_ONLY" >"$results/latest.md"
else
  only=()
  [ -n "$bench_only" ] && only=(--only "$bench_only")
  "${openblas_env[@]}" "$bench_build/wfgen_bench" --csv "$results/latest.csv" --md "$results/latest.md" "${only[@]}"
fi

# Vectorisation of the generated relu(a*b+c) kernel: count the vector
# registers in its object file and keep the contiguous inner loop.
obj="$(find "$bench_build" -name 'relu_fma.cpp.o' | head -n 1)"
if [ "$run_bench" = 1 ] && [ -n "$obj" ] && command -v objdump >/dev/null; then
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

# The PyTorch peer section (issue 38): torch's eager mode on the same
# workloads, at the same thread counts, from the same weights and inputs,
# checked against wfgen's outputs before anything is timed
# (bench/torch_peer.py; wfgen's side is wfgen_peer, bench/peer.cpp). It
# needs python3-torch and python3-torchvision for /usr/bin/python3; without
# them it is skipped with a note in the report.
if [ "$torch_section" = 1 ]; then
  if /usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null; then
    peer_dir="$bench_build/peer"
    /usr/bin/python3 "$root/bench/torch_peer.py" export "$peer_dir"
    # --devices blas,cpu: the convolutions' GEMMs through OpenBLAS, which the
    # bench links anyway (as the CNN example's spec lists blas): over
    # ResNet-18's forward GEMMs ~25 % less time than wfgen's std-only GEMM
    # (docs/performance-history.md, issue 38 item 3).
    for m in resnet18 mobilenetv2; do
      "$WFGEN_EXE" import "$peer_dir/$m.onnx" -o "$peer_dir/$m.yaml" --params "$peer_dir/${m}_infer_1x3x224x224.wfparams" --name "$m" \
        --devices blas,cpu >/dev/null
    done
    cmake -S "$root/bench" -B "$bench_build" -DBENCH_PEER_DIR="$peer_dir" >/dev/null
    ninja -C "$bench_build" wfgen_peer >/dev/null
    "${openblas_env[@]}" /usr/bin/python3 "$root/bench/torch_peer.py" run "$peer_dir" "$bench_build/wfgen_peer" \
      "$results/latest.csv" "$results/latest.md" --passes "${BENCH_PASSES:-11}"
  else
    echo "run.sh: python3-torch or python3-torchvision is not importable by /usr/bin/python3: the PyTorch peer section is skipped"
    printf '\n## PyTorch peer (issue 38)\n\nSkipped: python3-torch and python3-torchvision are not importable by /usr/bin/python3 (apt-get install python3-torch python3-torchvision).\n' >>"$results/latest.md"
  fi
fi

echo "run.sh: wrote $results/latest.md and latest.csv in $(( $(date +%s) - start )) s"
