# cmake -DSTAMP=<dir>/.wfgen-outputs -DFILES=<generated files> -P wfgenCheckOutputs.cmake
#
# Used by wfgen_add_library() under Makefile generators, before each build of
# the library: the generated files are BYPRODUCTS of the wfgen command (so
# that unchanged ones keep their mtime), and Make has no rule to remake a
# byproduct. When one is missing (deleted by hand), the stamp is removed, so
# the wfgen command runs again and writes it.
foreach(f IN LISTS FILES)
  if(NOT EXISTS "${f}")
    file(REMOVE "${STAMP}")
    break()
  endif()
endforeach()
