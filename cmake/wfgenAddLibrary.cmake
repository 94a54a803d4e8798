# wfgen_add_library(): generate C++ from wfgen specs at build time and
# compile it into a static library linked to wfgen::runtime. Modelled on
# Halide's add_halide_library(). Documented in docs/cmake.md.
#
# This file is included by the installed package (wfgenConfig.cmake) and by
# wfgen's own CMakeLists.txt (for add_subdirectory/FetchContent users); both
# define the targets wfgen::runtime and (when the tool is there) wfgen::wfgen.
include_guard(GLOBAL)
set(_WFGEN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}" CACHE INTERNAL "where wfgenAddLibrary.cmake and its scripts are")

# Functions run with the policies in effect where they are defined: DEPFILE
# paths are relative to the build tree with CMP0116 (Ninja).
cmake_policy(PUSH)
cmake_policy(VERSION 3.25)

# Runs wfgen (configure time) with `args`; fails with its output on error.
function(_wfgen_run out_var)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "WORKING_DIRECTORY;TOOL" "ARGS")
  execute_process(COMMAND "${ARG_TOOL}" ${ARG_ARGS}
                  WORKING_DIRECTORY "${ARG_WORKING_DIRECTORY}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    list(JOIN ARG_ARGS " " shown)
    message(FATAL_ERROR "wfgen_add_library: `wfgen ${shown}` failed (exit ${rc}) in ${ARG_WORKING_DIRECTORY}:\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# Every kernel file wfgen writes starts with the same standard headers and
# the runtime's two kernel headers (emit_kernels.cpp writes the list, the
# test cmake.kernel_headers checks that the two agree;
# tests/onnx/conformance.py reads it from here); parsing
# them is about half of a small kernel file's compile time (1.7 of 3.4 s at
# -O3 with g++ 12). _wfgen_precompile_kernel_headers(<target> [REUSE_FROM
# <other>]) precompiles them once for <target> (or reuses <other>'s, which
# must be compiled with the same flags). ccache caches such compiles only
# with the sloppiness set here, and only when ccache is the launcher.
# CMAKE_DISABLE_PRECOMPILE_HEADERS=ON turns it off, as for any target.
set(WFGEN_KERNEL_HEADERS <cmath> <cstdint> <limits> <span> <string> <utility> <vector> <wfgen/kernel_math.hpp>
                         <wfgen/kernel_support.hpp> CACHE INTERNAL "the headers every generated kernel file includes")
function(_wfgen_precompile_kernel_headers target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "REUSE_FROM" "")
  if(ARG_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${ARG_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE ${WFGEN_KERNEL_HEADERS})
  endif()
  _wfgen_ccache_pch(${target})
endfunction()

# Lets ccache cache the compiles of <target>, which uses a precompiled header.
function(_wfgen_ccache_pch target)
  get_target_property(launcher ${target} CXX_COMPILER_LAUNCHER)
  if(launcher MATCHES "ccache" AND NOT launcher MATCHES "CCACHE_SLOPPINESS")
    set_target_properties(${target} PROPERTIES CXX_COMPILER_LAUNCHER
      "${CMAKE_COMMAND};-E;env;CCACHE_SLOPPINESS=pch_defines,time_macros;${launcher}")
  endif()
endfunction()

function(wfgen_add_library target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "COMMITTED;NO_FUSE;WARNINGS_AS_ERRORS" "NAMESPACE;OUTPUT_DIR"
                        "SPECS;BUILDS;NODES;DTYPES;RANKS;DEVICES")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "wfgen_add_library(${target}): unknown arguments: ${ARG_UNPARSED_ARGUMENTS} "
                        "(expected SPECS, BUILDS, NODES, DTYPES, RANKS, DEVICES, NAMESPACE, OUTPUT_DIR, COMMITTED, NO_FUSE, "
                        "WARNINGS_AS_ERRORS)")
  endif()
  if(NOT ARG_SPECS)
    message(FATAL_ERROR "wfgen_add_library(${target}): SPECS is required (the spec files to generate from)")
  endif()

  # wfgen runs in this directory, and is given the spec paths relative to it,
  # so generated comments ("model.yaml:12:3") do not depend on where the
  # checkout lives: committed files stay byte-identical across machines.
  set(workdir "${CMAKE_CURRENT_SOURCE_DIR}")
  set(spec_args "")
  set(spec_files "")
  set(spec_dirs "")
  foreach(spec IN LISTS ARG_SPECS)
    get_filename_component(abs "${spec}" ABSOLUTE BASE_DIR "${workdir}")
    if(NOT EXISTS "${abs}")
      message(FATAL_ERROR "wfgen_add_library(${target}): spec file not found: ${abs}")
    endif()
    file(RELATIVE_PATH rel "${workdir}" "${abs}")
    list(APPEND spec_args "${rel}")
    list(APPEND spec_files "${abs}")
    get_filename_component(dir "${abs}" DIRECTORY)
    list(APPEND spec_dirs "${dir}")
  endforeach()
  list(REMOVE_DUPLICATES spec_dirs)

  if(ARG_OUTPUT_DIR)
    if(ARG_COMMITTED)
      get_filename_component(outdir "${ARG_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    else()
      get_filename_component(outdir "${ARG_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
    endif()
  elseif(ARG_COMMITTED)
    set(outdir "${CMAKE_CURRENT_SOURCE_DIR}/generated/${target}")
  else()
    set(outdir "${CMAKE_CURRENT_BINARY_DIR}/${target}.wfgen")
  endif()

  # The `wfgen gen` command line. A committed OUTPUT_DIR is given relative to
  # the working directory, as a user would type it (the drift report names
  # "generated/x.cpp", not a path of this machine).
  set(outdir_arg "${outdir}")
  if(ARG_COMMITTED)
    file(RELATIVE_PATH rel_outdir "${workdir}" "${outdir}")
    if(NOT rel_outdir MATCHES "^\\.\\./")
      set(outdir_arg "${rel_outdir}")
    endif()
  endif()
  set(gen_args gen ${spec_args})
  if(ARG_NAMESPACE)
    list(APPEND gen_args --namespace "${ARG_NAMESPACE}")
  endif()
  foreach(opt IN ITEMS BUILDS:--build NODES:--node DTYPES:--dtype RANKS:--rank DEVICES:--device)
    string(REPLACE ":" ";" pair "${opt}")
    list(GET pair 0 key)
    list(GET pair 1 flag)
    foreach(v IN LISTS ARG_${key})
      list(APPEND gen_args "${flag}" "${v}")
    endforeach()
  endforeach()
  if(ARG_NO_FUSE)
    list(APPEND gen_args --no-fuse)
  endif()
  # Warnings (unused parameters, truncations, ...; docs/diagnostics.md) fail
  # the generation step, not the configure step that lists the outputs.
  set(werror_args "")
  if(ARG_WARNINGS_AS_ERRORS)
    set(werror_args --warnings-as-errors)
  endif()

  # The tool: an imported executable (installed package, or a host build
  # when cross-compiling) can run at configure time; the in-tree target of
  # an add_subdirectory(wfgen) build does not exist before the build.
  set(tool "")
  set(tool_file "")
  if(TARGET wfgen::wfgen)
    get_target_property(aliased wfgen::wfgen ALIASED_TARGET)
    if(aliased)
      set(tool "${aliased}")  # add_custom_command wants the real name to add the target dependency
      set(tool_file "${aliased}")
    else()
      set(tool wfgen::wfgen)
      get_target_property(tool_file wfgen::wfgen LOCATION)
    endif()
  endif()
  set(uses_slots FALSE)
  set(outputs_check "")

  if(ARG_COMMITTED)
    # The generated files are in the source tree, listed in the manifest
    # wfgen writes next to them: no wfgen needed to build.
    set(manifest "${outdir}/.wfgen-outputs")
    if(NOT EXISTS "${manifest}")
      list(JOIN gen_args " " shown)
      message(FATAL_ERROR "wfgen_add_library(${target}) COMMITTED: ${manifest} does not exist; generate the files "
                          "once (and commit them) with\n  cd ${workdir} && wfgen ${shown} -o ${outdir_arg}")
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${manifest}")
    file(STRINGS "${manifest}" rel_outputs)
    set(outputs "")
    foreach(rel IN LISTS rel_outputs)
      list(APPEND outputs "${outdir}/${rel}")
    endforeach()
    set(gen_sources ${outputs})
  elseif(NOT tool)
    message(FATAL_ERROR "wfgen_add_library(${target}): the wfgen tool (target wfgen::wfgen) is not available; "
                        "install wfgen with its tool, or use COMMITTED with generated files in the source tree")
  else()
    set(stamp "${outdir}/.wfgen-outputs")
    set(depfile "${CMAKE_CURRENT_BINARY_DIR}/${target}.wfgen.d")
    set(gen_command COMMAND ${tool} ${gen_args} ${werror_args} -o "${outdir}" --depfile "${depfile}" --quiet)
    if(NOT aliased)
      # Which files `wfgen gen` writes, known at configure time. Configure
      # reruns when a spec changes, since that may change the list.
      _wfgen_run(listed TOOL "${tool_file}" WORKING_DIRECTORY "${workdir}"
                 ARGS ${gen_args} -o "${outdir}" --list-outputs)
      set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${spec_files})
      string(REPLACE "\n" ";" outputs "${listed}")
      list(FILTER outputs EXCLUDE REGEX "^$")
      set(compiled ${outputs})
    else()
      # In-tree tool: the outputs are known only after it ran. The library
      # compiles a fixed number of "slot" files instead, each #including one
      # generated .cpp (or nothing), rewritten only when that changes; one
      # generated file per translation unit as in the installed case.
      set(uses_slots TRUE)
      if(NOT DEFINED WFGEN_MAX_GENERATED_SOURCES)
        set(WFGEN_MAX_GENERATED_SOURCES 48)
      endif()
      set(slot_dir "${CMAKE_CURRENT_BINARY_DIR}/${target}.slots")
      set(compiled "")
      math(EXPR last "${WFGEN_MAX_GENERATED_SOURCES} - 1")
      foreach(i RANGE ${last})
        list(APPEND compiled "${slot_dir}/slot_${i}.cpp")
      endforeach()
      list(APPEND gen_command COMMAND "${CMAKE_COMMAND}" -DOUTDIR=${outdir} -DSLOT_DIR=${slot_dir}
           -DCOUNT=${WFGEN_MAX_GENERATED_SOURCES} -DTARGET=${target} -P "${_WFGEN_CMAKE_DIR}/wfgenSlots.cmake")
      set(outputs ${compiled})
    endif()
    # The manifest is rewritten on every run: it is the one OUTPUT, the
    # stamp the build tool compares against. The generated files are
    # BYPRODUCTS: unchanged ones keep their mtime (wfgen writes only what
    # changed), so only changed ones recompile, under Ninja (restat) and
    # Unix Makefiles alike. As OUTPUTs, Makefiles gave each one a rule
    # `file: stamp` that touched it (touch_nocreate) whenever the stamp was
    # newer: every generated file recompiled after any spec edit.
    add_custom_command(
      OUTPUT "${stamp}"
      BYPRODUCTS ${compiled}
      ${gen_command}
      DEPENDS ${spec_files} ${tool_file}
      DEPFILE "${depfile}"
      WORKING_DIRECTORY "${workdir}"
      COMMENT "wfgen: generating ${target}"
      VERBATIM)
    set(gen_sources "${stamp}" ${compiled})
    if(CMAKE_GENERATOR MATCHES "Makefiles")
      # Make has no rule for a byproduct deleted by hand: before each build,
      # a missing one removes the stamp, so wfgen runs again.
      add_custom_target(${target}_outputs
        COMMAND "${CMAKE_COMMAND}" "-DSTAMP=${stamp}" "-DFILES=${compiled}" -P "${_WFGEN_CMAKE_DIR}/wfgenCheckOutputs.cmake"
        VERBATIM)
      set(outputs_check ${target}_outputs)
    endif()
  endif()

  # Generated sources are every .cpp; headers are found through the include path.
  set(cpp_sources ${outputs})
  list(FILTER cpp_sources INCLUDE REGEX "\\.cpp$")
  add_library(${target} STATIC ${gen_sources})
  if(outputs_check)
    add_dependencies(${target} ${outputs_check})
  endif()
  target_include_directories(${target} PUBLIC "${outdir}")
  # Kernels written in C++ by the user are #included as the spec names them,
  # relative to the spec's folder.
  target_include_directories(${target} PRIVATE ${spec_dirs})
  target_link_libraries(${target} PUBLIC wfgen::runtime)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # The kernels never read floating-point exception flags, so the compiler
  # may evaluate a comparison it cannot prove will not raise one: without
  # this, GCC leaves a loop of two nested `max` (ONNX's Clip(0, 6) as
  # relu(x - relu(x - 6))) scalar, with a branch per element, 6x slower
  # (docs/performance.md). Results are bit-identical (no reassociation).
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang,AppleClang>:-fno-trapping-math>)
  _wfgen_precompile_kernel_headers(${target})
  # A model file (the .cpp of a <build>.hpp) includes other headers: compiled
  # as written, so a missing include shows. (Behind the in-tree tool's slots
  # the outputs are unknown at configure time and every file uses the header.)
  foreach(src IN LISTS cpp_sources)
    string(REGEX REPLACE "\\.cpp$" ".hpp" header "${src}")
    if(header IN_LIST outputs)
      set_source_files_properties("${src}" TARGET_DIRECTORY ${target} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()

  # A BLAS implementation was chosen when a kernel of the blas device was
  # generated ("matmul_blas.cpp"): link OpenBLAS (or the system BLAS).
  # With the in-tree tool the outputs are unknown at configure time: then
  # BLAS is linked whenever it is found.
  set(blas_outputs ${cpp_sources})
  list(FILTER blas_outputs INCLUDE REGEX "_blas[^/]*\\.cpp$")
  if(uses_slots)
    find_package(BLAS QUIET)
    set(blas_outputs ${BLAS_FOUND})
  endif()
  # A cross build (or WFGEN_NO_BLAS=ON) that finds no BLAS for its target
  # compiles those kernels with WFGEN_NO_BLAS: wfgen's std-only GEMM instead
  # (blas_support.hpp; docs/cross-compiling.md).
  set(uses_blas OFF)
  if(blas_outputs)
    set(uses_blas ON)
    if(WFGEN_NO_BLAS)
      set(uses_blas OFF)
    elseif(CMAKE_CROSSCOMPILING)
      find_package(BLAS QUIET)
      if(NOT BLAS_FOUND)
        set(uses_blas OFF)
      endif()
    endif()
    if(uses_blas)
      find_package(BLAS REQUIRED)
      target_link_libraries(${target} PUBLIC ${BLAS_LIBRARIES})
    elseif(NOT uses_slots)
      message(STATUS "wfgen_add_library(${target}): no BLAS for ${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}: "
                     "the blas device's kernels use wfgen's std-only GEMM (WFGEN_NO_BLAS)")
      target_compile_definitions(${target} PUBLIC WFGEN_NO_BLAS)
    endif()
  endif()
  set_target_properties(${target} PROPERTIES WFGEN_OUTPUT_DIR "${outdir}" WFGEN_USES_BLAS ${uses_blas})

  if(ARG_COMMITTED)
    if(tool)
      # Regenerate the committed files on request, and check them for drift
      # (ctest): --check compares in memory and prints a diff.
      add_custom_target(${target}_regenerate
        COMMAND ${tool} ${gen_args} ${werror_args} -o "${outdir_arg}"
        WORKING_DIRECTORY "${workdir}"
        COMMENT "wfgen: regenerating the committed sources of ${target} in ${outdir}"
        VERBATIM)
      add_test(NAME ${target}_check_drift
               COMMAND ${tool} ${gen_args} ${werror_args} -o "${outdir_arg}" --check
               WORKING_DIRECTORY "${workdir}")
    else()
      message(STATUS "wfgen_add_library(${target}): the wfgen tool is not available, so no ${target}_check_drift test")
    endif()
  endif()
endfunction()

cmake_policy(POP)
