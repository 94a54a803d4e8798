# Cross-compiling for WebAssembly (wasm32) with Debian's emscripten, with
# 128-bit SIMD (-msimd128); programs run under node as CMake's
# CMAKE_CROSSCOMPILING_EMULATOR. Emscripten's own toolchain file does the
# rest. Used with a wfgen installed for the build machine
# (docs/cross-compiling.md):
#   cmake -S . -B build-wasm -DCMAKE_TOOLCHAIN_FILE=<prefix>/share/wfgen/toolchains/wasm32-emscripten.cmake \
#         -DCMAKE_PREFIX_PATH=<prefix>
find_program(WFGEN_NODE node REQUIRED)
# Emscripten 3.1.6's generated JS loads the .wasm with fetch() when there is
# one, and node 18+ has one that takes no file paths: node reads it from the
# file system without it.
set(CMAKE_CROSSCOMPILING_EMULATOR "${WFGEN_NODE};--no-experimental-fetch")
if(DEFINED ENV{EMSCRIPTEN_ROOT})
  set(WFGEN_EMSCRIPTEN_ROOT "$ENV{EMSCRIPTEN_ROOT}")
else()
  set(WFGEN_EMSCRIPTEN_ROOT /usr/share/emscripten)  # Debian's emscripten
endif()
include("${WFGEN_EMSCRIPTEN_ROOT}/cmake/Modules/Platform/Emscripten.cmake")
set(CMAKE_CXX_FLAGS_INIT "-msimd128")
set(CMAKE_C_FLAGS_INIT "-msimd128")
# Emscripten's file looks up packages in its sysroot only; the host's wfgen
# package (its tool) is found through CMAKE_PREFIX_PATH too, and compiles
# wfgen::runtime for wasm32 from its installed sources.
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# em++ links with node scripts that require() Debian's node modules (acorn,
# in /usr/share/nodejs): a node that does not look there by default (not
# Debian's own) is pointed at them for the link step.
execute_process(COMMAND "${WFGEN_NODE}" -e "require('acorn')" RESULT_VARIABLE _wfgen_acorn OUTPUT_QUIET ERROR_QUIET)
if(NOT _wfgen_acorn EQUAL 0 AND EXISTS /usr/share/nodejs/acorn)
  set(CMAKE_CXX_LINKER_LAUNCHER "${CMAKE_COMMAND};-E;env;NODE_PATH=/usr/share/nodejs")
endif()
