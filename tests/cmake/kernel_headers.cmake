# cmake -DHEADERS=<list> -DKERNEL_FILE=<a generated kernel .cpp> -P kernel_headers.cmake
#
# The headers wfgen_add_library precompiles (WFGEN_KERNEL_HEADERS in
# cmake/wfgenAddLibrary.cmake) must be the ones a generated kernel file
# includes (wfgen/emit/emit_kernels.cpp writes them): the two lists live in
# two languages, and when they drift apart nothing fails, the precompiled
# header only stops saving time. This compares them: every <...> include and
# every "wfgen/..." include of the file against the list, both ways.
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED HEADERS OR NOT DEFINED KERNEL_FILE)
  message(FATAL_ERROR "usage: cmake -DHEADERS=<list> -DKERNEL_FILE=<file> -P kernel_headers.cmake")
endif()
file(STRINGS "${KERNEL_FILE}" lines REGEX "^#include ")
set(included "")
foreach(line IN LISTS lines)
  if(line MATCHES "^#include (<[^>]+>)")
    list(APPEND included "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^#include \"(wfgen/[^\"]+)\"")
    list(APPEND included "<${CMAKE_MATCH_1}>")
  endif()
endforeach()
set(missing "")
foreach(h IN LISTS included)
  if(NOT h IN_LIST HEADERS)
    list(APPEND missing "${h}")
  endif()
endforeach()
set(extra "")
foreach(h IN LISTS HEADERS)
  if(NOT h IN_LIST included)
    list(APPEND extra "${h}")
  endif()
endforeach()
if(missing OR extra OR NOT included)
  message(FATAL_ERROR "WFGEN_KERNEL_HEADERS (cmake/wfgenAddLibrary.cmake) and the includes of ${KERNEL_FILE} "
                      "(wfgen/emit/emit_kernels.cpp) differ:\n  included, not precompiled: ${missing}\n"
                      "  precompiled, not included: ${extra}")
endif()
list(LENGTH included n)
message(STATUS "the ${n} headers of ${KERNEL_FILE} are the precompiled ones")
