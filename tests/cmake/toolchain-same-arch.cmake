# A cross-compiling toolchain for the machine's own architecture: CMake sets
# CMAKE_CROSSCOMPILING, so nothing built for the target may run at build
# time. wfgen_add_library() must then run the host's wfgen (the imported
# wfgen::wfgen of the installed package) while the library is compiled for
# the target. Used by the cmake.example.custom-kernel test.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR ${CMAKE_HOST_SYSTEM_PROCESSOR})
if(DEFINED ENV{WFGEN_TEST_CXX})  # the sanitizer build's compiler (tests/cmake/CMakeLists.txt)
  set(CMAKE_CXX_COMPILER $ENV{WFGEN_TEST_CXX})
else()
  set(CMAKE_CXX_COMPILER g++)
endif()
# The target's root file system is the host's (same architecture); programs
# are looked up on the host only.
set(CMAKE_FIND_ROOT_PATH /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
