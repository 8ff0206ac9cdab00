# cmake -DBINARY=<executable> -DOBJCOPY=<objcopy> -DREADELF=<readelf> -P split_debug.cmake
#
# Run after each link of the executable (cmake/debug_file.cmake).  Writes
#   <BINARY>.debug     its debug sections and symbols (objcopy --only-keep-debug)
#   <BINARY>.build-id  its GNU build id in hex, one line (where `install --component dbg`
#                      puts the debug file)
# and gives BINARY a .gnu_debuglink naming <BINARY>.debug (with the file's CRC), so that a
# stripped copy of BINARY finds it.  The debug file is written under another name first: an
# interrupted run leaves no debug file that belongs to another link.
foreach(var BINARY OBJCOPY READELF)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "split_debug.cmake: -D${var}=... is missing")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "split_debug.cmake: '${ARGN}' failed (${rc}): ${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run(${READELF} -n ${BINARY})
if(NOT out MATCHES "Build ID: ([0-9a-f]+)")
  message(FATAL_ERROR "split_debug.cmake: ${BINARY} has no GNU build id (link it with "
                      "-Wl,--build-id)")
endif()
set(id ${CMAKE_MATCH_1})
file(REMOVE ${BINARY}.debug ${BINARY}.build-id)
run(${OBJCOPY} --only-keep-debug ${BINARY} ${BINARY}.debug.partial)
file(RENAME ${BINARY}.debug.partial ${BINARY}.debug)
run(${OBJCOPY} --remove-section=.gnu_debuglink --add-gnu-debuglink=${BINARY}.debug ${BINARY})
file(WRITE ${BINARY}.build-id "${id}\n")
