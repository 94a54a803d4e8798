#!/usr/bin/env bash
# Fails when a binary needs a shared library beyond the C/C++ runtime
# (libc, libm, libstdc++, libgcc_s, libpthread, the dynamic loader, the
# vDSO), plus BLAS and its Fortran runtime for binaries marked blas:.
#   ldd.sh [blas:]BINARY...
# It first checks that it rejects a binary that does link more (the wfgen
# tool itself, which links libclang-cpp), so it cannot pass vacuously.
set -euo pipefail
base='linux-vdso\.so|libc\.so|libm\.so|libstdc\+\+\.so|libgcc_s\.so|libpthread\.so|ld-linux[-a-z0-9_]*\.so'
blas='libopenblas[a-z0-9_]*\.so|libblas\.so|libcblas\.so|libgfortran\.so|libquadmath\.so'
# In the sanitizer build (WFGEN_LDD_SANITIZERS=1) the binaries also need the
# sanitizers' run-time libraries (shared with GCC, linked in with Clang).
if [ -n "${WFGEN_LDD_SANITIZERS:-}" ]; then base="$base|libasan\.so|libubsan\.so"; fi

# check BINARY ALLOWED_REGEX: prints the libraries not allowed; fails if any.
check() {
  local bin=$1 allowed=$2 extra
  [ -x "$bin" ] || { echo "FAIL: $bin does not exist (did its example build?)"; return 2; }
  extra=$(ldd "$bin" | awk '{print $1}' | sed 's|.*/||' | grep -Ev "^($allowed)" || true)
  if [ -n "$extra" ]; then
    echo "$bin needs more than the C++ runtime:"
    echo "$extra" | sed 's/^/  /'
    return 1
  fi
  return 0
}

if [ -n "${WFGEN_LDD_NEGATIVE:-}" ]; then
  if check "$WFGEN_LDD_NEGATIVE" "$base" >/dev/null; then
    echo "FAIL: the check accepts $WFGEN_LDD_NEGATIVE, which links more than the C++ runtime"; exit 1
  fi
fi
status=0
for arg in "$@"; do
  if [[ $arg == blas:* ]]; then
    bin=${arg#blas:}
    check "$bin" "$base|$blas" || status=1
  else
    bin=$arg
    check "$bin" "$base" || status=1
  fi
  [ $status = 0 ] && echo "ok: $bin: $(ldd "$bin" | awk '{print $1}' | tr '\n' ' ')"
done
exit $status
