#!/usr/bin/env bash
# Touching or editing one spec (or a C++ kernel file it names) regenerates
# only its library and recompiles only the generated files that changed;
# touching a spec without changing it recompiles nothing. Under Ninja, or
# the generator in $GENERATOR ("Unix Makefiles": the cmake.incremental.makefiles test).
#   incremental.sh PREFIX PROJECT WORK
source "$(dirname "$0")/common.sh"
WFGEN_PREFIX=$1 project=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cp -r "$project" "$work/src"
src=$work/src build=$work/build
configure "$src" "$build"
cmake --build "$build" >/dev/null || fail "first build"
"$build/incremental" >/dev/null || fail "running the first build"

# Object files and the two stamps (the manifests wfgen rewrites on each run), with mtimes.
snapshot() { find "$build" \( -name '*.o' -o -name .wfgen-outputs \) -printf '%P %T@\n' | sort; }
changed() { join <(echo "$1") <(echo "$2") | awk '$2 != $3 {print $1}'; }
no_work() {
  local out
  if [ "${GENERATOR:-Ninja}" = Ninja ]; then
    out=$(ninja -C "$build" -n 2>&1)
    echo "$out" | grep -q "no work to do" || fail "a build after $1 still has work to do:"$'\n'"$out"
  else
    # Make has no dry run that CMake's recursive Makefiles answer: build
    # again and require that it neither generated nor compiled anything.
    out=$(cmake --build "$build" 2>&1)
    if echo "$out" | grep -Eq 'Generating|Building|wfgen: generating'; then
      fail "a build after $1 still had work to do:"$'\n'"$out"
    fi
  fi
}
no_work "the first build"

# 0. A spec touched but not changed: wfgen reruns (its manifest is the
# stamp) and finds every file unchanged, so nothing recompiles.
before=$(snapshot)
sleep 1
touch "$src/a.yaml"
cmake --build "$build" >/dev/null || fail "build after touching a.yaml"
c=$(changed "$before" "$(snapshot)")
echo "after touching a.yaml:"; echo "$c" | sed 's/^/  /'
echo "$c" | grep -q 'lib_a.wfgen/.wfgen-outputs' || fail "touching a.yaml did not rerun wfgen for lib_a"
echo "$c" | grep -q '\.o$' && fail "touching a.yaml without changing it recompiled:"$'\n'"$(echo "$c" | grep '\.o$')"
no_work "touching a.yaml"

# 1. The C++ kernel file named by a.yaml (a dependency from wfgen's depfile).
before=$(snapshot)
sleep 1
touch "$src/kernels/twice.cpp"
cmake --build "$build" >/dev/null || fail "build after touching kernels/twice.cpp"
c=$(changed "$before" "$(snapshot)")
echo "after touching kernels/twice.cpp:"; echo "$c" | sed 's/^/  /'
echo "$c" | grep -q 'lib_a.wfgen/.wfgen-outputs' || fail "touching kernels/twice.cpp did not rerun wfgen for lib_a"
echo "$c" | grep -q 'lib_b' && fail "touching kernels/twice.cpp touched lib_b"
echo "$c" | grep -q 'matmul' && fail "touching kernels/twice.cpp recompiled an unrelated kernel"
no_work "touching kernels/twice.cpp"

# 2. An edit of a.yaml that changes only the model class (its seed).
before=$(snapshot)
sleep 1
sed -i 's/seed: 1}/seed: 5}/' "$src/a.yaml"
cmake --build "$build" >/dev/null || fail "build after editing a.yaml"
c=$(changed "$before" "$(snapshot)")
echo "after changing the seed in a.yaml:"; echo "$c" | sed 's/^/  /'
echo "$c" | grep -q 'lib_a.wfgen/.wfgen-outputs' || fail "editing a.yaml did not rerun wfgen for lib_a"
echo "$c" | grep -q 'model_a.cpp.o' || fail "editing a.yaml did not recompile model_a.cpp"
echo "$c" | grep -q 'lib_b' && fail "editing a.yaml regenerated or recompiled lib_b"
echo "$c" | grep -Eq 'twice|matmul' && fail "editing a.yaml recompiled kernels whose source did not change"
no_work "editing a.yaml"
"$build/incremental" >/dev/null || fail "running the rebuilt binary"

# 3. A generated file deleted by hand is written again (Make has no rule for
# it: wfgenCheckOutputs.cmake removes the stamp), and only it recompiles.
rm "$build/lib_a.wfgen/model_a.cpp"
cmake --build "$build" >/dev/null || fail "build after deleting lib_a.wfgen/model_a.cpp"
[ -f "$build/lib_a.wfgen/model_a.cpp" ] || fail "lib_a.wfgen/model_a.cpp was not generated again"
no_work "regenerating a deleted file"
echo "ok: only the outputs of the edited spec were regenerated and recompiled"
