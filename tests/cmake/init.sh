#!/usr/bin/env bash
# `wfgen init` writes a project that configures (here with Unix Makefiles),
# builds and runs as is against the installed package, and refuses to write
# over existing files.
#   init.sh PREFIX WORK
source "$(dirname "$0")/common.sh"
WFGEN_PREFIX=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
wfgen=$WFGEN_PREFIX/bin/wfgen
"$wfgen" init "$work/hello-wfgen" || fail "wfgen init"
for f in model.yaml CMakeLists.txt main.cpp .gitignore; do
  [ -f "$work/hello-wfgen/$f" ] || fail "wfgen init did not write $f"
done
(cd "$work/hello-wfgen" && "$wfgen" check model.yaml) || fail "wfgen check on the new project"
GENERATOR="Unix Makefiles" configure "$work/hello-wfgen" "$work/hello-wfgen/build"
cmake --build "$work/hello-wfgen/build" -j 2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building the new project"; }
"$work/hello-wfgen/build/hello_wfgen" | tee "$work/run.log" || fail "running the new project"
grep -q '^Y = ' "$work/run.log" || fail "the new project printed no result"
# Make reruns nothing on a second build (the stamp and the depfile are right).
cmake --build "$work/hello-wfgen/build" >"$work/build2.log" 2>&1
grep -q 'wfgen: generating' "$work/build2.log" && { cat "$work/build2.log"; fail "a second make reran wfgen"; }

# Never overwrite: exit 1, nothing changed.
sum=$(md5sum "$work/hello-wfgen/main.cpp")
set +e
"$wfgen" init "$work/hello-wfgen" 2>"$work/again.err"
rc=$?
set -e
[ $rc = 1 ] || fail "wfgen init over an existing project exited $rc, expected 1"
grep -q 'exists already' "$work/again.err" || fail "wfgen init did not say which file exists"
[ "$(md5sum "$work/hello-wfgen/main.cpp")" = "$sum" ] || fail "wfgen init changed an existing file"
echo "ok: wfgen init"
