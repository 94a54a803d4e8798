# wfgen_embed_files(<target> NAMESPACE <ns> FILES <files...>)
#
# Turns text files (schemas, templates, standard-library specs) into a C++
# source that defines `std::span<const wfgen::EmbeddedFile> <ns>::files()`,
# so the wfgen binary carries them and needs nothing at run time. The files
# are stored as byte arrays, so no content can break the generated C++.
function(wfgen_embed_files target)
  cmake_parse_arguments(ARG "" "NAMESPACE;BASE" "FILES" ${ARGN})
  set(out "${CMAKE_CURRENT_BINARY_DIR}/${target}_embedded.cpp")
  set(abs_files)
  foreach(f IN LISTS ARG_FILES)
    get_filename_component(a "${f}" ABSOLUTE)
    list(APPEND abs_files "${a}")
  endforeach()
  add_custom_command(
    OUTPUT "${out}"
    COMMAND "${CMAKE_COMMAND}" -DOUT=${out} -DNAMESPACE=${ARG_NAMESPACE} -DBASE=${ARG_BASE}
            "-DFILES=${abs_files}" -P "${PROJECT_SOURCE_DIR}/cmake/EmbedFilesScript.cmake"
    DEPENDS ${abs_files} "${PROJECT_SOURCE_DIR}/cmake/EmbedFilesScript.cmake"
    COMMENT "Embedding ${target} files"
    VERBATIM)
  add_library(${target} STATIC "${out}")
  target_include_directories(${target} PUBLIC "${PROJECT_SOURCE_DIR}")
endfunction()
