#!/usr/bin/env bash
# wfgen_add_library(... WARNINGS_AS_ERRORS): a spec with a warning (an unused
# parameter) configures (the listing of the outputs only prints it), and its
# build fails at the generation step with the warning as an error; without
# the option the same generation step passes and prints the warning.
#   werror.sh PREFIX WORK
source "$(dirname "$0")/common.sh"
WFGEN_PREFIX=$1 work=$2
rm -rf "$work"
mkdir -p "$work/src"
cat >"$work/src/model.yaml" <<'YAML'
models:
  - name: Scale
    params:
      w: {shape: [4], init: ones}
      unused: {shape: [4], init: zeros}
    where: "X[batch 4] -> Y[batch 4]"
    call: |
      return X * w
builds:
  - {name: scale, model: Scale, dtype: f32, devices: [cpu]}
YAML
cat >"$work/src/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(werror CXX)
find_package(wfgen REQUIRED)
option(STRICT "warnings are errors" ON)
if(STRICT)
  wfgen_add_library(scale_lib SPECS model.yaml NAMESPACE werror WARNINGS_AS_ERRORS)
else()
  wfgen_add_library(scale_lib SPECS model.yaml NAMESPACE werror)
endif()
CMAKE
configure "$work/src" "$work/strict"
if cmake --build "$work/strict" >"$work/strict.log" 2>&1; then cat "$work/strict.log"; fail "the build passed despite WARNINGS_AS_ERRORS"; fi
grep -q "model.yaml:5:7: error: parameter 'unused' of model 'Scale' is never used \[-Werror,-Wunused-parameter\]" "$work/strict.log" ||
  { cat "$work/strict.log"; fail "the build did not fail with the warning as an error"; }
configure "$work/src" "$work/lenient" -DSTRICT=OFF
cmake --build "$work/lenient" >"$work/lenient.log" 2>&1 || { cat "$work/lenient.log"; fail "the build without WARNINGS_AS_ERRORS failed"; }
grep -q "warning: parameter 'unused' of model 'Scale' is never used \[-Wunused-parameter\]" "$work/lenient.log" ||
  { cat "$work/lenient.log"; fail "the warning was not printed"; }
echo "ok: WARNINGS_AS_ERRORS fails the generation step, and only it"
