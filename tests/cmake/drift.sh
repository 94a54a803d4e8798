#!/usr/bin/env bash
# The COMMITTED workflow from a copy of examples/committed-kernels at another
# path (so generated files must not embed the checkout's location):
# the drift test passes on the committed files, fails with a diff when one
# is edited, and `wfgen gen --check` agrees; <target>_regenerate repairs it.
#   drift.sh PREFIX EXAMPLE WORK
source "$(dirname "$0")/common.sh"
WFGEN_PREFIX=$1 example=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cp -r "$example" "$work/copy"
src=$work/copy build=$work/build
configure "$src" "$build"
ctest --test-dir "$build" -R tanh_net_check_drift --output-on-failure >/dev/null ||
  fail "the drift check fails on an unmodified copy at another path (do generated files embed absolute paths?)"

# Edit a committed file: the drift test must fail and show the edit.
echo "// an edit by hand" >>"$src/generated/tanh_net.cpp"
if ctest --test-dir "$build" -R tanh_net_check_drift --output-on-failure >"$work/drift.log" 2>&1; then
  cat "$work/drift.log"; fail "the drift check passed although generated/tanh_net.cpp was edited"
fi
grep -q -- '-// an edit by hand' "$work/drift.log" || { cat "$work/drift.log"; fail "the drift check did not print a diff of the edit"; }
grep -q 'generated/tanh_net.cpp: differs' "$work/drift.log" || { cat "$work/drift.log"; fail "the drift check did not name the file"; }
echo "drift check output on an edited file:"; sed -n '/@@/,+6p' "$work/drift.log" | head -12

# The same from the command line: exit 1, the diff on stdout.
set +e
(cd "$src" && "$WFGEN_PREFIX/bin/wfgen" gen model.yaml -o generated --namespace committed --check >"$work/check.out" 2>"$work/check.err")
rc=$?
set -e
[ $rc = 1 ] || { cat "$work/check.err"; fail "wfgen gen --check exited $rc on a drifted directory, expected 1"; }
grep -q '^--- generated/tanh_net.cpp' "$work/check.out" || fail "wfgen gen --check printed no diff header"

# A stale file (listed in the manifest, no longer generated) is drift too.
cmake --build "$build" --target tanh_net_regenerate >/dev/null || fail "tanh_net_regenerate"
ctest --test-dir "$build" -R tanh_net_check_drift >/dev/null || fail "the drift check fails after tanh_net_regenerate"
echo "stale.cpp" >>"$src/generated/.wfgen-outputs"
echo "// old" >"$src/generated/stale.cpp"
if (cd "$src" && "$WFGEN_PREFIX/bin/wfgen" gen model.yaml -o generated --namespace committed --check >/dev/null 2>"$work/stale.err"); then
  fail "wfgen gen --check passed with a stale generated file"
fi
grep -q 'stale.cpp: stale' "$work/stale.err" || { cat "$work/stale.err"; fail "wfgen gen --check did not name the stale file"; }
echo "ok: the drift check passes on committed files and fails on edited or stale ones"
