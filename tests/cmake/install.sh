#!/usr/bin/env bash
# Fixture: installs the wfgen of this build tree into a fresh prefix that the
# other tests in tests/cmake configure against.
#   install.sh BUILD_DIR PREFIX
set -euo pipefail
build=$1 prefix=$2
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in bin/wfgen lib/libwfgen_runtime.a include/wfgen/runtime.hpp include/wfgen/kernel_support.hpp \
         lib/cmake/wfgen/wfgenConfig.cmake lib/cmake/wfgen/wfgenConfigVersion.cmake lib/cmake/wfgen/wfgenAddLibrary.cmake \
         lib/cmake/wfgen/wfgenRuntimeTargets.cmake lib/cmake/wfgen/wfgenToolTargets.cmake \
         share/wfgen/stdlib/nodes.yaml share/wfgen/schemas/spec.schema.json; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $prefix/$f was not installed"; exit 1; }
done
"$prefix/bin/wfgen" --version
echo "installed into $prefix"

# The runtime component alone (no tool): enough for COMMITTED libraries.
rm -rf "$prefix-runtime"
cmake --install "$build" --prefix "$prefix-runtime" --component runtime >/dev/null
[ -e "$prefix-runtime/lib/cmake/wfgen/wfgenConfig.cmake" ] || { echo "FAIL: the runtime component has no package"; exit 1; }
[ ! -e "$prefix-runtime/bin/wfgen" ] && [ ! -e "$prefix-runtime/lib/cmake/wfgen/wfgenToolTargets.cmake" ] ||
  { echo "FAIL: the runtime component installed the tool"; exit 1; }
echo "installed the runtime component alone into $prefix-runtime"
