# Cross-compiling for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu;
# binaries run on the build machine under qemu-aarch64 (Debian's qemu-user)
# as CMake's CMAKE_CROSSCOMPILING_EMULATOR (ctest, Catch2's test discovery).
# Used with a wfgen installed for the build machine (docs/cross-compiling.md):
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=<prefix>/share/wfgen/toolchains/aarch64-linux-gnu.cmake \
#         -DCMAKE_PREFIX_PATH=<prefix>
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(WFGEN_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${WFGEN_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${WFGEN_CROSS_TRIPLE}-g++)
# The target's libraries and headers (Debian's cross packages put them here);
# programs are the build machine's. Packages are looked up in both: the
# host's wfgen package (its tool) is found through CMAKE_PREFIX_PATH, and
# compiles wfgen::runtime for this target from its installed sources.
set(CMAKE_FIND_ROOT_PATH /usr/${WFGEN_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
find_program(WFGEN_QEMU_AARCH64 qemu-aarch64)
if(WFGEN_QEMU_AARCH64)
  # -L: where the target's dynamic loader and shared libraries are.
  set(CMAKE_CROSSCOMPILING_EMULATOR "${WFGEN_QEMU_AARCH64};-L;/usr/${WFGEN_CROSS_TRIPLE}")
endif()
