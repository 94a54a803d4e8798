# Included by the projects of tests/cross that compile a runtime (cross.sh,
# through CMAKE_PROJECT_INCLUDE: tests/cross/runtime for aarch64, each wasm
# project): the wfgen::runtime that find_package(wfgen)
# compiles from the package's sources for the target becomes one
# translation unit (tensor.cpp apart), as the host's runtime under
# WFGEN_FAST_COLD_BUILD (runtime/CMakeLists.txt): its small files
# spent most of their compile time parsing the same headers. The same
# sources and flags; only how they are grouped into compiler runs changes.
# Deferred to the end of the project's top folder, where find_package has
# made the target (wfgenConfig.cmake), so the project itself is unchanged.
function(_wfgen_test_unity_runtime)
  if(NOT TARGET wfgen_runtime)
    message(FATAL_ERROR "tests/cross/unity_runtime.cmake: the project compiled no wfgen_runtime (not a cross build?)")
  endif()
  set_target_properties(wfgen_runtime PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0)
  get_target_property(sources wfgen_runtime SOURCES)
  list(FILTER sources INCLUDE REGEX "/tensor\\.cpp$")
  set_source_files_properties(${sources} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  message(STATUS "wfgen: the suite compiles wfgen::runtime as one translation unit")
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _wfgen_test_unity_runtime)
