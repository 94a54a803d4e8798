#!/usr/bin/env bash
# The command line flags added for build systems and users (docs/cli.md):
# --version, --help of every subcommand, exit codes, --dtype/--rank/--device,
# --jobs (output and errors unchanged), --no-fuse (accepted), -q/-v, --depfile, --check.
#   cli.sh WFGEN SOURCE_DIR WORK
set -uo pipefail
wfgen=$1 root=$2 work=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() {  # expect_rc CODE CMD...: runs CMD, fails unless it exits CODE
  local want=$1; shift
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc = "$want" ] || { cat "$work/out" "$work/err"; fail "'$*' exited $rc, expected $want"; }
}
rm -rf "$work" && mkdir -p "$work"
spec=$root/tests/projects/custom_kernels/spec.yaml

expect_rc 0 "$wfgen" --version
grep -qx "wfgen [0-9]*\.[0-9]*\.[0-9]*" "$work/out" || fail "--version printed '$(cat "$work/out")'"
for sub in check shape gen init disasm; do expect_rc 0 "$wfgen" $sub --help; done
expect_rc 2 "$wfgen"                              # no subcommand: usage error
expect_rc 2 "$wfgen" gen --no-such-flag -o "$work/x"
expect_rc 2 "$wfgen" gen "$spec" -o "$work/x" --dtype f16
grep -q "error: --dtype 'f16' is not a dtype" "$work/err" || fail "no clear message for --dtype f16: $(cat "$work/err")"
expect_rc 1 "$wfgen" shape "A[i j] B[j k] -> C[i k]" --in 2x3 --in 4x5

# Filters narrow the kernels of the user's impls.
all=$("$wfgen" gen "$spec" -o g --list-outputs | wc -l)
expect_rc 0 "$wfgen" gen "$spec" -o g --list-outputs --dtype f64 --rank 1
[ "$(wc -l <"$work/out")" -lt "$all" ] || fail "--dtype f64 --rank 1 did not narrow the outputs"
cd "$work"
expect_rc 0 "$wfgen" gen "$spec" -o full
expect_rc 0 "$wfgen" gen "$spec" -o f64 --dtype f64
grep -q 'f64_r' f64/scaleshift.cpp && ! grep -q 'scale_shift_f32\|scaleshift_f32' f64/scaleshift.cpp ||
  fail "--dtype f64 kept f32 kernels or lost the f64 ones"

# --jobs and --no-fuse change nothing; -q prints nothing; -v lists every file.
expect_rc 0 "$wfgen" gen "$spec" -o jobs --jobs 2 --no-fuse -q
[ ! -s "$work/err" ] || fail "-q printed: $(cat "$work/err")"
diff -r full jobs >/dev/null || fail "--jobs 2 --no-fuse changed the output"
# --jobs N on the whole standard library and every test model (many node
# files and builds): the same bytes as --jobs 1.
many=("$root/tests/models/models.yaml" "$root/tests/autodiff/grad_check.yaml" "$root/tests/autodiff/training.yaml")
expect_rc 0 "$wfgen" gen --stdlib "${many[@]}" -o jobs1 --jobs 1
expect_rc 0 "$wfgen" gen --stdlib "${many[@]}" -o jobs4 --jobs 4
[ "$(grep -c . jobs1/.wfgen-outputs)" -gt 100 ] || fail "--stdlib with the test models wrote only $(grep -c . jobs1/.wfgen-outputs) files"
diff -r jobs1 jobs4 || fail "--jobs 4 changed the output of --stdlib and the test models"
# ... and the same errors: the first failing build's (a sequential run
# stops there), after the --dump-after output of the builds before it.
cat >bad_builds.yaml <<'YAML'
models:
  - name: Good
    where: "X[n] -> Y[n]"
    call: |
      return relu(X)
  - name: BadShape
    args: {n: {type: int}}
    params:
      W: {shape: [3, 4], init: xavier}
    where: "X[batch n] -> Y[batch 4]"
    call: |
      return X @ W
  - name: BadSize
    where: "X[batch n] -> Y[batch n]"
    call: |
      k = X.size(0)
      return X * k
builds:
  - {name: good1, model: Good, dtype: f32, devices: [cpu]}
  - {name: bad_shape, model: BadShape, args: {n: 5}, dtype: f32, devices: [cpu]}
  - {name: good2, model: Good, dtype: f32, devices: [cpu]}
  - {name: bad_size, model: BadSize, dtype: f32, devices: [cpu]}
YAML
expect_rc 2 "$wfgen" gen bad_builds.yaml -o bad --jobs 1 --dump-after trace
cp "$work/err" err1
grep -q "^bad_builds.yaml:12:14: error: shape error" err1 || fail "--jobs 1 did not report the first bad build: $(cat err1)"
! grep -q "run-time size" err1 || fail "--jobs 1 reported the second bad build too: $(cat err1)"
for i in 1 2 3; do
  expect_rc 2 "$wfgen" gen bad_builds.yaml -o bad --jobs 4 --dump-after trace
  diff err1 "$work/err" || fail "--jobs 4 reported other errors than --jobs 1"
done
[ ! -e bad ] || fail "a failed gen wrote $work/bad"
rm -rf verbose
expect_rc 0 "$wfgen" -v gen "$spec" -o verbose
[ "$(grep -c '^wrote ' "$work/err")" = "$(grep -c . verbose/.wfgen-outputs)" ] || fail "-v did not list every file written"

# --depfile: the spec and the C++ kernel files it names.
expect_rc 0 "$wfgen" gen "$spec" -o full --depfile deps/full.d
grep -q "^$work/full/.wfgen-outputs:" deps/full.d || fail "depfile target: $(head -1 deps/full.d)"
for f in spec.yaml kernels/scale_shift.cpp kernels/row_scale.cpp; do
  grep -q "custom_kernels/$f" deps/full.d || fail "the depfile misses $f"
done

# Spec paths in generated files are relative to the working directory.
(cd "$root/tests/projects" && "$wfgen" gen custom_kernels/spec.yaml -o "$work/rel1" -q) || fail "gen from tests/projects"
(cd "$root/tests/projects" && "$wfgen" gen "$root/tests/projects/custom_kernels/spec.yaml" -o "$work/rel2" -q) || fail "gen with an absolute spec path"
diff -r rel1 rel2 || fail "an absolute spec path changed the generated files"
grep -rq "$root" rel1 && fail "generated files contain the checkout path $root"
grep -q '(custom_kernels/spec.yaml:' rel1/scaleshift.cpp || fail "generated comment does not name custom_kernels/spec.yaml"

# --check: 0 on the same files, 1 with a diff after an edit.
expect_rc 0 "$wfgen" gen "$spec" -o full --check
sed -i 's/alpha/ALPHA/' full/scaleshift.cpp
expect_rc 1 "$wfgen" gen "$spec" -o full --check
grep -q '^+++ full/scaleshift.cpp (generated)' "$work/out" || fail "--check printed no diff: $(head "$work/out")"
grep -q '^-.*ALPHA' "$work/out" && grep -q '^+.*alpha' "$work/out" || fail "--check diff lacks the edited lines"
echo "ok: wfgen command line"
